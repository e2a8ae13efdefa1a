"""The part of a trace a policy benchmark replays, chosen as bench/predictive.py's tables do: a
trace, its machine where the header gives none (`--processors`), and records K+1 to K+M
(`--skip K --first M`); and a replay's figures against EASY's on it. Shared by
bench/guard_oracle.py, bench/max_wait_noise.py and bench/predictor_bound.py."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from infosvc.codec.swf import read_swf  # noqa: E402
from infosvc.sched import Policy  # noqa: E402
from infosvc.sched.simulation import Outcome, Summary, Trace, simulate, summarize, trace_jobs  # noqa: E402


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("trace", type=Path)
    p.add_argument("--processors", type=int, default=0, help="the machine, where the header gives no MaxProcs or MaxNodes")
    p.add_argument("--skip", type=int, default=0, help="leave out the first K job records")
    p.add_argument("--first", type=int, default=0, help="then only the first M (0: all)")


def read_part(p: argparse.ArgumentParser, args: argparse.Namespace) -> tuple[Trace, int, str]:
    """The part's jobs, the machine's processors and a heading naming the part."""
    trace = read_swf(args.trace)
    processors = trace.header_int("MaxProcs") or trace.header_int("MaxNodes") or args.processors
    if processors <= 0:
        p.error(f"{args.trace.name}: no MaxProcs or MaxNodes in its header; give --processors")
    records = trace.records[args.skip:]
    read = trace_jobs(records[:args.first] if args.first > 0 else records, processors)
    return read, processors, f"{args.trace.name} (skip {args.skip}, first {args.first or 'all'})"


def against(s: Summary, easy: Summary) -> str:
    """Mean bounded slowdown against `easy`'s, maximum wait as a ratio of its, and which of the two
    is worse than EASY's."""
    ratio = s.max_wait_seconds / easy.max_wait_seconds if easy.max_wait_seconds else 1.0
    worse = [what for what, it, easy_s in (("bsld", s.mean_bounded_slowdown, easy.mean_bounded_slowdown),
                                          ("max wait", s.max_wait_seconds, easy.max_wait_seconds)) if it > easy_s]
    return (f"bsld {100 * (s.mean_bounded_slowdown / easy.mean_bounded_slowdown - 1):+7.2f} %, max wait {ratio:6.3f} x"
            + (f" (worse than easy: {', '.join(worse)})" if worse else ""))


def against_easy(read: Trace, processors: int, heading: str, runs: dict[str, Callable[[], list[Outcome]]],
                 easy: list[Outcome] | None = None) -> None:
    """EASY's replay of the part (`easy`, where the caller made it), then each of `runs`, a line
    each: its figures `against` EASY's and the seconds it took."""
    if easy is None:
        easy = simulate(read.jobs, processors, Policy.EASY)
    base = summarize(easy, read.skipped, processors, Policy.EASY)
    print(f"{heading}: {len(read.jobs)} jobs, easy bsld {base.mean_bounded_slowdown:.3f}, "
          f"max wait {base.max_wait_seconds:,.0f} s", flush=True)
    width = max(map(len, runs))
    for name, run in runs.items():
        started = time.perf_counter()
        outcomes = run()
        seconds = time.perf_counter() - started
        print(f"  {name:<{width}} {against(summarize(outcomes, read.skipped, processors, Policy.EASY), base)} "
              f"({seconds:.1f} s)", flush=True)
