"""The part of a trace a policy benchmark replays, chosen as bench/predictive.py's tables do: a
trace, its machine where the header gives none (`--processors`), and records K+1 to K+M
(`--skip K --first M`). Shared by bench/guard_oracle.py and bench/max_wait_noise.py."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from infosvc.codec.swf import read_swf  # noqa: E402
from infosvc.sched.simulation import Trace, trace_jobs  # noqa: E402


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
