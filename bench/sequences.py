"""Mean bounded slowdown over sampled job sequences, measured the way the RLScheduler authors
measured theirs (Zhang et al., SC 2020; github DIR-LAB/deep-batch-scheduler, compare-make-table.py),
so that our figures can be set beside their README's table (docs/simulation.md: published figures).

Their measurement: K sequences (10) of L consecutive jobs (1024) of the trace, each simulated alone
from an empty machine; per sequence the mean bounded slowdown, max(1, (wait + run) / max(run, 10)),
the same as our summarize (BOUND_SECONDS); the figure is the mean over the sequences. Each start is
one draw of randint(L, n - L - 1) of numpy's legacy generator seeded as gym's seeding.np_random(seed)
(the gym commit their requirements pin, ff4664b, 2019), n the trace's job count. `gym_rng` does that
derivation here: with seed 1 on lublin_256 it gives the starts their script drew (1981, 2756, ...),
checked by running their own heuristics on these windows, which gave their README's FCFS, WFP3,
UNI, SJF and F1 figures to the cent. The windows index our read job list (infosvc.sched.simulation
conventions), the same as theirs when the conventions skip no job and the trace is in submit order,
as on lublin_256; on other traces they are not the same windows.

Each window is rebased to start at time 0 and run by fcfs, easy, predictive, and predictive's
guarantee over the published orders (WFP3, UNICEF, F1) as in bench/predictive.py. Several seeds show
how much the figure depends on which windows are drawn.

Run: `python bench/sequences.py [TRACE.swf[.gz]] [--seeds 1 2 3 4 5] [--windows 10] [--length 1024]`
(lublin_256 when no trace); prints, per variant, the mean over windows for each seed and the range
over the seeds, and writes bench/results/sequences.json.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from predictive import VARIANTS as ALL_VARIANTS, run  # noqa: E402  (bench/ is sys.path[0])

from infosvc.codec.swf import read_swf  # noqa: E402
from infosvc.sched import Policy  # noqa: E402
from infosvc.sched.simulation import Options, SimJob, summarize, trace_jobs  # noqa: E402

TRACE = ROOT / "tests" / "fixtures" / "traces" / "lublin_256.swf.gz"
#: bench/predictive.py's variants but its two half-policies (predictions only, slack order only)
VARIANTS: dict[str, Options | Policy] = {name: variant for name, variant in ALL_VARIANTS.items() if "only" not in name}


def gym_rng(seed: int) -> np.random.RandomState:
    """numpy's legacy generator seeded as gym's np_random(seed) (2019): the first 8 bytes of the
    SHA-512 of the seed's decimal text, as little-endian 32-bit words, high zero words dropped."""
    digest = hashlib.sha512(str(seed % 2**64).encode()).digest()[:8]
    words = [int.from_bytes(digest[:4], "little"), int.from_bytes(digest[4:], "little")]
    if words[1] == 0:
        words.pop()
    return np.random.RandomState(words)


def starts(seed: int, windows: int, length: int, jobs: int) -> list[int]:
    rng = gym_rng(seed)
    # one draw per window, as their test loop makes them
    return [int(rng.randint(length, jobs - length - 1)) for _ in range(windows)]


def window(jobs: list[SimJob], start: int, length: int) -> list[SimJob]:
    first = jobs[start].submitted
    return [job._replace(submitted=job.submitted - first) for job in jobs[start:start + length]]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("trace", nargs="?", type=Path, default=TRACE)
    p.add_argument("--seeds", nargs="+", type=int, default=[1])
    p.add_argument("--windows", type=int, default=10)
    p.add_argument("--length", type=int, default=1024)
    args = p.parse_args()
    trace = read_swf(args.trace)
    processors = trace.header_int("MaxProcs") or trace.header_int("MaxNodes") or 0
    read = trace_jobs(trace.records, processors)
    n = len(read.jobs)
    if n - args.length - 1 <= args.length:
        p.error(f"{n} jobs are too few for windows of {args.length}")
    print(f"{args.trace.name}: {n} jobs ({read.skipped} skipped), {processors} processors; "
          f"{args.windows} windows of {args.length} jobs per seed")
    by_seed: dict[str, dict[str, object]] = {}
    means: dict[str, list[float]] = {name: [] for name in VARIANTS}
    started = time.perf_counter()
    for seed in args.seeds:
        drawn = starts(seed, args.windows, args.length, n)
        rows: dict[str, dict[str, object]] = {}
        for name, variant in VARIANTS.items():
            per_window = [summarize(run(jobs, processors, variant), 0, processors, Policy.EASY).mean_bounded_slowdown
                          for jobs in (window(read.jobs, s, args.length) for s in drawn)]
            mean = sum(per_window) / len(per_window)
            means[name].append(mean)
            rows[name] = {"mean_bounded_slowdown": mean, "per_window": per_window}
        by_seed[str(seed)] = {"starts": drawn, "variants": rows}
        print(f"seed {seed}: starts {drawn}", flush=True)
    print(f"\n{'variant':<14}" + "".join(f"{'seed ' + str(s):>10}" for s in args.seeds) + f"{'range':>22}")
    for name, values in means.items():
        print(f"{name:<14}" + "".join(f"{v:10.2f}" for v in values) + f"{min(values):12.2f} - {max(values):.2f}")
    print(f"({time.perf_counter() - started:.1f} s)")
    results = {"trace": args.trace.name, "jobs": n, "processors": processors, "windows": args.windows,
               "length": args.length, "seeds": by_seed,
               "range": {name: [min(values), max(values)] for name, values in means.items()}}
    out = ROOT / "bench" / "results" / "sequences.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
