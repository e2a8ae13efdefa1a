"""`infosvc-agent`: describe this host as an SSS Node.

`--once` prints one document and exits. The push loop to the aggregator (--server,
--token-file, --interval) arrives with the aggregator.
"""

from __future__ import annotations

import argparse
import logging
import sys


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="infosvc-agent", description="Describe this host as an SSS Node object.")
    p.add_argument("--once", action="store_true", help="print one SSS Node document (XML) to stdout and exit")
    p.add_argument("--id", dest="host_id", help="the node Id to report (default: the host name)")
    p.add_argument("--feature", action="append", default=[], metavar="NAME",
                   help="a site feature of this node (repeatable, or comma-separated)")
    p.add_argument("--pretty", action="store_true", help="indent the document")
    p.add_argument("--proc-root", default="/proc", help="where /proc is (for containers and tests)")
    p.add_argument("--sys-root", default="/sys", help="where /sys is")
    p.add_argument("--etc-root", default="/etc", help="where /etc is (os-release)")
    p.add_argument("-v", "--verbose", action="store_true", help="log collector timings")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING,
                        format="infosvc-agent: %(levelname)s %(message)s")
    if not args.once:
        print("infosvc-agent: nothing to do: use --once (the push loop to a server comes with the aggregator)",
              file=sys.stderr)
        return 2
    from infosvc.model.node import split_features
    from infosvc_agents.agent import HostAgent

    features = tuple(f for value in args.feature for f in split_features(value))
    agent = HostAgent.for_host(proc_root=args.proc_root, sys_root=args.sys_root, etc_root=args.etc_root,
                               host_id=args.host_id, features=features)
    document = agent.document(pretty=args.pretty)
    if args.verbose:
        for run in agent.last_runs.values():
            logging.debug("collector %s: %s in %.3f ms", run.name, "ok" if run.ok else run.error, run.seconds * 1e3)
    sys.stdout.buffer.write(document)
    if not document.endswith(b"\n"):
        sys.stdout.buffer.write(b"\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
