"""`infosvc`: the command line of the service.

`infosvc serve` runs the aggregator; `infosvc validate FILE...` checks SSS Node and job documents
and says what is wrong and where (infosvc/cli/validate.py); `infosvc status` prints a server's
hosts, subclusters and CEs (infosvc/cli/status.py); `submit`, `jobs`, `cancel` and `why` use its
job queue (infosvc/cli/jobs.py), `hold`, `release`, `requeue`, `priority` and `show` a job's
controls (infosvc/cli/jobcontrols.py); `hosts` and `match` an admin's decisions and the dry run
(infosvc/cli/hosts.py); `ldif` prints the site as GLUE LDIF for a BDII (infosvc/cli/ldif.py);
`simulate` replays a workload trace (infosvc/cli/simulate.py).
"""

from __future__ import annotations

import argparse
import errno
import os
import stat
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING, AsyncIterator, Final

if TYPE_CHECKING:
    import ssl

from infosvc import __version__


#: where the commands find the aggregator when neither --server nor $INFOSVC_SERVER says
DEFAULT_SERVER = "http://127.0.0.1:8080"


def parser(command: str | None = None) -> argparse.ArgumentParser:
    """The command line; with `command` "simulate", that command's alone: a replay of a small trace
    takes about as long as importing every other command's modules, which it does not need (nor
    the other commands' arguments: building them took 1-2 ms, 1-2 % of a 5,000-job replay)."""
    p = argparse.ArgumentParser(prog="infosvc", description="Resource information service for clusters and grids.")
    p.add_argument("--version", action="version", version=f"infosvc {__version__}")
    commands = p.add_subparsers(dest="command", required=True)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--server", metavar="URL", default=os.environ.get("INFOSVC_SERVER") or DEFAULT_SERVER,
                        help=f"the aggregator (default: $INFOSVC_SERVER, else {DEFAULT_SERVER})")
    common.add_argument("--token-file", metavar="FILE", default=os.environ.get("INFOSVC_TOKEN_FILE") or None,
                        help="the token to present (a submit or admin token to submit and cancel; any, for "
                             "reads, when the server requires one; default: $INFOSVC_TOKEN_FILE)")
    common.add_argument("--ca-file", metavar="FILE", help="CA certificates to verify an https server with")
    from infosvc.cli.simulate import add_command

    if command == "simulate":
        add_command(commands, common)
        return p
    serve = commands.add_parser("serve", help="run the aggregator")
    serve.add_argument("--config", metavar="FILE", help="site config (TOML); see docs/configuration.md")
    serve.add_argument("--listen", metavar="HOST:PORT", help="address to listen on (config: service.listen)")
    serve.add_argument("--db", metavar="PATH", help="SQLite file (config: service.db)")
    serve.add_argument("--tokens", metavar="FILE", help="who may write: 'ROLE TOKEN [HOST|USER]' a line")
    serve.add_argument("--local-agent", action="store_true",
                       help="also run an agent for this host, with a token made for it")
    serve.add_argument("--agent-interval", type=float, default=10.0, metavar="SECONDS",
                       help="the local agent's interval (10)")
    serve.add_argument("--run-jobs", action="store_true",
                       help="with --local-agent: its executor runs the jobs placed on this host, as the user "
                            "running serve (never root)")
    serve.add_argument("--user-tokens", action="store_true",
                       help="make an admin and a submit token for the user running serve, kept beside the "
                            "database (DB.admin-token, DB.submit-token, mode 0600), and print how to use them")
    serve.add_argument("--tls-cert", metavar="FILE",
                       help="serve https: the server's certificate chain (PEM); needs --tls-key")
    serve.add_argument("--tls-key", metavar="FILE", help="the private key (PEM) of --tls-cert")
    serve.add_argument("--upstream", action="append", default=[], metavar="URL",
                       help="be a top level: pull this site aggregator's GLUE (repeatable; config: "
                            "[[federation.upstreams]]; docs/grid.md)")
    serve.add_argument("--upstream-token-file", metavar="FILE", help="the read token the --upstream sites ask for")
    serve.add_argument("-v", "--verbose", action="store_true")
    serve.add_argument("--log-format", choices=("text", "json"), default="text",
                       help="log lines as text, or one JSON object each (time, level, logger, message)")
    check = commands.add_parser("check-config", help="check a site config (TOML): exit 0, or 1 with the error")
    check.add_argument("file", metavar="FILE")
    validate = commands.add_parser("validate", help="check SSS Node and job documents ('-' reads stdin)")
    validate.add_argument("files", nargs="+", metavar="FILE")
    validate.add_argument("--json", action="store_true", help="print each node or job, or each error, as JSON")
    from infosvc.cli.hosts import add_commands as add_host_commands
    from infosvc.cli.jobs import add_commands
    from infosvc.cli.ldif import add_command as add_ldif_command
    from infosvc.cli.status import add_command as add_status_command
    from infosvc.cli.jobcontrols import add_commands as add_control_commands

    add_status_command(commands, common)
    add_ldif_command(commands, common)
    add_commands(commands, common)
    add_host_commands(commands, common)
    add_command(commands, common)
    add_control_commands(commands, common)
    return p


