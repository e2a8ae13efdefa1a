"""The command line against a hostile server (a fake one on loopback, started by each test): a
`next` page that loops or points at another host or port, JSON nested past the parser's depth or
of another shape, an answer trickled a byte at a time, LDIF holding escape sequences. Each is an
error of one line on stderr and exit status 1 (or, for LDIF to a pipe, the body as it came), never a
traceback, a loop, a hang, a token sent elsewhere or an escape sequence on an operator's terminal."""

from __future__ import annotations

import errno
import json
import os
import pty
import random
import select
import socket
import socketserver
import ssl
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, BinaryIO, Callable, Iterator

import pytest

import infosvc.cli.client as client_module
import infosvc.cli.jobs as jobs_module
from infosvc.cli import main

SECRET = "SECRET-token-0123456789"
JOB: dict[str, Any] = {
    "id": "1", "name": "a", "state": "Queued", "owner": "alice", "priority": "Normal",
    "processors": {"min": 1, "max": 1, "held": 0, "beyond_asked": None}, "run_time_limit_seconds": 60,
    "submitted": "2026-01-01T00:00:00Z", "started": None, "ended": None, "hosts": None, "reason": "Priority",
    "events": [], "holds": [], "tasks": [],
}
GLUE_HEAD = b"# GLUE 2.0 LDIF\n"

Respond = Callable[[BinaryIO, str], None]


def http_answer(body: bytes, status: str = "200 OK", content_type: str = "application/json") -> bytes:
    return (f"HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {len(body)}\r\n"
            "Connection: close\r\n\r\n").encode() + body


class _Handler(socketserver.StreamRequestHandler):
    server: Fake

    def handle(self) -> None:
        words = self.rfile.readline(65537).split()
        authorization = None
        while True:
            line = self.rfile.readline(65537)
            if line in (b"\r\n", b"\n", b""):
                break
            name, _, value = line.decode("latin-1").partition(":")
            if name.strip().lower() == "authorization":
                authorization = value.strip()
        path = words[1].decode("latin-1") if len(words) > 1 else ""
        with self.server.lock:
            self.server.seen.append((path, authorization))
        try:
            self.server.respond(self.wfile, path)
        except OSError:  # the client has gone (cut off, as it should be)
            pass


class Fake(socketserver.ThreadingTCPServer):
    """Answers each request with `respond(wfile, path)`, raw bytes of its choosing; records the
    path and Authorization of each request it gets."""

    daemon_threads = True

    def __init__(self, respond: Respond, port: int = 0, tls: ssl.SSLContext | None = None) -> None:
        self.respond = respond
        self.tls = tls
        self.seen: list[tuple[str, str | None]] = []
        self.lock = threading.Lock()
        super().__init__(("127.0.0.1", port), _Handler)
        threading.Thread(target=self.serve_forever, daemon=True).start()

    def get_request(self) -> tuple[socket.socket, Any]:
        sock, address = super().get_request()
        if self.tls is None:
            return sock, address
        sock.settimeout(10)
        return self.tls.wrap_socket(sock, server_side=True), address  # an SSLError is dropped as an OSError

    @property
    def url(self) -> str:
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self.server_address[1]}"


def answering(raw: bytes | Callable[[str], bytes]) -> Respond:
    def respond(wfile: BinaryIO, path: str) -> None:
        wfile.write(raw(path) if callable(raw) else raw)
    return respond


@pytest.fixture
def fakes() -> Iterator[Callable[..., Fake]]:
    started: list[Fake] = []

    def start(respond: Respond, port: int = 0, tls: ssl.SSLContext | None = None) -> Fake:
        server = Fake(respond, port, tls)
        started.append(server)
        return server
    yield start
    for server in started:
        server.shutdown()
        server.server_close()


@pytest.fixture
def token(tmp_path: Path) -> str:
    path = tmp_path / "t.token"
    path.write_text(SECRET + "\n")
    return str(path)


def cli(*args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "infosvc", *args], capture_output=True, text=True, timeout=timeout)


def one_line_error(done: subprocess.CompletedProcess[str], command: str) -> None:
    """The documented contract: exit status 1, one line on stderr, no traceback."""
    assert done.returncode == 1, (done.returncode, done.stderr[-2000:])
    assert "Traceback" not in done.stderr, done.stderr[-2000:]
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"infosvc {command}: "), done.stderr[-2000:]


