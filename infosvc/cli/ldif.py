"""`infosvc ldif --server URL [--schema 1.3|2.0] [--site NAME] [--base]`: the site as GLUE LDIF on
standard output, so a resource BDII runs it as an information provider (a script in its provider
directory, docs/grid.md). One GET of /v1/glue?format=ldif with the command line's token and CA
file. A provider's output is loaded as it is, so on any failure nothing is printed on standard
output: the reason goes to standard error and the exit status is 1. A BDII deletes what its
providers' output lacks (after BDII_DELETE_DELAY) whatever their exit status, so a server away
during one update takes the site off the grid: with `--cache FILE` each LDIF read is kept there,
and printed again, with a warning, while the server cannot be read and it is at most `--max-age`
old. The LDIF is written as it came into a pipe or a file; to a terminal, only if it holds no
control character but newline (nor bidi control): LDIF needs none raw (RFC 2849 writes such a value
base64, and the server writes every value with a control character so), and one from a hostile
server would be an escape sequence to an operator's terminal.
"""

from __future__ import annotations

import argparse
import os
import stat
import sys
import time
import urllib.parse
from typing import Any

from infosvc.controls import CONTROLS, visible
from infosvc.cli.client import MAX_ANSWER_BYTES, Client, ClientError
from infosvc.codec.gridformat import WARNING_PREFIX, valid_site


def add_command(commands: Any, common: Any) -> None:
    ldif = commands.add_parser("ldif", parents=[common], help="the site as GLUE 1.3 and 2.0 LDIF, as a BDII "
                               "information provider prints it")
    ldif.add_argument("--schema", choices=("1.3", "2.0"), help="only GLUE 1.3 (o=grid) or 2.0 (o=glue); both "
                      "when not given")
    ldif.add_argument("--site", metavar="NAME", help="the site's id (GlueSiteUniqueID, GLUE 2.0 AdminDomain); "
                      "else the host of the server's information service URL")
    ldif.add_argument("--base", action="store_true", help="print the BDII's base entries too (for a bare slapd)")
    ldif.add_argument("--cache", metavar="FILE", help="keep each LDIF read in FILE, and print it again while the "
                      "server cannot be read (a BDII deletes what a provider's output lacks)")
    ldif.add_argument("--max-age", type=float, default=3600.0, metavar="SECONDS",
                      help="print the --cache FILE only while it is at most this old (3600)")


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
        if not body.startswith(b"# GLUE"):
            raise ClientError(f"{args.server} did not answer with LDIF")
    except ClientError as exc:
        print(f"infosvc ldif: {visible(str(exc))}", file=sys.stderr)
        if args.cache is None:
            return 1
        kept = _cached(args.cache, args.max_age)
        if isinstance(kept, str):
            print(f"infosvc ldif: {visible(kept)}", file=sys.stderr)
            return 1
        body = kept
    else:
        if args.cache is not None:
            try:
                _keep(args.cache, body)
            except OSError as exc:  # the LDIF is still printed: the BDII needs it more than the cache
                print(f"infosvc ldif: warning: cannot keep it in {visible(args.cache)}: {exc.strerror or exc}",
                      file=sys.stderr)
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


def _keep(path: str, body: bytes) -> None:
    """`body` in `path`, whole or not at all (a temporary file renamed over it), the runner's alone."""
    temporary = f"{path}.{os.getpid()}.tmp"
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(body)
            out.flush()
            os.fsync(out.fileno())
        os.rename(temporary, path)  # a link at `path` is replaced, never followed
    except BaseException:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        raise


def _cached(path: str, max_age: float) -> bytes | str:
    """The LDIF kept in `path`, or why it is not printed (missing, a link or not a file, too old)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        return f"no LDIF kept in {path} to print instead: {exc.strerror or exc}"
    with os.fdopen(fd, "rb") as kept:
        info = os.fstat(kept.fileno())
        if not stat.S_ISREG(info.st_mode):
            return f"{path} is not a file: nothing printed"
        age = time.time() - info.st_mtime
        if age > max_age:
            return f"the LDIF kept in {path} is older than --max-age ({age:.0f} s > {max_age:g} s): nothing printed"
        body = kept.read(MAX_ANSWER_BYTES + 1)
    if not body.startswith(b"# GLUE") or len(body) > MAX_ANSWER_BYTES:
        return f"{path} does not hold LDIF this command wrote: nothing printed"
    print(f"infosvc ldif: printed the last LDIF read instead, {age:.0f} s old, from {path}", file=sys.stderr)
    return body


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
