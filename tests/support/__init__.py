"""What the tests share, imported by them as `support...` (pytest puts tests/ on the path):
documents for synthetic hosts, the real `infosvc serve` on loopback, the site config's key spy.
Fixtures that wrap these are in tests/conftest.py."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"


def bench_module(name: str) -> ModuleType:
    """bench/NAME.py, loaded as a module (bench/ is scripts, not a package): what a test holds of a
    benchmark's own code."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "bench" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