# --- 1. `next`: followed only as a path of /v1/jobs on the server given, and only while it adds jobs -----------

def test_a_page_with_no_job_that_says_there_is_a_next_stops_the_listing(fakes: Callable[..., Fake]) -> None:
    server = fakes(answering(http_answer(json.dumps({"jobs": [], "next": "/v1/jobs?cursor=x"}).encode())))
    done = cli("jobs", "--server", server.url, timeout=20)  # it looped for ever (5,124 requests in 10 s)
    one_line_error(done, "jobs")
    assert "no job" in done.stderr
    assert len(server.seen) == 1


def _port_pair(fakes: Callable[..., Fake], respond: Respond, second: Respond) -> tuple[Fake, Fake, str]:
    """Two servers whose ports are P and P*10+D: D appended to the first's URL names the second."""
    for _ in range(200):
        port = random.randrange(1024, 6553)
        try:
            first = fakes(respond, port)
        except OSError:
            continue
        for digit in range(10):
            try:
                return first, fakes(second, port * 10 + digit), str(digit)
            except OSError:
                continue
    pytest.skip("no pair of free ports P, P*10+D")


@pytest.mark.parametrize("shape", ["{digit}/v1/jobs?stolen=1", "{digit}/stolen", "//127.0.0.1:{port}/v1/jobs?x",
                                   "http://127.0.0.1:{port}/v1/jobs?x", "@127.0.0.1:{port}/v1/jobs?x",
                                   "/v1/nodes?x", "/v1/jobs?a b", "/v1/jobs/../nodes"])
def test_a_next_page_never_takes_the_token_to_another_port_or_host(fakes: Callable[..., Fake], token: str,
                                                                   shape: str) -> None:
    nexts: list[str] = []
    first, elsewhere, digit = _port_pair(
        fakes, answering(lambda path: http_answer(json.dumps({"jobs": [JOB], "next": nexts[0]}).encode())),
        answering(http_answer(b'{"jobs": []}')))
    nexts.append(shape.format(digit=digit, port=elsewhere.server_address[1]))
    done = cli("jobs", "--server", first.url, "--token-file", token)
    one_line_error(done, "jobs")
    assert elsewhere.seen == []  # the token went to port P*10+D with `next` ":P*10+D/stolen"'s like
    assert len(first.seen) == 1
    assert "next" in done.stderr and "not followed" in done.stderr
    assert SECRET not in done.stderr + done.stdout


def test_a_next_page_already_read_stops_the_listing(fakes: Callable[..., Fake]) -> None:
    server = fakes(answering(http_answer(json.dumps({"jobs": [JOB], "next": "/v1/jobs?cursor=1"}).encode())))
    done = cli("jobs", "--server", server.url, "--state", "Queued", "--max", "50")
    one_line_error(done, "jobs")
    assert len(server.seen) == 2


