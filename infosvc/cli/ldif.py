"""`infosvc ldif --server URL [--schema 1.3|2.0] [--site NAME] [--base]`: the site as GLUE LDIF on
standard output, so a resource BDII runs it as an information provider (a script in its provider
directory, docs/grid.md). One GET of /v1/glue?format=ldif with the command line's token and CA
file. A provider's output is loaded as it is, so on any failure nothing is printed on standard
output: the reason goes to standard error and the exit status is 1 (the BDII then keeps what it
had). The LDIF is written as it came into a pipe or a file; to a terminal, only if it holds no
control character but newline (nor bidi control): LDIF needs none raw (RFC 2849 writes such a value
base64, and the server writes every value with a control character so), and one from a hostile
server would be an escape sequence to an operator's terminal.
"""

from __future__ import annotations

import argparse
import sys
import urllib.parse
from typing import Any

from infosvc.controls import CONTROLS, visible
from infosvc.cli.client import Client, ClientError
from infosvc.codec.gridformat import WARNING_PREFIX, valid_site


def add_command(commands: Any, common: Any) -> None:
    ldif = commands.add_parser("ldif", parents=[common], help="the site as GLUE 1.3 and 2.0 LDIF, as a BDII "
                               "information provider prints it")
    ldif.add_argument("--schema", choices=("1.3", "2.0"), help="only GLUE 1.3 (o=grid) or 2.0 (o=glue); both "
                      "when not given")
    ldif.add_argument("--site", metavar="NAME", help="the site's id (GlueSiteUniqueID, GLUE 2.0 AdminDomain); "
                      "else the host of the server's information service URL")
    ldif.add_argument("--base", action="store_true", help="print the BDII's base entries too (for a bare slapd)")


def query_of(schema: str | None, site: str | None, base: bool) -> str:
    params = [("format", "ldif")]
    if schema:
        params.append(("schema", schema))
    if site:
        params.append(("site", site))
    if base:
        params.append(("base", "1"))
    return urllib.parse.urlencode(params)


def run(args: argparse.Namespace) -> int:
    if args.site is not None and not valid_site(args.site):
        print("infosvc ldif: --site: letters, digits, '_', '.', '-', at most 100", file=sys.stderr)
        return 2
    try:
        client = Client.of(args.server, token_file=args.token_file, ca_file=args.ca_file)
        body = client.fetch("GET", "/v1/glue?" + query_of(args.schema, args.site, args.base))
    except ClientError as exc:
        print(f"infosvc ldif: {visible(str(exc))}", file=sys.stderr)
        return 1
    if not body.startswith(b"# GLUE"):
        print(f"infosvc ldif: {args.server} did not answer with LDIF", file=sys.stderr)
        return 1
    if sys.stdout.isatty():
        unsafe = unsafe_for_a_terminal(body)
        if unsafe is not None:
            print(f"infosvc ldif: {args.server} answered LDIF holding {unsafe}; not written to a terminal (redirect "
                  "it to a file or a pipe to have it as it came)", file=sys.stderr)
            return 1
    sys.stdout.buffer.write(body)
    sys.stdout.flush()
    # what the LDIF says a grid client will miss (its comments), once each, for whoever runs it by hand
    prefix = WARNING_PREFIX.encode()
    for line in dict.fromkeys(line for line in body.splitlines() if line.startswith(prefix)):
        print(f"infosvc ldif: warning: {visible(line[len(prefix):].decode('utf-8', 'replace'))}", file=sys.stderr)
    return 0


def unsafe_for_a_terminal(body: bytes) -> str | None:
    """What in `body` a terminal would act on (a control character but newline, a C1 or bidi control,
    or bytes that are not UTF-8), said; None when it holds none."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        return f"bytes that are not UTF-8 (at byte {exc.start})"
    found = next((match for match in CONTROLS.finditer(text) if match.group() != "\n"), None)
    if found is None:
        return None
    return f"a control character ({visible(found.group())}, at character {found.start()})"
