"""`infosvc hosts approve|pause|resume|remove NODESET` and `infosvc match FILE`: an admin's
decisions and the matcher's dry run from a shell, instead of curl and a tokens file.

Each is one request to the aggregator (POST /v1/admin/hosts/..., POST /v1/match) with the command
line's client; what they print is made from the JSON answer by pure functions. Exit status: 0
done, 1 refused or unreachable (the reason on stderr).
"""

from __future__ import annotations

import argparse
import json
import sys
import urllib.parse
from typing import Any

from infosvc.controls import visible, visible_lines
from infosvc.cli.tables import table
from infosvc.cli.client import Client, ClientError
from infosvc.cli.jobs import content_type_of, read_document

__all__ = ["add_commands", "decided", "match_table", "run"]

ACTIONS = ("approve", "pause", "resume", "remove")


def add_commands(commands: Any, common: argparse.ArgumentParser) -> None:
    hosts = commands.add_parser("hosts", parents=[common], help="approve, pause, resume or remove hosts (an "
                                "admin token)")
    hosts.add_argument("action", choices=ACTIONS)
    hosts.add_argument("nodes", metavar="NODESET", help="a host, or a NodeSet such as cn[07-08] (quote it)")
    hosts.add_argument("--reason", metavar="TEXT", help="why: shown in GLUE, status and /v1/nodes")
    hosts.add_argument("--purge", action="store_true", help="remove: delete the hosts' history too")
    hosts.add_argument("--json", action="store_true", help="print the server's answer as JSON")
    match = commands.add_parser("match", parents=[common], help="which hosts fit a job and why the others do "
                                "not (a dry run; nothing is submitted); '-' reads stdin")
    match.add_argument("file", metavar="FILE")
    match.add_argument("--limit", type=int, default=20, metavar="N", help="list at most N fitting hosts (20)")
    match.add_argument("--json", action="store_true", help="print the server's answer as JSON")


def run(args: argparse.Namespace) -> int:
    try:
        client = Client.of(args.server, token_file=args.token_file, ca_file=args.ca_file)
        if args.command == "hosts":
            if args.purge and args.action != "remove":
                print("infosvc hosts: --purge goes with remove", file=sys.stderr)
                return 2
            query = {"reason": args.reason} if args.reason else {}
            if args.purge:
                query["history"] = "purge"
            path = f"/v1/admin/hosts/{urllib.parse.quote(args.nodes, safe='')}/{args.action}"
            answer = client.call("POST", path + ("?" + urllib.parse.urlencode(query) if query else ""), b"")
            print(json.dumps(answer) if args.json else decided(answer))
            return 0
        document = read_document(args.file)
        limit = max(1, min(args.limit, 10_000))
        answer = client.call("POST", f"/v1/match?limit={limit}", document, content_type_of(document))
        for warning in answer.get("warnings") or ():
            print(f"infosvc match: warning: {visible(str(warning))}", file=sys.stderr)
        print(json.dumps(answer) if args.json else match_table(answer))
        return 0
    except ClientError as exc:
        print(f"infosvc {args.command}: {visible(str(exc))}", file=sys.stderr)
        return 1


def decided(answer: dict[str, Any]) -> str:
    """One line per host: `cn07.example.org: Paused (disk swap)`."""
    hosts = answer["hosts"] if "hosts" in answer else [answer]
    return visible_lines(f"{h['host']}: {h['state']}" + (f" ({h['reason']})" if h.get("reason") else "") for h in hosts)


def match_table(answer: dict[str, Any]) -> str:
    """The fitting hosts best first, then each group of the others with its reasons."""
    matches = answer.get("matches") or []
    lines = table(["HOST", "CE", "SUBCLUSTER", "FREE CPUS", "MEMORY", "SCORE"], [
        [m["host"], m.get("computing_element") or "-", m.get("subcluster") or "-", str(m.get("free_cpus", "-")),
         "-" if m.get("memory_mb") is None else f"{m['memory_mb'] / 1024:.1f}G", f"{m.get('score', 0):g}"]
        for m in matches]) if matches else ["no host fits"]
    total = answer.get("total_matches", answer.get("matched"))
    if isinstance(total, int) and total > len(matches):
        lines.append(f"... and {total - len(matches)} more (--limit)")
    read = answer.get("read_as_requested")
    if read:
        lines.append(f"read as requested (written outside <Requested>): {', '.join(map(str, read))}")
    rejected = answer.get("rejected") or []
    if rejected:
        lines.append("")
        lines.append("NOT FITTING")
        for group in rejected:
            lines.append(f"{group['hosts']}: {'; '.join(group.get('reasons') or ['(no reason given)'])}")
    return visible_lines(lines)
