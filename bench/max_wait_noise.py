"""How far EASY's own maximum wait and mean bounded slowdown move when nothing about the policy
changes: each job's submission moved later by a random fraction of a second (seeded), EASY run
again. The spread is the figures' noise floor: a policy compared with EASY on one trace by "never
worse" is held to a difference smaller than what a second's jitter in the log makes of EASY itself.
With `--predictive`, `predictive` is run on each moved log too and compared with EASY on that same
log: whether its verdict against EASY holds when the log moves by a second. docs/simulation.md has
the figures.

Run: `python bench/max_wait_noise.py TRACE.swf[.gz] [--processors N] [--skip K] [--first M]
[--seeds 5] [--jitter 1.0] [--predictive]`; prints, for each seed, EASY's figures against EASY's on the
log as it is (and predictive's against EASY's on the moved log).
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from infosvc.sched import Policy  # noqa: E402
from infosvc.sched.simulation import Outcome, Summary, simulate, summarize  # noqa: E402
from trace_part import add_arguments, against, read_part  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_arguments(p)
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--jitter", type=float, default=1.0, help="each submission moved later by up to this many seconds")
    p.add_argument("--predictive", action="store_true", help="also predictive on each moved log, against easy on it")
    args = p.parse_args()
    read, processors, heading = read_part(p, args)
    jobs = read.jobs
    base = figures(simulate(jobs, processors, Policy.EASY), processors)
    print(f"{heading}: easy bsld "
          f"{base.mean_bounded_slowdown:.3f}, max wait {base.max_wait_seconds:,.0f} s"
          + (f"; predictive {against(figures(simulate(jobs, processors, Policy.PREDICTIVE), processors), base)}"
             if args.predictive else ""))
    for seed in range(1, args.seeds + 1):
        draw = random.Random(seed)
        moved = sorted((job._replace(submitted=job.submitted + draw.uniform(0, args.jitter)) for job in jobs),
                       key=lambda job: (job.submitted, job.id))
        easy = figures(simulate(moved, processors, Policy.EASY), processors)
        line = f"  seed {seed}: easy {against(easy, base)}"
        if args.predictive:
            predictive = figures(simulate(moved, processors, Policy.PREDICTIVE), processors)
            line += f" | predictive against easy on it: {against(predictive, easy)}"
        print(line, flush=True)
    return 0


def figures(outcomes: list[Outcome], processors: int) -> Summary:
    return summarize(outcomes, 0, processors, Policy.EASY)


if __name__ == "__main__":
    raise SystemExit(main())