def test_the_pages_read_of_one_listing_are_bounded(fakes: Callable[..., Fake], monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    def page(path: str) -> bytes:  # a new job and a new cursor each page, for ever
        number = len(server.seen)
        return http_answer(json.dumps({"jobs": [{**JOB, "id": str(number)}],
                                       "next": f"/v1/jobs?cursor={number}"}).encode())
    server = fakes(answering(page))
    monkeypatch.setattr(jobs_module, "MAX_PAGES", 5)
    assert main(["jobs", "--server", server.url, "--state", "Queued"]) == 1
    assert "pages" in capsys.readouterr().err
    assert len(server.seen) == 5


def test_a_listing_of_several_pages_is_read_whole(fakes: Callable[..., Fake]) -> None:
    def page(path: str) -> bytes:
        at = int(path.rsplit("cursor=", 1)[1]) if "cursor=" in path else 0
        following = f"/v1/jobs?state=Queued&limit=1000&cursor={at + 1}" if at < 2 else None
        return http_answer(json.dumps({"jobs": [{**JOB, "id": str(at + 1)}], "next": following}).encode())
    server = fakes(answering(page))
    done = cli("jobs", "--server", server.url, "--state", "Queued", "--json")
    assert done.returncode == 0, done.stderr
    assert [job["id"] for job in json.loads(done.stdout)["jobs"]] == ["1", "2", "3"]
    assert [path for path, _ in server.seen][1:] == ["/v1/jobs?state=Queued&limit=1000&cursor=1",
                                                     "/v1/jobs?state=Queued&limit=1000&cursor=2"]


# --- 2. malformed JSON: nested past the parser's depth, or of another shape -------------------------------------

NESTED = b"[" * 200_000 + b"]" * 200_000


@pytest.mark.parametrize("status", ["200 OK", "400 Bad Request"])
@pytest.mark.parametrize("command", [["jobs"], ["why", "1"], ["show", "1"], ["status"]])
def test_json_nested_too_deeply_is_one_line(fakes: Callable[..., Fake], command: list[str], status: str) -> None:
    server = fakes(answering(http_answer(NESTED, status)))
    one_line_error(cli(*command, "--server", server.url), command[0])


@pytest.mark.parametrize(("command", "answer"), [
    (["jobs"], [1, 2, 3]),
    (["jobs"], {"jobs": [1, 2, 3]}),
    (["jobs"], {"jobs": "x"}),
    (["jobs"], {"jobs": [{**JOB, "id": 7}]}),
    (["jobs"], {"jobs": [{**JOB, "processors": [1]}]}),
    (["jobs"], {"jobs": [{**JOB, "priority": 3}]}),
    (["jobs"], {"jobs": [{**JOB, "run_time_limit_seconds": float("inf")}]}),
    (["jobs"], {"jobs": [JOB], "next": 5}),
    (["why", "1"], [1, 2, 3]),
    (["why", "1"], {**JOB, "processors": "x"}),
    (["why", "1"], {**JOB, "processors": {"min": 1}}),
    (["why", "1"], {**JOB, "events": [1]}),
    (["why", "1"], {**JOB, "holds": [1]}),
    (["why", "1"], {**JOB, "reserved": {"at": "2026-01-01T00:00:00Z"}}),
    (["why", "1"], {**JOB, "state": "Running", "started": "2026-01-01T00:00:00Z", "run_time_limit_seconds": 1e300}),
    (["show", "1"], [1, 2, 3]),
    (["show", "1"], {**JOB, "processors": [1]}),
    (["show", "1"], {**JOB, "tasks": [1]}),
    (["show", "1"], {**JOB, "events": "abc"}),
])
def test_an_answer_of_another_shape_is_one_line(fakes: Callable[..., Fake], command: list[str], answer: Any) -> None:
    server = fakes(answering(http_answer(json.dumps(answer).encode())))
    one_line_error(cli(*command, "--server", server.url), command[0])


@pytest.mark.parametrize("command", [["why", "1"], ["show", "1"], ["jobs"]])
def test_a_job_of_the_documented_shape_still_prints(fakes: Callable[..., Fake], command: list[str]) -> None:
    server = fakes(answering(lambda path: http_answer(json.dumps(
        {"jobs": [JOB], "next": None} if path.startswith("/v1/jobs?") else JOB).encode())))
    done = cli(*command, "--server", server.url)
    assert done.returncode == 0, done.stderr
    assert "alice" in done.stdout or "UserId=alice" in done.stdout or "job 1" in done.stdout


def test_job_ids_that_int_refuses_are_listed_after_the_numbers(fakes: Callable[..., Fake]) -> None:
    ids = ["\u00b2", "9" * 5000, "10", "9"]  # each isdigit(); int() refused the first two (a traceback)
    server = fakes(answering(http_answer(json.dumps({"jobs": [{**JOB, "id": i} for i in ids]}).encode())))
    done = cli("jobs", "--server", server.url, "--state", "Queued", "--json")
    assert done.returncode == 0, done.stderr
    assert [job["id"] for job in json.loads(done.stdout)["jobs"]] == ids  # --state: as the server listed them
    done = cli("jobs", "--server", server.url)
    assert done.returncode == 0, done.stderr
    listed = [line.split()[0] for line in done.stdout.splitlines()[1:]]
    assert listed[:4] == ["9", "9", "10", "10"]  # the live queue (Running, then Queued) in id order


# --- 3. a time limit for the whole exchange, not per read -------------------------------------------------------

def _trickle(head: bytes, slow: bytes, seconds: float) -> Respond:
    def respond(wfile: BinaryIO, path: str) -> None:
        wfile.write(head)
        for byte in slow:
            wfile.write(bytes([byte]))
            time.sleep(seconds / len(slow))
    return respond


@pytest.mark.serial  # measures the time the command takes
@pytest.mark.parametrize(("command", "where"), [("jobs", "headers"), ("jobs", "body"), ("ldif", "body")])
def test_a_trickling_server_is_cut_off_at_the_time_limit(fakes: Callable[..., Fake], monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str], command: str,
                                                        where: str) -> None:
    body = (GLUE_HEAD + b"dn: o=glue\n" if command == "ldif" else b'{"jobs": [], "next": null}') + b" " * 60
    raw = http_answer(body, content_type="text/plain" if command == "ldif" else "application/json")
    split = raw.index(b"\r\n\r\n") + 4
    # each byte comes well within the per-read timeout; the whole answer takes 6 s
    server = fakes(_trickle(b"", raw, 6.0) if where == "headers" else _trickle(raw[:split], raw[split:], 6.0))
    monkeypatch.setattr(client_module, "TIMEOUT_SECONDS", 1.0)
    began = time.monotonic()
    status = main([command, "--server", server.url])
    took = time.monotonic() - began
    err = capsys.readouterr().err
    assert status == 1, err
    assert took < 4.0, took
    assert "within 1 s" in err and len(err.splitlines()) == 1, err


