"""The layout of docs/architecture.md, checked: each package imports only those below it, and no service
module grows past the size a reader takes in at once (a spec's own model or codec excepted)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

#: Each part of infosvc/, lowest first: a module may import its own part and those before it.
LAYERS = ("controls", "errors", "loglimit", "model", "codec", "matching", "sched", "store", "config", "lrms", "hosts", "queue", "publish", "federation", "web", "cli")
#: The host agent needs only what a sample needs: the model and the SSS Node codec; and its text log
#: the escaping of the server's (controls).
AGENT_MAY_IMPORT = ("infosvc", "infosvc.model", "infosvc.codec.node_xml", "infosvc.codec.xmltext", "infosvc.controls")
#: Lines a service module may have; the specs' own models and codecs are as long as the spec.
MAX_LINES = 450
SPEC_MODULES = {"infosvc/model/job.py", "infosvc/codec/job_xml.py"}


def _part(path: Path) -> str:
    relative = path.relative_to(ROOT / "infosvc")
    return relative.parts[0].removesuffix(".py") if len(relative.parts) > 1 or relative.stem != "__init__" else ""


def _imports(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append(node.module)
        elif isinstance(node, ast.Import):
            found.extend(alias.name for alias in node.names)
    return [name for name in found if name == "infosvc" or name.startswith("infosvc.")]


def test_no_part_imports_a_part_above_it() -> None:
    upward = []
    for path in sorted((ROOT / "infosvc").rglob("*.py")):
        part = _part(path)
        if part in ("", "__main__"):
            continue
        assert part in LAYERS, f"{path}: infosvc/{part} is not in LAYERS; say where it sits"
        for name in _imports(path):
            target = name.split(".")[1] if "." in name else ""
            if target and target != "__main__" and LAYERS.index(target) > LAYERS.index(part):
                upward.append(f"{path.relative_to(ROOT)} imports {name}")
    assert not upward, "\n".join(upward)


def test_the_agent_imports_only_the_model_and_the_node_codec() -> None:
    wrong = [f"{path.relative_to(ROOT)} imports {name}"
             for path in sorted((ROOT / "agents" / "infosvc_agents").rglob("*.py"))
             for name in _imports(path)
             if not any(name == allowed or name.startswith(allowed + ".") for allowed in AGENT_MAY_IMPORT[1:])
             and name != "infosvc"]
    assert not wrong, "\n".join(wrong)


def test_no_service_module_is_longer_than_a_reader_takes_in() -> None:
    long = {str(path.relative_to(ROOT)): lines for path in (ROOT / "infosvc").rglob("*.py")
            if (lines := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert set(long) <= SPEC_MODULES, {k: v for k, v in long.items() if k not in SPEC_MODULES}


#: The packages that hold an aggregate or the config: every other package imports them by their
#: face (the package's __init__), never a module of theirs.
FACED = ("config", "hosts", "queue")
#: What the HTTP layer must not reach into: the aggregates' parts (the roll-up, the host table's
#: entries, the store, the queue's figures) are theirs; web asks the Aggregator and the JobQueue.
PARTS = ("rollup", "entries", "ce_queues", "store")
#: The one module that may touch aiohttp's private names, each documented and tested there
#: (tests/web/test_aiohttp_internals.py fails on an aiohttp that changes them).
AIOHTTP_ADAPTER = "infosvc/web/aiohttp_internals.py"
#: Underscored names that are public API: a namedtuple's methods.
PUBLIC_UNDERSCORED = ("_replace", "_asdict", "_fields", "_make")


def test_the_aggregates_and_the_config_are_imported_by_their_face() -> None:
    reaching = []
    for path in sorted((ROOT / "infosvc").rglob("*.py")):
        part = _part(path)
        for name in _imports(path):
            pieces = name.split(".")
            if len(pieces) > 2 and pieces[1] in FACED and pieces[1] != part:
                reaching.append(f"{path.relative_to(ROOT)} imports {name}: import it from infosvc.{pieces[1]}")
    assert not reaching, "\n".join(reaching)
    for package in FACED:
        face = ROOT / "infosvc" / package / "__init__.py"
        assert "__all__" in face.read_text(encoding="utf-8"), f"{face} says what it offers in __all__"


def _reaches(path: Path) -> list[str]:
    """Where a module touches another object's private names or an aggregate's parts."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            found += [f"imports {alias.name}" for alias in node.names
                      if alias.name.startswith("_") and not alias.name.startswith("__")]
        if not isinstance(node, ast.Attribute):
            continue
        own = isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")
        private = node.attr.startswith("_") and not node.attr.startswith("__") and node.attr not in PUBLIC_UNDERSCORED
        # the config's [store] table is the config's, not the aggregate's store
        part = node.attr in PARTS and not ast.unparse(node.value).endswith("config")
        if not own and (private or part):
            found.append(f"line {node.lineno}: {ast.unparse(node)}")
    return found


def test_the_web_layer_touches_no_private_name_and_no_aggregate_s_parts() -> None:
    reaching = {str(path.relative_to(ROOT)): found for path in sorted((ROOT / "infosvc" / "web").rglob("*.py"))
                if (found := _reaches(path)) and str(path.relative_to(ROOT)) != AIOHTTP_ADAPTER}
    assert not reaching, reaching


def test_the_check_of_the_web_layer_finds_what_it_forbids(tmp_path: Path) -> None:
    sample = tmp_path / "handler.py"
    sample.write_text("from infosvc.hosts.table import _hidden\n"
                      "def f(agg, self, config):\n"
                      "    agg.table.rollup.of_hosts([])\n    agg._claims\n    agg.store.history('h', 1)\n"
                      "    self._own\n    config.store.history_per_host\n    row._replace(a=1)\n")
    assert sorted(_reaches(sample)) == ["imports _hidden", "line 3: agg.table.rollup", "line 4: agg._claims",
                                        "line 5: agg.store"]
