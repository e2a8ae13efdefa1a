"""`infosvc-agent`: describe this host as an SSS Node.

`--once` prints one document and exits; `--server URL --token-file F` pushes a sample every
`--interval` seconds to the aggregator until stopped (SIGTERM or SIGINT), keeping what is not
acknowledged yet (in `--spool DIR` too, to outlive a restart: infosvc_agents/spool.py); with
`--run-jobs` it also runs the tasks the aggregator places on this host (infosvc_agents/executor.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import argparse
import logging
import os
import signal
import sys

from infosvc import __version__

if TYPE_CHECKING:
    from infosvc_agents.agent import HostAgent
    from infosvc_agents.executor import Executor
    from infosvc_agents.push import PushLoop


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="infosvc-agent", description="Describe this host as an SSS Node object.")
    p.add_argument("--version", action="version", version=f"infosvc-agent {__version__}")
    p.add_argument("--once", action="store_true", help="print one SSS Node document (XML) to stdout and exit")
    p.add_argument("--server", metavar="URL", help="the aggregator to push samples to, e.g. http://head:8080")
    p.add_argument("--token-file", metavar="FILE", help="file holding this agent's token (with --server)")
    p.add_argument("--interval", type=float, default=60.0, metavar="SECONDS", help="seconds between samples (60)")
    p.add_argument("--stop-with", type=int, metavar="PID",
                   help="stop, as at SIGTERM, when process PID (this agent's parent) ends, even killed: how "
                        "`infosvc serve --local-agent` starts it")
    p.add_argument("--max-kept", type=int, default=1000, metavar="N",
                   help="samples kept while the server is unreachable, the newest (1000; in --spool too)")
    p.add_argument("--spool", metavar="DIR",
                   help="keep the samples not yet acknowledged in DIR as well, a file each, so that a restart "
                        "sends them instead of losing them (made 0700 if missing; one agent per DIR)")
    p.add_argument("--backoff-max", type=float, default=300.0, metavar="SECONDS",
                   help="longest wait between retries while the server is unreachable (300)")
    p.add_argument("--ca-file", metavar="FILE", help="CA certificates to verify an https server with")
    p.add_argument("--metrics-listen", metavar="HOST:PORT",
                   help="serve this host's metrics (node_exporter's names) at http://HOST:PORT/metrics")
    p.add_argument("--samples", type=int, metavar="N",
                   help="stop after N samples are taken and every kept one is sent (for tests)")
    p.add_argument("--id", dest="host_id", help="the node Id to report (default: the host name)")
    p.add_argument("--feature", action="append", default=[], metavar="NAME",
                   help="a site feature of this node (repeatable, or comma-separated)")
    p.add_argument("--pretty", action="store_true", help="indent the document")
    p.add_argument("--proc-root", default="/proc", help="where /proc is (for containers and tests)")
    p.add_argument("--sys-root", default="/sys", help="where /sys is")
    p.add_argument("--etc-root", default="/etc", help="where /etc is (os-release)")
    p.add_argument("--run-jobs", action="store_true",
                   help="also run the tasks the aggregator places on this host (off by default; needs "
                        "--executor-token-file, and --run-as when run as root)")
    p.add_argument("--executor-token-file", metavar="FILE",
                   help="file holding this host's executor token (the server's tokens file: executor TOKEN HOST)")
    p.add_argument("--run-as", metavar="USER",
                   help="the account for the tasks of owners mapped to no account of their own (with --run-jobs; "
                        "never root)")
    p.add_argument("--run-as-owner", action="store_true",
                   help="run a job owner's tasks as the local account of that name, where it exists and its uid "
                        "is from --min-uid to --max-uid")
    p.add_argument("--run-as-map", metavar="FILE", help="owners' accounts, 'OWNER ACCOUNT' a line (never root)")
    p.add_argument("--min-uid", type=int, default=1000, metavar="UID",
                   help="the least uid an owner's own account may have with --run-as-owner (1000)")
    p.add_argument("--max-uid", type=int, default=59999, metavar="UID",
                   help="the greatest uid an owner's own account may have with --run-as-owner (59999: above it, "
                        "packages' fixed uids and nobody)")
    p.add_argument("--task-state", metavar="DIR",
                   help="where the executor records each task it takes, so that a restart adopts or reports it "
                        "and never starts it again (made 0700; default: 'tasks' beside --spool, else "
                        "/var/lib/infosvc-agent/tasks as root, ~/.local/state/infosvc-agent/tasks otherwise)")
    p.add_argument("--work-root", metavar="DIR",
                   help="make a directory per job in DIR, owned by the task's account, for tasks that name no "
                        "working directory (default: the account's home)")
    p.add_argument("--work-keep", type=float, default=86400.0, metavar="SECONDS",
                   help="remove a job's directory under --work-root this long after its last task ended (86400)")
    p.add_argument("--containment", choices=("auto", "cgroup", "pidns", "subreaper"), default="auto",
                   help="how every process of a task is ended with it: a cgroup v2 of its own (cgroup), a PID "
                        "namespace of its own (pidns), the supervisor as subreaper alone (subreaper, which a task "
                        "that keeps forking can outrun); auto: a cgroup where writable, else a PID namespace where "
                        "allowed (root), else the subreaper")
    p.add_argument("--jobs-interval", type=float, default=2.0, metavar="SECONDS",
                   help="seconds between asks for this host's tasks (2)")
    p.add_argument("-v", "--verbose", action="store_true", help="log collector timings")
    return p


def configure_logging(level: int) -> None:
    """The root logger's one handler (stderr): `infosvc-agent: LEVEL MESSAGE`, each record one
    line whose control, C1 and bidi characters are escapes. Its values come from jobs (a task's
    file names in its end's reason) and from the server: none may write a line of its own into
    the log of an agent run as root, nor drive the terminal of whoever reads it."""
    from infosvc.controls import VisibleFormatter

    handler = logging.StreamHandler()
    handler.setFormatter(VisibleFormatter("infosvc-agent: %(levelname)s %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)


def _stop_with(parent: int) -> bool:
    """SIGTERM for this process when its parent ends (PR_SET_PDEATHSIG); whether `parent` is still
    its parent, checked after, so that an end between the two is not missed."""
    import ctypes
    import signal

    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG
    return os.getppid() == parent


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    configure_logging(logging.DEBUG if args.verbose else logging.WARNING)
    if not args.once and not args.server and not args.metrics_listen:
        print("infosvc-agent: nothing to do: use --once, --server URL --token-file FILE, or --metrics-listen HOST:PORT",
              file=sys.stderr)
        return 2
    if args.once and args.metrics_listen:
        print("infosvc-agent: --metrics-listen serves while the agent runs: not with --once", file=sys.stderr)
        return 2
    if args.server and not args.token_file:
        print("infosvc-agent: --server needs --token-file", file=sys.stderr)
        return 2
    if args.spool and not args.server:
        print("infosvc-agent: --spool keeps samples for --server: not without it", file=sys.stderr)
        return 2
    if args.run_jobs and (not args.server or not args.executor_token_file):
        print("infosvc-agent: --run-jobs needs --server and --executor-token-file", file=sys.stderr)
        return 2
    if args.interval <= 0 or args.max_kept < 1 or args.backoff_max <= 0:
        print("infosvc-agent: --interval and --backoff-max must be positive and --max-kept at least 1",
              file=sys.stderr)
        return 2
    if args.stop_with is not None and not _stop_with(args.stop_with):
        return 0  # the parent has already ended
    from infosvc.model.node import split_features
    from infosvc_agents.agent import HostAgent

    features = tuple(f for value in args.feature for f in split_features(value))
    agent = HostAgent.for_host(proc_root=args.proc_root, sys_root=args.sys_root, etc_root=args.etc_root,
                               host_id=args.host_id, features=features)
    if args.server:
        return _push(agent, args)
    if args.metrics_listen:
        return _metrics_only(agent, args)
    document = agent.document(pretty=args.pretty)
    if args.verbose:
        for run in agent.last_runs.values():
            logging.debug("collector %s: %s in %.3f ms", run.name, "ok" if run.ok else run.error, run.seconds * 1e3)
    sys.stdout.buffer.write(document)
    if not document.endswith(b"\n"):
        sys.stdout.buffer.write(b"\n")
    return 0


def _push(agent: "HostAgent", args: argparse.Namespace) -> int:
    from infosvc_agents.push import PushLoop, Sample, Sender, read_token
    from infosvc_agents.spool import Spool, SpoolError

    try:
        sender = Sender(args.server, read_token(args.token_file), ca_file=args.ca_file, token_file=args.token_file)
        spool = Spool(args.spool) if args.spool else None
    except (OSError, ValueError, SpoolError) as exc:
        print(f"infosvc-agent: {exc}", file=sys.stderr)
        return 2
    # From here on: what the spool held at start is said as it is read.
    logging.getLogger().setLevel(logging.DEBUG if args.verbose else logging.INFO)
    # Samples as Nodes: each is sent as a delta of the last whole one the server took, where it can be.
    loop = PushLoop(lambda: Sample(agent.node()), sender, interval=args.interval, max_kept=args.max_kept,
                    backoff_initial=min(1.0, args.backoff_max), backoff_max=args.backoff_max, spool=spool)
    if args.metrics_listen and not _serve_metrics(agent, args.metrics_listen, loop):
        return 2
    executor = None
    if args.run_jobs:
        executor = _executor(args)
        if executor is None:
            return 2

    def stop(*_: object) -> None:
        loop.stop()
        if executor:
            executor.stop()

    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, stop)
    logging.info("pushing to %s every %.3g s%s", args.server, args.interval,
                 f", keeping what is not acknowledged in {args.spool}" if spool else "")
    if executor:
        import threading

        runner = threading.Thread(target=executor.run, name="executor", daemon=True)
        runner.start()
        logging.info("running the tasks placed on this host (task state in %s)", executor.state)
    loop.run(samples=args.samples)
    if executor:
        executor.stop()
        runner.join(timeout=30)
    logging.info("stopped: %d delivered (%d as deltas), %d dropped, %d refused, %d kept undelivered, of %d taken%s",
                 loop.delivered, loop.deltas, loop.dropped, loop.refused, len(loop.kept), loop.taken,
                 f" (the spool: {loop.resumed} from the last run, {loop.spooled()} left for the next)" if spool else "")
    if spool:
        spool.close()
    return 0


def default_task_state(spool: str | None) -> str:
    """'tasks' beside the spool; else the agent's state directory: root's /var/lib/infosvc-agent,
    a user's $XDG_STATE_HOME/infosvc-agent (~/.local/state/infosvc-agent)."""
    if spool:
        return os.path.join(os.path.dirname(os.path.abspath(spool)), "tasks")
    if os.geteuid() == 0:
        return "/var/lib/infosvc-agent/tasks"
    state_home = os.environ.get("XDG_STATE_HOME") or os.path.expanduser("~/.local/state")
    return os.path.join(state_home, "infosvc-agent", "tasks")


def _executor(args: argparse.Namespace) -> "Executor | None":
    from infosvc_agents.accounts import AccountPolicy, read_map
    from infosvc_agents.collectors.gpus import GpuCollector
    from infosvc_agents.executor import Executor
    from infosvc_agents.gpu_devices import devices_of
    from infosvc_agents.push import Sender, read_token
    from infosvc_agents.taskrun import available_containments

    state = args.task_state or default_task_state(args.spool)
    try:
        accounts = AccountPolicy(default=args.run_as, own_accounts=args.run_as_owner, min_uid=args.min_uid,
                                 max_uid=args.max_uid,
                                 mapping=read_map(args.run_as_map) if args.run_as_map else {})
        accounts.check()
        sender = Sender(args.server, read_token(args.executor_token_file, role="executor"), ca_file=args.ca_file)
        gpus = GpuCollector(args.proc_root, args.sys_root)
        found = available_containments()
        if args.containment not in ("auto", *found):
            raise ValueError(f"--containment {args.containment} is not available here (only {', '.join(found)}): "
                             "a cgroup needs cgroup v2 writable by the agent (systemd Delegate=yes), a PID "
                             "namespace an agent run as root that seccomp lets unshare")
        if args.containment == "auto" and "cgroup" not in found and "pidns" not in found:
            # docs/security.md: the supervisor's walk of /proc can be outrun by processes that fork
            # and exit at once; only a cgroup or a PID namespace ends such a task whole
            logging.getLogger("infosvc_agents.executor").warning(
                "no writable cgroup v2 here and no right to make a PID namespace: tasks are contained by their "
                "supervisor as subreaper alone, which a task that keeps forking can outrun at its cancel; run the "
                "agent as root, or give it a cgroup (systemd Delegate=yes) and run it with --containment cgroup, "
                "where jobs are not trusted")
        return Executor(sender, state=state, accounts=accounts, interval=args.jobs_interval,
                        containment=args.containment, work_root=args.work_root, work_keep=args.work_keep,
                        devices=lambda: devices_of(gpus.gpus))
    except (OSError, ValueError) as exc:
        print(f"infosvc-agent: {exc}", file=sys.stderr)
        return None


def _serve_metrics(agent: "HostAgent", listen: str, loop: "PushLoop | None") -> bool:
    from infosvc_agents.node_metrics import NodeMetrics, serve_metrics

    collector = NodeMetrics(lambda: agent.last_runs, sampled_at=lambda: agent.sampled_at, loop=loop)
    try:
        serve_metrics(listen, collector)
    except (OSError, ValueError) as exc:
        print(f"infosvc-agent: cannot serve metrics on {listen}: {exc}", file=sys.stderr)
        return False
    if logging.getLogger().level > logging.INFO:
        logging.getLogger().setLevel(logging.INFO)
    logging.info("serving this host's metrics at http://%s/metrics", listen)
    return True


def _metrics_only(agent: "HostAgent", args: argparse.Namespace) -> int:
    """No aggregator: sample every interval for the metrics alone, until stopped."""
    import threading

    if not _serve_metrics(agent, args.metrics_listen, None):
        return 2
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    taken = 0
    while not stop.is_set():
        agent.node()
        taken += 1
        if args.samples is not None and taken >= args.samples:
            break
        stop.wait(args.interval)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