def tls_context(cert: str | None, key: str | None) -> ssl.SSLContext | None:
    """The server's TLS context (TLS 1.2 or later), or None for plain http; ValueError when unusable."""
    import ssl

    if cert is None and key is None:
        return None
    if cert is None or key is None:
        raise ValueError("--tls-cert and --tls-key go together: give both, or neither for plain http")
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    for name in (cert, key):
        try:
            with open(name, "rb"):
                pass
        except OSError as exc:
            raise ValueError(f"TLS: cannot read {name}: {exc.strerror}") from None
    try:
        context.load_cert_chain(cert, key)
    except (ssl.SSLError, OSError) as exc:
        raise ValueError(f"TLS: cannot use certificate {cert} with key {key}: {exc}") from None
    return context


def _serve(args: argparse.Namespace) -> int:
    import logging
    import sqlite3
    import subprocess

    from aiohttp import web

    from infosvc.web import connections, server
    from infosvc.web.app import make_app
    from infosvc.store import StoreError
    from infosvc.config import listen_address
    from infosvc.config import load_config
    from infosvc.config import ConfigError
    from infosvc.config import with_upstreams
    from infosvc.model.hostid import HostIdError, host_id
    from infosvc.hosts import USER_NAME, Role, TokenFileError, Tokens

    from infosvc.cli.logs import configure

    configure(logging.DEBUG if args.verbose else logging.INFO, args.log_format)
    try:
        config = load_config(args.config)
        if args.upstream or args.upstream_token_file:
            config = with_upstreams(config, args.upstream, args.upstream_token_file)
        tokens = Tokens.load(args.tokens)
        try:  # the config's service.listen was checked as it loaded, as check-config checks it
            host, port = listen_address(args.listen or config.service.listen)
        except ValueError as exc:
            raise ValueError(f"--listen: {exc}") from None
        tls = tls_context(args.tls_cert, args.tls_key)
    except (ConfigError, TokenFileError, ValueError) as exc:
        print(f"infosvc: {exc}", file=sys.stderr)
        return 2
    db = args.db or config.service.db
    if args.run_jobs and not args.local_agent:
        print("infosvc: --run-jobs is the local agent's: use it with --local-agent", file=sys.stderr)
        return 2
    if args.run_jobs and os.geteuid() == 0:
        print("infosvc: --run-jobs runs jobs as the user running serve, and that is root: run serve as "
              "another user, or run an agent of its own with --run-jobs --run-as ACCOUNT (docs/operations.md)",
              file=sys.stderr)
        return 2
    agent_token: Path | None = None
    executor_token: Path | None = None
    user_tokens: dict[Role, Path] = {}
    try:
        if args.local_agent:
            agent_token, token = token_beside(db, "local-agent-token")
            # Bound to this host as a tokens file's HOST column binds: it overrides a binding the
            # store keeps for another token (a token file removed to rotate it).
            tokens.add(token, Role.AGENT, host=host_id(os.uname().nodename))
        if args.run_jobs:
            executor_token, token = token_beside(db, "local-executor-token")
            tokens.add(token, Role.EXECUTOR, host=host_id(os.uname().nodename))
        if args.user_tokens:
            import getpass  # serve's alone: `infosvc simulate` imports neither this nor shlex

            user = getpass.getuser()
            for role in (Role.ADMIN, Role.SUBMIT):
                user_tokens[role], token = token_beside(db, f"{role.value}-token")
                # the submit token files the jobs of the user running serve (their owner)
                bound = user if role is Role.SUBMIT and USER_NAME.match(user) else None
                tokens.add(token, role, user=bound)
    except (OSError, TokenFileError, HostIdError) as exc:
        print(f"infosvc: the tokens made beside {db}: {exc}", file=sys.stderr)
        return 1
    url = f"{'https' if tls else 'http'}://{host if ':' not in host else f'[{host}]'}:{port}"

    async def local_agent(app: web.Application) -> AsyncIterator[None]:
        # Entered after the aggregator's context (make_app appends that first) and left before it:
        # the agent stops before the store closes.
        agent = None
        if agent_token is not None:
            jobs = ["--run-jobs", "--executor-token-file", str(executor_token),
                    "--task-state", f"{db}.local-tasks"] if executor_token is not None else []
            agent = subprocess.Popen([sys.executable, "-m", "infosvc_agents", "--server", url,
                                      "--token-file", str(agent_token), "--id", host_id(os.uname().nodename),
                                      "--interval", str(args.agent_interval), "--stop-with", str(os.getpid())]
                                     + jobs
                                     # It trusts the served chain itself: a self-signed certificate,
                                     # or a chain file that ends in its root CA.
                                     + (["--ca-file", args.tls_cert] if tls else []))
        try:
            yield
        finally:
            if agent is not None:
                agent.terminate()
                try:
                    agent.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    agent.kill()

    app = make_app(config, db=db, tokens=tokens)
    app.cleanup_ctx.append(local_agent)

    def listening() -> None:  # only once the address is bound: a busy port prints no URL
        print(f"infosvc: serving on {url} with {db}", flush=True)
        print(f"  page:   {url}/", flush=True)
        print(f"  hosts:  {url}/v1/nodes", flush=True)
        print(f"  GLUE:   {url}/v1/glue", flush=True)
        print(f"  jobs:   {url}/v1/jobs", flush=True)
        print(f"  health: {url}/healthz", flush=True)
        if user_tokens:
            print(usage_of_tokens(url, user_tokens[Role.SUBMIT], user_tokens[Role.ADMIN]), flush=True)

    try:
        # web.run_app, but with the connections capped, their clients timed and aiohttp's own refusals
        # answered as JSON (infosvc/web/connections.py).
        server.run(app, host=host, port=port, ssl_context=tls, policy=connections.Policy.of(config.service),
                   listening=listening, top_level=bool(config.federation.upstreams))
    except (StoreError, sqlite3.Error) as exc:  # a database newer than this infosvc, in use, damaged, or no file
        print(f"infosvc: {db}: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        if exc.errno not in (errno.EADDRINUSE, errno.EADDRNOTAVAIL, errno.EACCES):
            raise
        print(f"infosvc: cannot listen on {host}:{port}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    return 0


def usage_of_tokens(url: str, submit: Path, admin: Path) -> str:
    """What `serve --user-tokens` prints: the two files, and the commands that use them."""
    import shlex

    command = _this_command()
    return "\n".join([
        f"  tokens: {submit.resolve()} (submit), {admin.resolve()} (admin); to use them:",
        f"    export INFOSVC_SERVER={shlex.quote(url)} INFOSVC_TOKEN_FILE={shlex.quote(str(submit.resolve()))}",
        f"    {command} submit JOB.xml; {command} jobs --me; {command} why JOB",
        f"    INFOSVC_TOKEN_FILE={shlex.quote(str(admin.resolve()))} {command} hosts pause HOST   (an admin's commands)"])


def _this_command() -> str:
    """How the user runs this infosvc again: `infosvc` where that is on PATH, else the script's
    path as it was started (.venv/bin/infosvc under `make run`), else `python -m infosvc`."""
    import shlex

    started = sys.argv[0]
    if os.path.basename(started) != "infosvc":
        return f"{shlex.quote(sys.executable)} -m infosvc"
    found = shutil.which("infosvc")
    if found is not None and os.path.realpath(found) == os.path.realpath(started):
        return "infosvc"
    return shlex.quote(started)


def token_beside(db: str, name: str) -> tuple[Path, str]:
    """A token kept beside the database (DB.NAME, mode 0600) and made on first use. The local
    agent's must be: the host's stored binding names that token, so a restart must present it
    again (a new one would be refused as another token's claim on the host); the user's, so that
    the commands set up with it keep working across restarts."""
    from infosvc.hosts import TokenFileError, new_token

    path = Path(f"{db}.{name}")
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return path, _own_token(path)
    token = new_token()
    with os.fdopen(fd, "w") as handle:
        handle.write(token + "\n")
    return path, token


def _own_token(path: Path) -> str:
    """The token of a file made 0600 here: one that others may read, or that is not a regular file
    of this user's (a link), is refused as ssh refuses such a private key; its token may be known."""
    from infosvc.hosts import TokenFileError

    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError as exc:
        raise TokenFileError(f"{path} is not a regular file of yours ({exc.strerror}): remove it to have a new "
                             "token made") from None
    with os.fdopen(fd, encoding="utf-8") as handle:
        found = os.fstat(handle.fileno())
        if not stat.S_ISREG(found.st_mode) or found.st_uid != os.getuid():
            raise TokenFileError(f"{path} is not a regular file of yours: remove it to have a new token made")
        if found.st_mode & 0o077:
            raise TokenFileError(f"{path} is readable by others: chmod 600 {path} if its token is still yours "
                                 "alone, else remove it to have a new one made")
        token = handle.read().strip()
    if len(token) < 16:
        raise TokenFileError(f"{path} holds no token: remove it to have a new one made")
    return token


#: The top-level modules of the `server` extra: a command that needs one, run where only the agent
#: is installed (`pip install infosvc`), says what to install instead of a traceback.
SERVER_MODULES = frozenset({"aiohttp", "lxml", "sqlite_utils", "ClusterShell", "jsonschema", "numpy", "re2"})


#: The commands that print what a server answered: an answer of another shape than they read
#: (a server of another version, or a hostile one) is one line, not a traceback.
SERVER_ANSWERS: Final = frozenset({"status", "submit", "jobs", "cancel", "why", "hosts", "match", "hold", "release",
                                   "requeue", "priority", "show"})


def main(argv: list[str] | None = None) -> int:
    words = sys.argv[1:] if argv is None else argv
    args = parser(words[0] if words else None).parse_args(words)
    try:
        status = _run(args)
        if argv is None and args.command == "simulate":
            _exit_now(status)
        return status
    except BrokenPipeError:
        return closed_pipe()
    except (KeyError, TypeError, AttributeError, IndexError, ValueError) as exc:
        if args.command not in SERVER_ANSWERS or os.environ.get("INFOSVC_DEBUG"):
            raise
        from infosvc.controls import visible

        print(visible(f"infosvc {args.command}: {args.server}'s answer is not of the shape this infosvc reads "
                      f"({type(exc).__name__}: {str(exc)[:200]}); INFOSVC_DEBUG=1 shows where"), file=sys.stderr)
        return 1
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] not in SERVER_MODULES:
            raise
        print(f"infosvc: {args.command} needs the aggregator's libraries ({exc.name} is not installed): "
              "pip install 'infosvc[server]'", file=sys.stderr)
        return 2


def _exit_now(status: int) -> None:
    """End the process here, its output flushed, without tearing the interpreter down: a
    simulation's trace, jobs and outcomes are hundreds of thousands of objects, and freeing them
    one by one at exit was 3 % of a run of the NASA trace (instructions counted), for nothing. Only
    for a whole process (`main()` from the console script): a caller in the same process gets
    its status back. Nothing of ours waits on exit handlers: a schedule's file is closed by then."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


def closed_pipe() -> int:
    """What reads our output has stopped (`| head`): end quietly, as a shell tool does. Python would
    flush stdout again at exit and fail the same way, so it is pointed at /dev/null first."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return 141  # 128 + SIGPIPE, as a shell reports a command a closed pipe stopped


def _run(args: argparse.Namespace) -> int:
    if args.command == "serve":
        return _serve(args)
    if args.command == "validate":
        from infosvc.cli.validate import run as validate

        return validate(args.files, args.json)
    if args.command == "check-config":
        from infosvc.cli.checkconfig import run as check_config

        return check_config(args.file)
    if args.command == "status":
        from infosvc.cli.status import run

        filters = {key: value for key, value in (("state", args.state), ("cluster", args.cluster),
                                                 ("nodes", args.nodes)) if value}
        return run(args.server, args.json, token_file=args.token_file, ca_file=args.ca_file, filters=filters,
                   per_host=args.hosts)
    if args.command == "ldif":
        from infosvc.cli.ldif import run as run_ldif

        return run_ldif(args)
    if args.command == "simulate":
        from infosvc.cli.simulate import run as run_simulation

        return run_simulation(args)
    if args.command in ("hosts", "match"):
        from infosvc.cli.hosts import run as run_hosts

        return run_hosts(args)
    if args.command in ("hold", "release", "requeue", "priority", "show"):
        from infosvc.cli.jobcontrols import run as run_control

        return run_control(args)
    if args.command in ("submit", "jobs", "cancel", "why"):
        from infosvc.cli.jobs import run as run_jobs

        return run_jobs(args)
    return 2  # pragma: no cover - argparse requires a command


if __name__ == "__main__":
    raise SystemExit(main())
