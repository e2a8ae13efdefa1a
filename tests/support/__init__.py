"""What the tests share, imported by them as `support...` (pytest puts tests/ on the path):
documents for synthetic hosts, the real `infosvc serve` on loopback, the site config's key spy.
Fixtures that wrap these are in tests/conftest.py."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"
