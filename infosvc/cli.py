"""`infosvc`: the command line of the service.

`infosvc validate FILE...` checks SSS Node documents against schemas/sss-node.xsd and says what
is wrong and where. `serve`, `status`, `submit`, `jobs`, `why` and `simulate` come with the
aggregator and the matcher.
"""

from __future__ import annotations

import argparse
import json
import sys

from infosvc import __version__


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="infosvc", description="Resource information service for clusters and grids.")
    p.add_argument("--version", action="version", version=f"infosvc {__version__}")
    commands = p.add_subparsers(dest="command", required=True)
    validate = commands.add_parser("validate", help="check SSS Node documents ('-' reads stdin)")
    validate.add_argument("files", nargs="+", metavar="FILE")
    validate.add_argument("--json", action="store_true", help="print each node, or each error, as JSON")
    return p


def _validate(files: list[str], as_json: bool) -> int:
    from infosvc.codec.node_json import node_to_json
    from infosvc.codec.node_xml import parse_node
    from infosvc.errors import DocumentError

    failed = 0
    for name in files:
        try:
            data = sys.stdin.buffer.read() if name == "-" else open(name, "rb").read()
            node = parse_node(data)
        except OSError as exc:
            failed += 1
            print(f"{name}: cannot read: {exc.strerror}", file=sys.stderr)
        except DocumentError as exc:
            failed += 1
            if as_json:
                print(json.dumps({"file": name, **exc.as_json()}))
            else:
                for problem in exc.problems:
                    print(f"{name}: {problem}", file=sys.stderr)
        else:
            print(json.dumps({"file": name, "node": node_to_json(node)}) if as_json else f"{name}: valid SSS Node {node.id!r}")
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.command == "validate":
        return _validate(args.files, args.json)
    return 2  # pragma: no cover - argparse requires a command


if __name__ == "__main__":
    raise SystemExit(main())
