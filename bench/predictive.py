"""What each part of the `predictive` policy buys (infosvc/sched/policy.py, prediction.py,
ordering.py), on SWF traces: fcfs and easy; predictions alone (EASY's order: since backfilling is
EASY's rule, they change no decision, only the head's expected start in its reason); the slack
order alone (estimates for run times); both (the policy, with its guard: a job waiting a quarter
of the longest wait so far is served in EASY's order); the design before this one (that bound
never under six hours: `6 h floor`) and the one before that (fixed at six hours); the policy
without its guard, and with it at once (EASY's head always, the backfill scan in the slack
order); EASY with its backfill scan
shortest predicted run time first (SJBF); and the published queue orders (WFP3, UNICEF, Carastan-Santos and de Camargo's F1) in the slack order's place, with the same
guard; and, as bounds rather than policies, easy and the policy with every estimate and prediction
exact (`exact: ...`). Each row: mean wait, mean bounded slowdown, utilization, maximum wait, and, against easy,
the change in mean bounded slowdown and the ratio of maximum waits (the targets: at least 20 %
lower, at most 1.25 x, wherever easy's mean bounded slowdown is above 2; never worse than easy on
either).

Run: `python bench/predictive.py [TRACE.swf[.gz] ...] [--processors N] [--skip K] [--first M]`
(the vendored traces when none; N for a trace whose header gives no machine size; records K+1 to
K+M); prints a table per trace and writes bench/results/predictive.json. Which traces tuned the policy and which are held out:
docs/simulation.md.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from infosvc.codec.swf import read_swf  # noqa: E402
from infosvc.sched import Policy  # noqa: E402
from infosvc.sched.ordering import Order  # noqa: E402
from infosvc.sched.simulation import Options, Outcome, SimJob, simulate, simulate_predictive, summarize, trace_jobs  # noqa: E402

TRACES = ROOT / "tests" / "fixtures" / "traces"
VARIANTS: dict[str, Options | Policy | Exact] = {
    "fcfs": Policy.FCFS,
    "easy": Policy.EASY,
    "predictions only": Options(order=Order.FCFS),
    "slack order only": Options(predictions=False),
    "predictive": Options(),
    "6 h floor": Options(overdue_after=6 * 3600.0),
    "fixed 6 h guard": Options(overdue_after=6 * 3600.0, guard_fraction=0.0),
    "no guard": Options(overdue_after=math.inf),
    "guard at once": Options(overdue_after=0.0, guard_fraction=0.0),
    "sjbf": Options(order=Order.SJF, overdue_after=0.0, guard_fraction=0.0),
    "wfp3 order": Options(order=Order.WFP3),
    "unicef order": Options(order=Order.UNICEF),
    "f1 order": Options(order=Order.F1),
}


class Exact(NamedTuple):
    """Not a policy: `variant` with every job's estimate its own run time, as though users and
    predictions were never wrong. Where the design gains little, it says whether knowing the run
    times would have left room (the predictions fail) or not (the queue order has nothing to
    reorder)."""

    variant: Options | Policy


VARIANTS |= {"exact: easy": Exact(Policy.EASY), "exact: predictive": Exact(Options(predictions=False))}


def run(jobs: list[SimJob], processors: int, variant: Options | Policy | Exact) -> list[Outcome]:
    if isinstance(variant, Exact):
        return run([job._replace(estimate=job.run) for job in jobs], processors, variant.variant)
    if isinstance(variant, Policy):
        return simulate(jobs, processors, variant)
    return simulate_predictive(jobs, processors, variant)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("traces", nargs="*", type=Path)
    p.add_argument("--only", action="append", choices=list(VARIANTS), help="these variants only (repeatable)")
    p.add_argument("--processors", type=int, default=0,
                   help="the machine of a trace whose header gives no MaxProcs or MaxNodes (Alea's wagap-2013)")
    p.add_argument("--first", type=int, default=0,
                   help="only each trace's first N job records (0: all): the long held-out traces are judged on a prefix")
    p.add_argument("--skip", type=int, default=0,
                   help="leave out each trace's first N job records (before --first): a later part of a trace whose "
                        "start tuned the policy is held-out material")
    args = p.parse_args()
    traces = args.traces or [TRACES / "NASA-iPSC-1993-3.1-cln.swf.gz", TRACES / "lublin_256.swf.gz"]
    results: dict[str, object] = {}
    for path in traces:
        trace = read_swf(path)
        processors = trace.header_int("MaxProcs") or trace.header_int("MaxNodes") or args.processors
        if processors <= 0:
            p.error(f"{path.name}: no MaxProcs or MaxNodes in its header; give --processors")
        records = trace.records[args.skip:]
        read = trace_jobs(records[:args.first] if args.first > 0 else records, processors)
        print(f"\n{path.name}: {len(read.jobs)} jobs ({read.skipped} skipped), {processors} processors")
        print(f"{'variant':<18} {'mean wait':>11} {'mean bsld':>10} {'util':>6} {'max wait':>11} {'bsld vs easy':>13} "
              f"{'max wait / easy':>16} {'seconds':>8}")
        rows: dict[str, dict[str, float]] = {}
        for name, variant in VARIANTS.items():
            if args.only and name not in args.only and name != "easy":
                continue
            started = time.perf_counter()
            outcomes = run(read.jobs, processors, variant)
            seconds = time.perf_counter() - started
            s = summarize(outcomes, read.skipped, processors, Policy.EASY)
            rows[name] = {"mean_wait_seconds": s.mean_wait_seconds, "mean_bounded_slowdown": s.mean_bounded_slowdown,
                          "utilization": s.utilization, "max_wait_seconds": s.max_wait_seconds, "seconds": seconds}
            easy = rows.get("easy")
            versus = ratio = ""
            if easy is not None and name != "easy":
                versus = f"{100 * (s.mean_bounded_slowdown / easy['mean_bounded_slowdown'] - 1):+.0f} %"
                ratio = f"{s.max_wait_seconds / easy['max_wait_seconds']:.2f}" if easy["max_wait_seconds"] else "-"
            print(f"{name:<18} {s.mean_wait_seconds:11,.0f} {s.mean_bounded_slowdown:10.2f} {s.utilization:6.3f} "
                  f"{s.max_wait_seconds:11,.0f} {versus:>13} {ratio:>16} {seconds:8.2f}", flush=True)
        results[path.name] = {"jobs": len(read.jobs), "processors": processors, "variants": rows}
    out = ROOT / "bench" / "results" / "predictive.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
