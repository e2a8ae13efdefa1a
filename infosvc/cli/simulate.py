"""`infosvc simulate TRACE`: a Standard Workload Format trace replayed through the service's
scheduler in simulated time (infosvc.sched.simulation), one JSON summary on stdout, and with
`--schedule OUT.csv` each job's `job_id,submit,start,end,processors`. `--site URL` asks how a live
site would have served the workload: its published processors are the machine.
Exit status: 0 done, 1 the trace or the site cannot be read, 2 bad usage.
"""

from __future__ import annotations

import argparse
import csv
import gc
import json
import sys
import time
from typing import Any

from infosvc.codec.swf import read_swf
from infosvc.sched import Policy
from infosvc.sched.simulation import simulate, summarize, trace_jobs

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
    p.add_argument("--schedule", metavar="OUT.csv", help="write job_id,submit,start,end,processors per job")
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")


def site_processors(glue: dict[str, Any]) -> int:
    """The processors of a site's live (Ready or Paused) hosts, from its GLUE tree."""
    return sum(int(host.get("total_cpus") or 0) for host in glue.get("hosts", [])
               if host.get("state") in ("Ready", "Paused"))


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

    if args.processors is not None and args.processors < 1:
        return fail("--processors must be at least 1", 2)
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
    if args.site:
        from infosvc.cli.client import Client, ClientError  # http and TLS: imported only for a site

        try:
            glue = Client.of(args.server, token_file=args.token_file, ca_file=args.ca_file).call("GET", "/v1/glue")
        except ClientError as exc:
            return fail(str(exc))
        processors = site_processors(glue if isinstance(glue, dict) else {})
        if processors < 1:
            return fail(f"{args.server} publishes no live host with processors")
    processors = processors or trace.header_int("MaxProcs") or trace.header_int("MaxNodes")
    if not processors or processors < 1:
        return fail(f"{args.trace}: the header gives neither MaxProcs nor MaxNodes: say --processors N", 2)
    jobs = trace_jobs(trace.records, processors)
    policy = Policy(args.policy)
    started = time.monotonic()

    def progress(done: int, now: float) -> None:
        print(f"infosvc simulate: {done}/{len(jobs.jobs)} jobs started, simulated time {now:.0f} s, "
              f"{time.monotonic() - started:.0f} s elapsed", file=sys.stderr, flush=True)

    outcomes = simulate(jobs.jobs, processors, policy, None if args.quiet else progress)
    if args.schedule:
        try:
            with open(args.schedule, "w", newline="", encoding="utf-8") as handle:
                out = csv.writer(handle)
                out.writerow(["job_id", "submit", "start", "end", "processors"])
                for o in sorted(outcomes, key=lambda o: (o.job.submitted, o.job.id)):
                    out.writerow([o.job.number, _number(o.job.submitted), _number(o.start), _number(o.end),
                                  o.job.processors])
        except OSError as exc:
            return fail(f"{args.schedule}: cannot write: {exc.strerror}")
    summary = summarize(outcomes, jobs.skipped, processors, policy).as_json()
    summary["malformed_lines"] = trace.malformed
    summary["seconds"] = round(time.monotonic() - started, 3)
    print(json.dumps(summary))
    return 0


def _number(value: float) -> int | float:
    return int(value) if value == int(value) else value
