"""`infosvc simulate TRACE`: a Standard Workload Format trace replayed through the service's
scheduler in simulated time (infosvc.sched.simulation), one JSON summary on stdout, and with
`--schedule OUT.csv` each job's `job_id,submit,start,end,processors`. `--site URL` asks how a live
site would have served the workload: its published processors are the machine. `--hosts N` (with
`--gpus-per-host`, `--gpu-jobs`, `--gpus-per-job`) asks what if the machine were N hosts with GPUs
and some jobs asked for them (infosvc.sched.hostsim): the summary gains the GPU figures, the
schedule each job's `gpus` and `hosts`.
Exit status: 0 done, 1 the trace or the site cannot be read, 2 bad usage.
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import time
from typing import Any, Final, Sequence

from infosvc.codec.swf import read_swf
from infosvc.sched import Policy
from infosvc.sched.simulation import Outcome, simulate, summarize, trace_jobs

__all__ = ["add_command", "run", "site_processors"]


def add_command(commands: Any, common: argparse.ArgumentParser) -> None:
    p = commands.add_parser("simulate", parents=[common], help="replay a workload trace (SWF, gzipped or not) "
                            "through the scheduler in simulated time")
    p.add_argument("trace", metavar="TRACE.swf")
    p.add_argument("--policy", choices=[policy.value for policy in Policy], default=Policy.EASY.value)
    p.add_argument("--processors", type=int, metavar="N", help="the machine's processors (else the trace "
                   "header's MaxProcs, else MaxNodes)")
    p.add_argument("--site", action="store_true", help="the machine is the processors --server publishes "
                   "(its live hosts): how that site would have served the workload")
    p.add_argument("--schedule", metavar="OUT.csv", help="write job_id,submit,start,end,processors per job "
                   "(and gpus,hosts with --hosts)")
    what_if = p.add_argument_group("what if the machine were hosts with GPUs (docs/simulation.md)")
    what_if.add_argument("--hosts", type=int, metavar="N", help="the machine as N hosts sharing its processors, "
                         "scheduled as the service schedules a site's hosts")
    what_if.add_argument("--gpus-per-host", type=int, metavar="G", help="GPUs on each host (default 0)")
    what_if.add_argument("--gpu-jobs", type=float, metavar="FRACTION", help="the fraction of the jobs that ask "
                         "GPUs, chosen by job number, the same every run (default 0)")
    what_if.add_argument("--gpus-per-job", type=int, metavar="K", help="GPUs a GPU job takes on each of its "
                         "hosts (default 1)")
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")


#: The largest machine simulated, in processors: past any machine built (the largest have about
#: ten million cores), and within what the host pool's 32-bit-safe counts and the figures' floats hold
MAX_PROCESSORS: Final = 2**31 - 1


def site_processors(glue: Any) -> int:
    """The processors of a site's live (Ready or Paused) hosts, from its GLUE tree; ValueError, in a
    user's words, for an answer of another shape (hosts not a list of objects, a count that is not
    a whole number from 0 to MAX_PROCESSORS)."""
    hosts = glue.get("hosts") if isinstance(glue, dict) else None
    if not isinstance(hosts, list) or not all(isinstance(host, dict) for host in hosts):
        raise ValueError("its hosts are not a list of objects")
    total = 0
    for host in hosts:
        if host.get("state") not in ("Ready", "Paused"):
            continue
        cpus = host.get("total_cpus") or 0
        if type(cpus) is not int or not 0 <= cpus <= MAX_PROCESSORS:  # not a bool, nor a float
            raise ValueError(f"a host's total_cpus is {str(cpus)[:40]}, not a whole number from 0 to {MAX_PROCESSORS}")
        total += cpus
    return total


def run(args: argparse.Namespace) -> int:
    # The collector is off for the run: a trace's records, jobs and outcomes are hundreds of
    # thousands of tuples and no reference cycle, and its passes over them were a tenth of a run
    # of the NASA trace (instructions counted). On again after, for a caller in the same process.
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _run(args)
    finally:
        if collecting:
            gc.enable()


def _run(args: argparse.Namespace) -> int:
    def fail(message: str, status: int = 1) -> int:
        print(f"infosvc simulate: {message}", file=sys.stderr)
        return status

    if args.processors is not None and not 1 <= args.processors <= MAX_PROCESSORS:
        return fail(f"--processors must be 1 to {MAX_PROCESSORS:,}", 2)
    if args.hosts is None:
        given = [name for name, value in (("--gpus-per-host", args.gpus_per_host), ("--gpu-jobs", args.gpu_jobs),
                                          ("--gpus-per-job", args.gpus_per_job)) if value is not None]
        if given:
            return fail(f"{', '.join(given)}: GPUs are on hosts: say --hosts N too", 2)
    try:
        trace = read_swf(args.trace)
    except OSError as exc:
        return fail(f"{args.trace}: cannot read: {getattr(exc, 'strerror', None) or exc}")
    for problem in trace.problems:
        print(f"infosvc simulate: {args.trace}: {problem} (left out)", file=sys.stderr)
    if trace.malformed > len(trace.problems):
        print(f"infosvc simulate: {args.trace}: {trace.malformed - len(trace.problems)} more malformed lines left out",
              file=sys.stderr)
    if trace.extra_fields:
        print(f"infosvc simulate: {args.trace}: {trace.extra_fields} job lines have fields past SWF's 18 (from line "
              f"{trace.first_extra_line}; MetaCentrum's node list, queue and properties are such): the 18 are read, "
              "the rest ignored", file=sys.stderr)
    if trace.malformed and not trace.records:  # else a summary of no jobs, as if the trace were empty
        return fail(f"{args.trace}: no line of the trace is a job record ({trace.malformed} malformed)")
    processors = args.processors
    if args.site and processors is None:  # --processors, else the site, else the header
        from infosvc.cli.client import Client, ClientError  # http and TLS: imported only for a site

        try:
            glue = Client.of(args.server, token_file=args.token_file, ca_file=args.ca_file).call("GET", "/v1/glue")
            processors = site_processors(glue)
        except ClientError as exc:
            return fail(str(exc))
        except ValueError as exc:
            return fail(f"{args.server}'s answer is not of the shape this infosvc reads: {exc}")
        if processors < 1:
            return fail(f"{args.server} publishes no live host with processors")
        if processors > MAX_PROCESSORS:
            return fail(f"{args.server} publishes {processors:,} processors, more than the {MAX_PROCESSORS:,} simulated")
    processors = processors or trace.header_int("MaxProcs") or trace.header_int("MaxNodes")
    if not processors or processors < 1:
        return fail(f"{args.trace}: the header gives neither MaxProcs nor MaxNodes: say --processors N", 2)
    if processors > MAX_PROCESSORS:
        return fail(f"{args.trace}: the header's machine of {processors:,} processors is past the {MAX_PROCESSORS:,} "
                    "simulated: say --processors N", 2)
    what_if = None
    if args.hosts is not None:
        from infosvc.sched.hostsim import WhatIf  # numpy and the host pool: imported only for a what-if

        what_if = WhatIf(args.hosts, args.gpus_per_host or 0, args.gpu_jobs or 0.0,
                         1 if args.gpus_per_job is None else args.gpus_per_job)
        impossible = what_if.problem(processors)
        if impossible is not None:
            return fail(impossible, 2)
    jobs = trace_jobs(trace.records, processors)
    policy = Policy(args.policy)
    started = time.monotonic()

    def progress(done: int, now: float) -> None:
        print(f"infosvc simulate: {done}/{len(jobs.jobs)} jobs started, simulated time {now:.0f} s, "
              f"{time.monotonic() - started:.0f} s elapsed", file=sys.stderr, flush=True)

    extra: dict[str, Any] = {}
    held: list[tuple[int, str]] | None = None
    if what_if is None:
        outcomes = simulate(jobs.jobs, processors, policy, None if args.quiet else progress)
    else:
        from infosvc.sched.hostsim import gpu_figures, simulate_hosts

        replay = simulate_hosts(jobs.jobs, processors, policy, what_if, None if args.quiet else progress)
        outcomes, extra = replay.outcomes, gpu_figures(replay).as_json()
        held = [(gpus, " ".join(replay.slots[row].id for row in rows)) for gpus, rows in replay.held]
    if args.schedule:
        try:
            _write_schedule(args.schedule, outcomes, held)
        except OSError as exc:
            return fail(f"{args.schedule}: cannot write: {exc.strerror}")
    summary = summarize(outcomes, jobs.skipped, processors, policy).as_json()
    summary.update(extra)
    summary["malformed_lines"] = trace.malformed
    summary["seconds"] = round(time.monotonic() - started, 3)
    print(json.dumps(summary))
    return 0


def _write_schedule(path: str, outcomes: Sequence[Outcome], held: list[tuple[int, str]] | None) -> None:
    """A row a job, by submission: `job_id,submit,start,end,processors`, and with `held` (a GPU
    what-if: each outcome's GPUs in all and its hosts) `gpus,hosts` too."""
    import csv  # here: a run without --schedule does not need it

    with open(path, "w", newline="", encoding="utf-8") as handle:
        out = csv.writer(handle)
        if held is None:
            out.writerow(["job_id", "submit", "start", "end", "processors"])
            for o in sorted(outcomes, key=lambda o: (o.job.submitted, o.job.id)):
                out.writerow([o.job.number, _number(o.job.submitted), _number(o.start), _number(o.end),
                              o.job.processors])
            return
        out.writerow(["job_id", "submit", "start", "end", "processors", "gpus", "hosts"])
        for o, (gpus, hosts) in sorted(zip(outcomes, held), key=lambda pair: (pair[0].job.submitted, pair[0].job.id)):
            out.writerow([o.job.number, _number(o.job.submitted), _number(o.start), _number(o.end), o.job.processors,
                          gpus, hosts])


def _number(value: float) -> int | float:
    return int(value) if value == int(value) else value
