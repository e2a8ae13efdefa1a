# Every target makes .venv itself, so a fresh clone needs only `make run` or `make test`.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
LISTEN ?= 127.0.0.1:8080

.PHONY: run test bench soak clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[server,test]'
	touch $(STAMP)

# The aggregator on an embedded SQLite file in var/, with an agent for this host (Ctrl-C stops both),
# and an admin and a submit token for you beside the file (it prints how to use them). RUN_JOBS=1:
# the agent also runs the jobs placed on this host, as you (never as root).
RUN_JOBS ?=
run: $(STAMP)
	mkdir -p var
	$(VENV)/bin/infosvc serve --db var/infosvc.sqlite --local-agent --user-tokens \
		$(if $(filter 1 yes true,$(RUN_JOBS)),--run-jobs) --listen $(LISTEN)

# The suite on both cores (pytest-xdist), then the tests that time the service from outside, alone.
test: $(STAMP)
	$(VENV)/bin/mypy
	$(PY) -m pytest -q -n 2 -m "not serial"
	$(PY) -m pytest -q -p no:xdist -m serial

bench: $(STAMP)
	$(PY) bench/run.py

# AGENTS simulated agents report every INTERVAL s for MINUTES to one `infosvc serve` on loopback;
# then every acknowledged report is looked for in the store and as served (bench/soak.py,
# docs/reliability.md). CONNECTIONS: short (one per report, as the agent), pool, or own (one kept
# open per agent: needs `ulimit -n` above AGENTS).
AGENTS      ?= 10000
MINUTES     ?= 10
INTERVAL    ?= 60
CONNECTIONS ?= short
soak: $(STAMP)
	$(PY) bench/soak.py --agents $(AGENTS) --minutes $(MINUTES) --interval $(INTERVAL) --connections $(CONNECTIONS)

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis var