@pytest.mark.serial  # measures the time the command takes
def test_a_name_lookup_that_hangs_is_cut_off_at_the_time_limit(monkeypatch: pytest.MonkeyPatch,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    # a resolver whose servers do not answer: the lookup alone would outlast the limit
    looked_up = threading.Event()

    def hanging(*args: Any, **kwargs: Any) -> Any:
        looked_up.set()
        time.sleep(8.0)
        raise socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")

    monkeypatch.setattr(socket, "getaddrinfo", hanging)
    monkeypatch.setattr(client_module, "TIMEOUT_SECONDS", 1.0)
    began = time.monotonic()
    status = main(["jobs", "--server", "http://head.invalid:8080"])
    took = time.monotonic() - began
    err = capsys.readouterr().err
    assert looked_up.is_set()
    assert status == 1, err
    assert took < 4.0, took
    assert "timed out looking up head.invalid" in err and len(err.splitlines()) == 1, err


def test_a_name_no_lookup_can_take_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    # a label over 63 characters: getaddrinfo raises a UnicodeError, not an OSError, in the lookup's thread
    status = main(["jobs", "--server", f"http://{'a' * 64}.example:8080"])
    err = capsys.readouterr().err
    assert status == 1 and len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert "too long" in err or "label" in err, err


@pytest.fixture
def pki(tmp_path: Path) -> tuple[ssl.SSLContext, str, str]:
    """A server's TLS context, its CA's file, and another CA's file."""
    from support.pki import make_ca, make_server_cert

    ca, ca_cert, ca_key = make_ca(tmp_path, "site-ca")
    other, _, _ = make_ca(tmp_path, "other-ca")
    server = make_server_cert(tmp_path, ca_cert, ca_key)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(server.cert, server.key)
    return context, str(ca.cert), str(other.cert)


@pytest.mark.serial  # measures the time the command takes
def test_over_https_the_limit_holds_and_the_certificate_is_still_verified(
        fakes: Callable[..., Fake], pki: tuple[ssl.SSLContext, str, str], monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    context, ca, other = pki
    good = fakes(answering(http_answer(json.dumps({"jobs": [JOB], "next": None}).encode())), tls=context)
    done = cli("jobs", "--server", good.url, "--ca-file", ca, "--state", "Queued")
    assert done.returncode == 0 and "alice" in done.stdout, done.stderr
    refused = cli("jobs", "--server", good.url, "--ca-file", other)
    one_line_error(refused, "jobs")
    assert "CERTIFICATE_VERIFY_FAILED" in refused.stderr or "certificate" in refused.stderr
    raw = http_answer(b'{"jobs": [], "next": null}' + b" " * 60)
    split = raw.index(b"\r\n\r\n") + 4
    slow = fakes(_trickle(raw[:split], raw[split:], 6.0), tls=context)
    monkeypatch.setattr(client_module, "TIMEOUT_SECONDS", 1.0)
    began = time.monotonic()
    assert main(["jobs", "--server", slow.url, "--ca-file", ca]) == 1
    assert time.monotonic() - began < 4.0
    assert "within 1 s" in capsys.readouterr().err


# --- 4. `infosvc ldif`: no control character onto a terminal; the body as it came into a pipe -------------------

HOSTILE_LDIF = GLUE_HEAD + b"dn: o=glue\nobjectClass: organization\n# \x1b]0;owned\x07\x1b[2J\x9b\n"
CLEAN_LDIF = GLUE_HEAD + b"dn: o=glue\nobjectClass: organization\n"


def _on_a_terminal(url: str) -> tuple[int, bytes, str]:
    """`infosvc ldif` run with a pty as its stdout: its status, what reached the terminal, its stderr."""
    master, slave = pty.openpty()
    with tempfile.TemporaryFile() as err:
        process = subprocess.Popen([sys.executable, "-m", "infosvc", "ldif", "--server", url], stdout=slave,
                                   stderr=err, stdin=subprocess.DEVNULL)
        os.close(slave)
        shown = b""
        deadline = time.monotonic() + 60
        try:
            while time.monotonic() < deadline:
                ready, _, _ = select.select([master], [], [], 0.5)
                if not ready:
                    if process.poll() is not None:
                        break
                    continue
                try:
                    chunk = os.read(master, 65536)
                except OSError as exc:  # EIO: the child, the last to hold the slave, has ended
                    if exc.errno != errno.EIO:
                        raise
                    break
                if not chunk:
                    break
                shown += chunk
        finally:
            os.close(master)
        status = process.wait(timeout=60)
        err.seek(0)
        return status, shown, err.read().decode()


def test_ldif_with_control_characters_is_not_written_to_a_terminal(fakes: Callable[..., Fake]) -> None:
    server = fakes(answering(http_answer(HOSTILE_LDIF, content_type="text/plain")))
    status, shown, err = _on_a_terminal(server.url)
    assert status == 1, err
    assert b"\x1b" not in shown and b"dn:" not in shown, shown
    assert err.startswith("infosvc ldif: ") and len(err.splitlines()) == 1 and "terminal" in err, err
    assert "\x1b" not in err


def test_ldif_without_them_is_written_to_a_terminal(fakes: Callable[..., Fake]) -> None:
    server = fakes(answering(http_answer(CLEAN_LDIF, content_type="text/plain")))
    status, shown, err = _on_a_terminal(server.url)
    assert status == 0, err
    assert shown.replace(b"\r\n", b"\n") == CLEAN_LDIF


def test_ldif_into_a_pipe_is_the_body_as_it_came(fakes: Callable[..., Fake]) -> None:
    server = fakes(answering(http_answer(HOSTILE_LDIF, content_type="text/plain")))
    done = subprocess.run([sys.executable, "-m", "infosvc", "ldif", "--server", server.url], capture_output=True,
                          timeout=30)
    assert done.returncode == 0, done.stderr
    assert done.stdout == HOSTILE_LDIF


# --- every other command: an answer of another shape is one line too --------------------------------------------

JOB_DOCUMENT = b"<Job><Executable>/bin/true</Executable></Job>"


@pytest.mark.parametrize("command", [["submit", "JOBFILE"], ["cancel", "1"], ["hold", "1"], ["release", "1"],
                                     ["requeue", "1"], ["priority", "1", "High"], ["hosts", "pause", "cn1"],
                                     ["match", "JOBFILE"], ["status"]])
@pytest.mark.parametrize("answer", [{}, {"id": [1], "state": 2, "hosts": "x", "matches": [1], "jobs": 3},
                                    {"hosts": [{"host": None}], "subclusters": [1], "computing_elements": {}}])
def test_any_command_says_an_answer_of_another_shape_in_one_line(fakes: Callable[..., Fake], tmp_path: Path,
                                                                 command: list[str], answer: Any) -> None:
    # the review's fix covered jobs, why, show and status's host lines; the other commands indexed
    # the answer as they printed it (answer['id']: a KeyError's traceback)
    job = tmp_path / "job.xml"
    job.write_bytes(JOB_DOCUMENT)
    server = fakes(answering(http_answer(json.dumps(answer).encode())))
    done = cli(*[str(job) if word == "JOBFILE" else word for word in command], "--server", server.url)
    if done.returncode == 0:  # an answer that happens to read as an empty one of its kind
        assert "Traceback" not in done.stderr
        return
    one_line_error(done, command[0])
