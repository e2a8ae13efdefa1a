"""schemathesis against /openapi.json on the app served in process (tests/support/apifuzz.py): no 5xx, no status,
header, content type or body outside the document, a 405 with Allow for every method a path does
not have, no write without its token, stateful sequences (a job submitted, then read and
cancelled) included. Short and on a fixed seed here; `python bench/apifuzz.py` runs it long.
"""

from __future__ import annotations

from pathlib import Path


from support.apifuzz import populate, run_schemathesis
from support.server import ServerFactory


SEED = 15


def test_the_api_as_an_admin_sees_it(serve_app: ServerFactory, tmp_path: Path) -> None:
    server = serve_app(agents=4)
    populate(server)
    run = run_schemathesis(server, tmp_path / "admin", token=server.tokens["admin"], seed=SEED, examples=10,
                           phases="examples,fuzzing,stateful")
    assert run.returncode == 0 and not run.failures, "\n".join(run.failures) or run.output[-6000:]
    assert run.cases >= 200, run.output[-3000:]  # it did run: a few hundred requests


def test_reports_as_an_agent_sees_them(serve_app: ServerFactory, tmp_path: Path) -> None:
    """POST /v1/nodes needs an agent token (an admin's is a 403): the bodies are not documents
    (schemathesis wraps XML in <data>), so every answer is a documented refusal."""
    server = serve_app(agents=2)
    run = run_schemathesis(server, tmp_path / "agent", token=server.agent_token(), seed=SEED, examples=20,
                           include_path="/v1/nodes")
    assert run.returncode == 0 and not run.failures, "\n".join(run.failures) or run.output[-6000:]
    assert run.cases >= 20, run.output[-3000:]
