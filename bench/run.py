"""Run every benchmark in bench/; each prints its figures and writes bench/results/NAME.json."""

from __future__ import annotations

import runpy
import sys
from pathlib import Path

BENCHMARKS = ["agent.py", "ingest.py", "glue.py", "metrics.py", "match.py"]

if __name__ == "__main__":
    here = Path(__file__).resolve().parent
    for name in BENCHMARKS:
        print(f"== {name}", flush=True)
        sys.argv = [str(here / name)]
        try:
            runpy.run_path(str(here / name), run_name="__main__")
        except SystemExit as done:
            if done.code:
                raise
