"""Hostile XML: every way XML enters infosvc refuses a DTD, an entity or a foreign
encoding with a 400 before libxml2 reads a byte of it, and reads no file and opens no connection.

One corpus, ATTACKS x ENCODINGS. Each attack (an internal entity, billion laughs, an external entity,
a parameter entity or an external DTD naming /etc/passwd, a missing file, file:///dev/zero, a FIFO or
a loopback listener, a public DTD, ...) is written in each encoding libxml2 would read: UTF-8 with and
without a byte order mark, UTF-16 and UTF-32 in both byte orders with and without one, encoding=
declarations naming ISO-8859-1, EBCDIC, UTF-7 (which hides `<!DOCTYPE` from a byte scan), UTF-16 over
UTF-8 bytes, a codec that does not exist. The corpus goes through every function that reads XML
(ENTRY_POINTS) and every route that takes XML on a real server (XML_ROUTES). The guards at the end
fail when a reader of XML or an XML route appears that those tables do not name, or when lxml is
asked to parse anywhere but infosvc/codec/safexml.py: a new way in is tested with the same corpus.

How "nothing was read" is seen, without tracing system calls:
- a FIFO: opening one for reading blocks until a writer comes, so a parser that opened it does not
  answer within the time limit, and the test can tell that a reader is waiting (and release it);
- a loopback listener that counts connections, for http: URLs;
- a file holding a marker that must appear in no answer;
- /etc/passwd against a file that does not exist: the answers must be equal byte for byte, or the
  answer tells whether a file exists;
- file:///dev/zero, which a parser that opens it reads for ever (it hung the server for good).
Every case runs under a time limit, so that the old code fails these tests rather than hanging them.
"""

from __future__ import annotations

import ast
import codecs
import errno
import http.client
import json
import os
import random
import socket
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from support import ROOT

from support.server import Reply, Server, ServerFactory, request
from infosvc.codec import safexml
from infosvc.codec.ccsjob_xml import parse_ccs_job
from infosvc.codec.job_xml import parse_job
from infosvc.codec.node_xml import parse_node
from infosvc.errors import DocumentError
from infosvc.codec.submission import parse_submission

#: Seconds a refusal may take before the case counts as hung (they take well under a millisecond).
LIMIT = 5.0
CCS_NS = "https://www.microsoft.com/ComputeCluster/"


# --- the traps -------------------------------------------------------------------------------

@dataclass
class Traps:
    """Files and a listener that hostile documents point at, and ways to tell whether they were used."""

    marker: str
    marker_file: Path
    fifo: Path
    missing: Path
    listener: socket.socket
    connections: int = 0

    @property
    def http(self) -> str:
        return f"http://127.0.0.1:{self.listener.getsockname()[1]}"

    def fifo_opened(self) -> bool:
        """Whether someone has the FIFO open for reading, blocked until a writer comes; releases them
        (they read end of file)."""
        try:
            fd = os.open(self.fifo, os.O_WRONLY | os.O_NONBLOCK)
        except OSError as exc:
            if exc.errno == errno.ENXIO:  # no reader
                return False
            raise
        os.close(fd)
        return True

    def used(self) -> list[str]:
        """What was touched since the last call, in words (empty: nothing)."""
        found = []
        if self.fifo_opened():
            found.append(f"the FIFO {self.fifo} was opened")
        if self.connections:
            found.append(f"{self.connections} connection(s) to the loopback listener")
            self.connections = 0
        return found

    def urls(self) -> dict[str, str]:
        return {"fifo": self.fifo.as_uri(), "marker": self.marker_file.as_uri(), "missing": self.missing.as_uri(),
                "http": self.http}


@pytest.fixture(scope="module")
def traps(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Traps]:
    directory = tmp_path_factory.mktemp("traps")
    marker = f"infosvc-xxe-marker-{random.getrandbits(48):012x}"
    marker_file = directory / "marker.txt"
    marker_file.write_text(marker + "\n")
    fifo = directory / "fifo"
    os.mkfifo(fifo)
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)
    found = Traps(marker, marker_file, fifo, directory / "does-not-exist.dtd", listener)
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                connection, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            found.connections += 1
            connection.close()

    thread = threading.Thread(target=accept, name="trap-listener", daemon=True)
    thread.start()
    yield found
    stop.set()
    thread.join()
    listener.close()
    found.fifo_opened()  # release a reader the old code may have left blocked


# --- the corpus ------------------------------------------------------------------------------

_LAUGHS = "".join(f'<!ENTITY lol{i} "{("&lol" + str(i - 1) + ";") * 10}">' for i in range(2, 10))

#: name -> (prolog, what the root element carries in a text or attribute value). {root} is the root
#: element's name; {fifo}, {marker}, {missing} are file: URLs, {http} the loopback listener.
ATTACKS: dict[str, tuple[str, str]] = {
    "internal-entity": ('<!DOCTYPE {root} [<!ENTITY x "expanded-entity">]>', "&x;"),
    "billion-laughs": ('<!DOCTYPE {root} [<!ENTITY lol1 "lol">' + _LAUGHS + "]>", "&lol9;"),
    "external-entity-passwd": ('<!DOCTYPE {root} [<!ENTITY x SYSTEM "file:///etc/passwd">]>', "&x;"),
    "external-entity-missing": ('<!DOCTYPE {root} [<!ENTITY x SYSTEM "{missing}">]>', "&x;"),
    "external-entity-marker": ('<!DOCTYPE {root} [<!ENTITY x SYSTEM "{marker}">]>', "&x;"),
    "external-entity-fifo": ('<!DOCTYPE {root} [<!ENTITY x SYSTEM "{fifo}">]>', "&x;"),
    "external-entity-network": ('<!DOCTYPE {root} [<!ENTITY x SYSTEM "{http}/entity">]>', "&x;"),
    "parameter-entity-dev-zero": ('<!DOCTYPE {root} [<!ENTITY % p SYSTEM "file:///dev/zero"> %p;]>', ""),
    "parameter-entity-passwd": ('<!DOCTYPE {root} [<!ENTITY % p SYSTEM "file:///etc/passwd"> %p;]>', ""),
    "parameter-entity-missing": ('<!DOCTYPE {root} [<!ENTITY % p SYSTEM "{missing}"> %p;]>', ""),
    "parameter-entity-fifo": ('<!DOCTYPE {root} [<!ENTITY % p SYSTEM "{fifo}"> %p;]>', ""),
    "parameter-entity-network": ('<!DOCTYPE {root} [<!ENTITY % p SYSTEM "{http}/pe"> %p;]>', ""),
    "nested-parameter-entity": ("<!DOCTYPE {root} [<!ENTITY % a \"<!ENTITY &#37; b SYSTEM '{fifo}'>\"> %a; %b;]>",
                                ""),
    "external-dtd-dev-zero": ('<!DOCTYPE {root} SYSTEM "file:///dev/zero">', ""),
    "external-dtd-passwd": ('<!DOCTYPE {root} SYSTEM "file:///etc/passwd">', ""),
    "external-dtd-missing": ('<!DOCTYPE {root} SYSTEM "{missing}">', ""),
    "external-dtd-fifo": ('<!DOCTYPE {root} SYSTEM "{fifo}">', ""),
    "public-dtd-network": ('<!DOCTYPE {root} PUBLIC "-//W3C//DTD XHTML 1.0 Strict//EN" "{http}/xhtml1-strict.dtd">',
                           ""),
    "doctype-after-comment-and-pi": ('<!-- a comment -->\n<?infosvc hello?>\n'
                                     '<!DOCTYPE {root} [<!ENTITY x "expanded-entity">]>', "&x;"),
}

#: Attacks whose answers must be equal: anything else says whether a file exists.
ORACLE_PAIRS = [("external-entity-passwd", "external-entity-missing"),
                ("parameter-entity-passwd", "parameter-entity-missing"),
                ("external-dtd-passwd", "external-dtd-missing")]


def _declared(name: str, codec: str, *, bom: bytes = b"") -> Callable[[str], bytes]:
    return lambda text: bom + f'<?xml version="1.0" encoding="{name}"?>\n{text}'.encode(codec)


def _utf7(text: str) -> bytes:
    """UTF-7, where `<!DOCTYPE` is `<+ACE-DOCTYPE`: invisible to a scan of the bytes."""
    body = text.encode("utf-8").replace(b"!", b"+ACE-").replace(b"%", b"+ACU-")
    return b'<?xml version="1.0" encoding="UTF-7"?>\n' + body


#: name -> (writes the document, words the refusal must say, one of them ("a|b"): the encoding, or
#: DOCTYPE if the encoding is accepted).
ENCODINGS: dict[str, tuple[Callable[[str], bytes], str]] = {
    "utf-8": (lambda text: text.encode("utf-8"), "DOCTYPE"),
    "utf-8-declared": (_declared("UTF-8", "utf-8"), "DOCTYPE"),
    "utf-8-bom": (lambda text: codecs.BOM_UTF8 + text.encode("utf-8"), "DOCTYPE"),
    "utf-8-bom-declared": (_declared("utf-8", "utf-8", bom=codecs.BOM_UTF8), "DOCTYPE"),
    "us-ascii-declared": (_declared("US-ASCII", "ascii"), "DOCTYPE"),
    "utf-16-le-bom": (lambda text: codecs.BOM_UTF16_LE + text.encode("utf-16-le"), "UTF-16"),
    "utf-16-be-bom": (lambda text: codecs.BOM_UTF16_BE + text.encode("utf-16-be"), "UTF-16"),
    "utf-16-le": (lambda text: text.encode("utf-16-le"), "UTF-16"),
    "utf-16-be": (lambda text: text.encode("utf-16-be"), "UTF-16"),
    "utf-16-declared": (_declared("UTF-16", "utf-16"), "UTF-16"),
    "utf-16-be-declared-no-bom": (_declared("UTF-16BE", "utf-16-be"), "UTF-16"),
    "utf-32-le-bom": (lambda text: codecs.BOM_UTF32_LE + text.encode("utf-32-le"), "UTF-32"),
    "utf-32-be-bom": (lambda text: codecs.BOM_UTF32_BE + text.encode("utf-32-be"), "UTF-32"),
    "utf-32-le": (lambda text: text.encode("utf-32-le"), "UTF-32"),
    "utf-32-be": (lambda text: text.encode("utf-32-be"), "UTF-32"),
    "iso-8859-1-declared": (_declared("ISO-8859-1", "latin-1"), "ISO-8859-1"),
    "ebcdic-declared": (_declared("IBM037", "cp037"), "EBCDIC"),
    "utf-7-declared": (_utf7, "UTF-7"),
    "utf-16-declared-on-utf-8": (_declared("UTF-16", "utf-8"), "UTF-16"),
    "utf-8-bom-declared-utf-16": (_declared("UTF-16", "utf-8", bom=codecs.BOM_UTF8), "UTF-16"),
    "unknown-codec-declared": (_declared("x-no-such-codec", "utf-8"), "x-no-such-codec"),
    # Not XML at all (libxml2 reads no overlong form); a body of unknown type is then not a job either.
    "utf-8-overlong-lt": (lambda text: text.encode("utf-8").replace(b"<!DOCTYPE", b"\xc0\xbc!DOCTYPE"),
                          "well-formed|neither XML nor"),
    "utf-8-two-boms": (lambda text: codecs.BOM_UTF8 * 2 + text.encode("utf-8"), "well-formed|neither XML nor"),
}
#: The encodings infosvc reads (the others are refused, whatever the document holds).
ACCEPTED = ("utf-8", "utf-8-declared", "utf-8-bom", "utf-8-bom-declared", "us-ascii-declared")


def _node(text: str, attrs: str = "", extra: str = "") -> str:
    return f"<Node{attrs}><Id>hostile{text}</Id>{extra}</Node>"


def _job(text: str, attrs: str = "", extra: str = "") -> str:
    return f"<Job{attrs}><Id>hostile{text}</Id>{extra}</Job>"


def _ccs(text: str, attrs: str = "", extra: str = "") -> str:
    return f'<Job xmlns="{CCS_NS}"{attrs} Name="hostile{text}">{extra}</Job>'


Shape = Callable[..., str]


@dataclass(frozen=True)
class EntryPoint:
    """A function that reads XML, and the document it accepts: the root element around the attack."""

    read: Callable[[bytes], object]
    root: str
    shape: Shape
    covers: tuple[str, str] | None  # the (file, function) that calls safexml.parse


ENTRY_POINTS: dict[str, EntryPoint] = {
    "safexml.parse": EntryPoint(safexml.parse, "Node", _node, None),
    "parse_node": EntryPoint(parse_node, "Node", _node, ("infosvc/codec/node_xml.py", "parse_node")),
    "parse_job": EntryPoint(parse_job, "Job", _job, ("infosvc/codec/job_xml.py", "parse_job")),
    "parse_ccs_job": EntryPoint(parse_ccs_job, "Job", _ccs, ("infosvc/codec/ccsjob_xml.py", "parse_ccs_job")),
    "submission-sss": EntryPoint(lambda body: parse_submission(body, "application/xml"), "Job", _job,
                                 ("infosvc/codec/submission.py", "_parse_xml")),
    "submission-ccs": EntryPoint(lambda body: parse_submission(body, "text/xml"), "Job", _ccs,
                                 ("infosvc/codec/submission.py", "_parse_xml")),
    "submission-untyped": EntryPoint(lambda body: parse_submission(body, ""), "Job", _job,
                                     ("infosvc/codec/submission.py", "_parse_xml")),
}

def hostile(traps: Traps, attack: str, encoding: str, root: str, shape: Shape) -> bytes:
    prolog, reference = ATTACKS[attack]
    write, _ = ENCODINGS[encoding]
    return write(prolog.format(root=root, **traps.urls()) + shape(reference))


def corpus_ids() -> list[tuple[str, str]]:
    return [(attack, encoding) for encoding in ENCODINGS for attack in ATTACKS]


def read_bounded(read: Callable[[bytes], object], document: bytes) -> tuple[bool, object]:
    """(answered within LIMIT, what `read` returned or raised). A reader that hangs is left behind
    in a daemon thread: only the old code does that, and the test then fails."""
    box: list[object] = []

    def run() -> None:
        try:
            box.append(read(document))
        except BaseException as exc:  # noqa: BLE001 - whatever it is, the test reports it
            box.append(exc)

    thread = threading.Thread(target=run, name="hostile-xml-reader", daemon=True)
    thread.start()
    thread.join(LIMIT)
    return (not thread.is_alive(), box[0] if box else None)


def says(text: str, encoding: str) -> bool:
    """Whether a refusal says what ENCODINGS expects of it."""
    return any(word in text for word in ENCODINGS[encoding][1].split("|"))


def leaks(text: str, traps: Traps) -> list[str]:
    """What an answer must never hold: a file's content, an entity's expansion."""
    return [what for what, needle in (("the marker file's content", traps.marker), ("/etc/passwd", "root:x:0:0"),
                                      ("an expanded entity", "expanded-entity"), ("billion laughs", "lollol"))
            if needle in text]


# --- every function that reads XML -----------------------------------------------------------

@pytest.mark.parametrize(("attack", "encoding"), corpus_ids(), ids=[f"{a}/{e}" for a, e in corpus_ids()])
def test_every_reader_refuses_the_attack_in_every_encoding(traps: Traps, attack: str, encoding: str) -> None:
    failures = []
    for name, entry in ENTRY_POINTS.items():
        answered, outcome = read_bounded(entry.read, hostile(traps, attack, encoding, entry.root, entry.shape))
        used = traps.used()
        if not answered:
            failures.append(f"{name}: no answer within {LIMIT} s; {', '.join(used) or 'no trap used'}")
            continue
        if used:
            failures.append(f"{name}: {', '.join(used)}")
        if not isinstance(outcome, DocumentError):
            failures.append(f"{name}: expected a DocumentError, got {outcome!r}")
            continue
        if found := leaks(str(outcome.problems), traps):
            failures.append(f"{name}: the refusal holds {found}: {outcome}")
        if not says(str(outcome), encoding):
            failures.append(f"{name}: the refusal does not say {ENCODINGS[encoding][1]!r}: {outcome}")
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("encoding", list(ENCODINGS))
def test_no_reader_tells_whether_a_file_exists(traps: Traps, encoding: str) -> None:
    failures = []
    for name, entry in ENTRY_POINTS.items():
        for present, absent in ORACLE_PAIRS:
            answers = []
            for attack in (present, absent):
                answered, outcome = read_bounded(entry.read, hostile(traps, attack, encoding, entry.root, entry.shape))
                traps.used()
                answers.append(repr(outcome.problems) if isinstance(outcome, DocumentError)
                               else f"answered={answered} {outcome!r}")
            if answers[0] != answers[1]:
                failures.append(f"{name}, {present} / {absent}:\n  {answers[0]}\n  {answers[1]}")
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("encoding", ACCEPTED)
@pytest.mark.parametrize("name", list(ENTRY_POINTS))
def test_every_reader_reads_the_plain_document(name: str, encoding: str) -> None:
    """Without the attack the document is read: the refusals above are the attack's doing."""
    entry = ENTRY_POINTS[name]
    answered, outcome = read_bounded(entry.read, ENCODINGS[encoding][0](entry.shape("")))
    assert answered and not isinstance(outcome, BaseException), outcome


@pytest.mark.parametrize("name", list(ENTRY_POINTS))
def test_schema_locations_and_xincludes_are_never_followed(traps: Traps, name: str) -> None:
    """Not a DTD, but the same family: locations a validator or an XInclude processor would load.
    Whatever the answer, nothing is read and nothing is connected to."""
    entry = ENTRY_POINTS[name]
    xsi = ' xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"'
    xi = ' xmlns:xi="http://www.w3.org/2001/XInclude"'
    failures = []
    for url in traps.urls().values():
        for attrs, extra in ((f'{xsi} xsi:noNamespaceSchemaLocation="{url}"', ""),
                             (f'{xsi} xsi:schemaLocation="{CCS_NS} {url}"', ""),
                             (f'{xi} awarenessPolicy="Ignore"', f'<xi:include href="{url}" parse="text"/>'),
                             (f'{xi} awarenessPolicy="Ignore"', f'<xi:include href="{url}"/>')):
            document = entry.shape("", attrs, extra).encode()
            answered, outcome = read_bounded(entry.read, document)
            used = traps.used()
            if not answered or used or leaks(repr(outcome), traps):
                failures.append(f"{attrs} {extra}: answered={answered}, {used}, {outcome!r}")
    assert not failures, "\n".join(failures)


def test_the_parser_itself_reads_nothing_even_past_the_scan(traps: Traps) -> None:
    """The second line: safexml's parser, given a DOCTYPE the scan would have refused, resolves no
    entity, loads no DTD, opens no file and no connection (a refusing resolver, and its options)."""
    from lxml import etree

    failures = []
    for attack in ATTACKS:
        document = hostile(traps, attack, "utf-8", "Node", _node)

        def read(body: bytes) -> object:
            return etree.tostring(etree.fromstring(body, safexml._parser()))

        answered, outcome = read_bounded(read, document)
        used = traps.used()
        if not answered or used or leaks(repr(outcome), traps):
            failures.append(f"{attack}: answered={answered}, {used}, {outcome!r}")
    assert not failures, "\n".join(failures)


# --- the encoding policy ---------------------------------------------------------------------

UTF8_FORMS: dict[str, bytes] = {
    "bare": b"<Node><Id>a</Id></Node>",
    "bom": codecs.BOM_UTF8 + b"<Node><Id>a</Id></Node>",
    "declared-as-written": b"<?xml version='1.0' encoding='UTF-8'?>\n<Node><Id>a</Id></Node>",
    "declared-standalone": b'<?xml version="1.0" encoding="utf-8" standalone="yes"?><Node><Id>a</Id></Node>',
    "declared-utf8": b'<?xml version="1.0" encoding="UTF8"?><Node><Id>a</Id></Node>',
    "declared-us-ascii": b'<?xml version="1.0" encoding="US-ASCII"?><Node><Id>a</Id></Node>',
    "declared-ascii": b'<?xml version="1.0" encoding="ascii"?><Node><Id>a</Id></Node>',
    "bom-declared": codecs.BOM_UTF8 + b'<?xml version="1.0" encoding="UTF-8"?><Node><Id>caf\xc3\xa9</Id></Node>',
    "doctype-in-comment-and-pi": (b'<?xml version="1.0"?>\n<!-- no DOCTYPE here: <!DOCTYPE x> -->\n'
                                  b"<?pi <!DOCTYPE?>\n<Node><Id>a</Id></Node>"),
}


@pytest.mark.parametrize("form", list(UTF8_FORMS))
def test_utf8_in_every_form_is_read(form: str) -> None:
    assert parse_node(UTF8_FORMS[form]).id in ("a", "caf\u00e9")


FOREIGN: dict[str, tuple[bytes, tuple[str, ...]]] = {
    "utf-16-le-bom": (codecs.BOM_UTF16_LE + "<Node><Id>a</Id></Node>".encode("utf-16-le"),
                      ("UTF-16LE", "byte order mark", "UTF-8")),
    "utf-16-be": ("<Node><Id>a</Id></Node>".encode("utf-16-be"), ("UTF-16BE", "UTF-8")),
    "utf-32-le-bom": (codecs.BOM_UTF32_LE + "<Node><Id>a</Id></Node>".encode("utf-32-le"),
                      ("UTF-32LE", "byte order mark", "UTF-8")),
    "utf-16-le-space-first": (" <Node><Id>a</Id></Node>".encode("utf-16-le"),
                              ("UTF-16 or UTF-32", "byte 2 is zero", "UTF-8")),
    "nul-inside": (b"<Node><Id>a\x00</Id></Node>", ("not well-formed",)),
    "iso-8859-1": (b'<?xml version="1.0" encoding="ISO-8859-1"?><Node><Id>caf\xe9</Id></Node>',
                   ("'ISO-8859-1'", "UTF-8")),
    "utf-16-declared-on-utf-8": (b"<?xml version='1.0' encoding='UTF-16'?><Node><Id>a</Id></Node>",
                                 ("'UTF-16'", "UTF-8")),
    "ebcdic": ('<?xml version="1.0" encoding="IBM037"?><Node/>'.encode("cp037"), ("EBCDIC", "UTF-8")),
}


@pytest.mark.parametrize("case", list(FOREIGN))
def test_a_foreign_encoding_is_named_with_what_is_accepted(case: str) -> None:
    document, words = FOREIGN[case]
    with pytest.raises(DocumentError) as refused:
        parse_node(document)
    assert all(word in str(refused.value) for word in words), str(refused.value)


def test_the_doctype_line_is_given() -> None:
    with pytest.raises(DocumentError) as refused:
        parse_node(codecs.BOM_UTF8 + b'<?xml version="1.0"?>\n<!-- c -->\n<!DOCTYPE Node>\n<Node><Id>a</Id></Node>')
    assert "DOCTYPE" in str(refused.value) and refused.value.line == 3


# --- every route that takes XML, on a real server -------------------------------------------

@dataclass(frozen=True)
class Route:
    """A route that takes XML: the role of the token it needs (None: no token) and its document."""

    role: str | None
    root: str
    shape: Shape
    accepted: int  # the status of the plain document


XML_ROUTES: dict[str, Route] = {
    "/v1/match": Route(None, "Job", _job, 200),
    "/v1/nodes": Route("agent", "Node", _node, 200),
    "/v1/jobs": Route("submit", "Job", _job, 201),
}


@pytest.fixture(scope="module")
def shared_site(module_serve: ServerFactory) -> Server:
    return module_serve(agents=4)


@pytest.fixture
def site(shared_site: Server) -> Server:
    """The module's server, answering: one that a failing case left hung is killed and started again,
    so that one failure (the old code) does not turn every later case into a time-out."""
    try:
        healthy = shared_site.get("/healthz", timeout=2.0).status == 200
    except (OSError, http.client.HTTPException):
        healthy = False
    if not healthy:
        shared_site.kill()
        shared_site.start()
    return shared_site


def token_for(server: Server, route: Route, agent: str = "agent0") -> str | None:
    if route.role is None:
        return None
    return server.tokens[agent if route.role == "agent" else route.role]


def post(server: Server, path: str, body: bytes, token: str | None, timeout: float = LIMIT) -> Reply | str:
    """The reply, or why there is none."""
    try:
        return server.request("POST", path, body, token=token, headers={"Content-Type": "application/xml"},
                              timeout=timeout)
    except (OSError, http.client.HTTPException) as exc:
        return f"no answer within {timeout} s ({exc!r})"


def route_ids() -> list[tuple[str, str]]:
    return [(path, encoding) for path in XML_ROUTES for encoding in ENCODINGS]


@pytest.mark.parametrize(("path", "encoding"), route_ids(), ids=[f"{p}/{e}" for p, e in route_ids()])
def test_every_route_refuses_every_attack(site: Server, traps: Traps, path: str, encoding: str) -> None:
    route = XML_ROUTES[path]
    token = token_for(site, route)
    rows = site.row_counts()
    failures = []
    bodies: dict[str, bytes] = {}
    for attack in ATTACKS:
        reply = post(site, path, hostile(traps, attack, encoding, route.root, route.shape), token)
        used = traps.used()
        if isinstance(reply, str):
            failures.append(f"{attack}: {reply}; {', '.join(used) or 'no trap used'}")
            break  # the server is hung: the next case starts another
        bodies[attack] = reply.body
        if used:
            failures.append(f"{attack}: {', '.join(used)}")
        if not reply.is_error(400):
            failures.append(f"{attack}: expected a 400 with a JSON error, got {reply.status} {reply.body[:300]!r}")
        elif found := leaks(reply.body.decode("utf-8", "replace"), traps):
            failures.append(f"{attack}: the answer holds {found}")
        elif not says(json.dumps(reply.json(), ensure_ascii=False), encoding):
            failures.append(f"{attack}: the answer does not say {ENCODINGS[encoding][1]!r}: {reply.body[:300]!r}")
    for present, absent in ORACLE_PAIRS:
        if present in bodies and absent in bodies and bodies[present] != bodies[absent]:
            failures.append(f"{present} / {absent} answered differently:\n  {bodies[present]!r}\n  {bodies[absent]!r}")
    assert not failures, "\n".join(failures)
    assert site.row_counts() == rows


@pytest.mark.parametrize("path", list(XML_ROUTES))
def test_every_route_takes_the_plain_document(site: Server, path: str) -> None:
    route = XML_ROUTES[path]
    reply = post(site, path, route.shape("").encode(), token_for(site, route, "agent1"))
    assert isinstance(reply, Reply) and reply.status == route.accepted, reply


@pytest.mark.serial  # latency measured from outside: run alone (make test)
def test_a_flood_of_attacks_leaves_healthz_fast(serve: ServerFactory, traps: Traps) -> None:
    """200 hostile documents from three threads, mixed from the corpus (the UTF-16 /dev/zero one
    included), while another thread times GET /healthz: each is a 400, and /healthz p99 < 50 ms."""
    server = serve(agents=2)
    for path, route in XML_ROUTES.items():  # the first request of a route imports its modules (~50 ms)
        warm = post(server, path, route.shape("").encode(), token_for(server, route, "agent1"))
        assert isinstance(warm, Reply) and warm.status == route.accepted, warm
    cases = [(path, attack, encoding) for path in XML_ROUTES for attack in ATTACKS for encoding in ENCODINGS]
    flood = random.Random(10).sample(cases, 199) + [("/v1/match", "parameter-entity-dev-zero", "utf-16-le-bom")]
    documents = [(path, hostile(traps, attack, encoding, XML_ROUTES[path].root, XML_ROUTES[path].shape),
                  token_for(server, XML_ROUTES[path])) for path, attack, encoding in flood]
    done, stop = threading.Event(), threading.Event()
    latencies: list[float] = []
    health_failures: list[str] = []
    answers: list[Reply | str] = []

    def poll() -> None:
        while not done.is_set() or len(latencies) < 100:
            started = time.perf_counter()
            try:
                reply = request(server.port, "GET", "/healthz", timeout=2.0)
                if reply.status != 200:
                    health_failures.append(f"/healthz answered {reply.status}")
            except (OSError, http.client.HTTPException) as exc:
                health_failures.append(f"/healthz: {exc!r}")
            latencies.append(time.perf_counter() - started)
            if len(latencies) >= 400 or health_failures or stop.is_set():
                return
            time.sleep(0.002)

    def send(share: list[tuple[str, bytes, str | None]]) -> None:
        for path, body, token in share:
            if stop.is_set():  # the server hangs (the old code): no need to wait for every time-out
                return
            answer = post(server, path, body, token)
            answers.append(answer)
            if not (isinstance(answer, Reply) and answer.is_error(400)):
                stop.set()

    poller = threading.Thread(target=poll, name="healthz-poller")
    senders = [threading.Thread(target=send, args=(documents[i::3],), name=f"flood-{i}") for i in range(3)]
    poller.start()
    for sender in senders:
        sender.start()
    for sender in senders:
        sender.join(60)
    done.set()
    poller.join(30)
    refused = [a for a in answers if isinstance(a, Reply) and a.is_error(400)]
    assert len(refused) == len(documents), [a for a in answers if not (isinstance(a, Reply) and a.is_error(400))][:3]
    assert not health_failures, health_failures
    latencies.sort()
    p99 = latencies[max(0, int(len(latencies) * 0.99) - 1)]
    assert p99 < 0.050, f"/healthz p99 {p99 * 1000:.1f} ms over {len(latencies)} requests"
    assert not traps.used()


# --- guards: a new way in is tested with the same corpus ------------------------------------

#: Callers of safexml.parse that take no outside input, and why.
TRUSTED_READERS = {
    ("infosvc/codec/xmltext.py", "indented"): "re-reads infosvc's own writers' output (a rendering, an answer), to indent it",
}

SOURCES = sorted(p for d in ("infosvc", "agents") for p in (ROOT / d).rglob("*.py"))
#: lxml's ways to parse or to load: only safexml may call them.
LXML_LOADERS = frozenset({
    "fromstring", "fromstringlist", "XML", "XMLID", "XMLDTDID", "parse", "parseid", "iterparse", "XMLParser",
    "XMLPullParser", "ETCompatXMLParser", "HTMLParser", "HTMLPullParser", "HTML", "XMLSchema", "DTD", "RelaxNG",
    "Schematron", "XSLT", "XInclude",
})
#: Other XML parsers: none may be imported at all.
OTHER_XML = ("xml.etree", "xml.dom", "xml.sax", "xml.parsers", "lxml.html", "lxml.objectify", "lxml.isoschematron",
             "defusedxml", "xmltodict")


def _relative(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def _functions(tree: ast.AST) -> Iterator[tuple[str, ast.AST]]:
    """(name of the enclosing top-level function or class, node) for every node of the module."""
    assert isinstance(tree, ast.Module)
    for top in tree.body:
        name = top.name if isinstance(top, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) else "<module>"
        for node in ast.walk(top):
            yield name, node


def test_lxml_parses_nowhere_but_safexml() -> None:
    found = []
    for path in SOURCES:
        if _relative(path) == "infosvc/codec/safexml.py":
            continue
        for function, node in _functions(ast.parse(path.read_text(encoding="utf-8"))):
            where = f"{_relative(path)}:{getattr(node, 'lineno', '?')} ({function})"
            if isinstance(node, ast.Import):
                found.extend(f"{where}: import {a.name}" for a in node.names if a.name.startswith(OTHER_XML))
            elif isinstance(node, ast.ImportFrom) and node.module:
                if node.module.startswith(OTHER_XML):
                    found.append(f"{where}: from {node.module} import")
                elif node.module.startswith("lxml"):
                    found.extend(f"{where}: from {node.module} import {a.name}" for a in node.names
                                 if a.name in LXML_LOADERS or a.name in ("html", "objectify", "isoschematron"))
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                owner = node.func.value
                if node.func.attr in LXML_LOADERS and isinstance(owner, ast.Name) and owner.id in ("etree", "lxml"):
                    found.append(f"{where}: etree.{node.func.attr}(...)")
            if isinstance(node, ast.Attribute) and node.attr == "xinclude":
                found.append(f"{where}: .xinclude")
    assert not found, "XML parsed outside infosvc/codec/safexml.py:\n" + "\n".join(found)


def test_every_reader_of_xml_is_in_the_corpus() -> None:
    """Every caller of safexml.parse is run through the corpus by an ENTRY_POINTS entry (or takes
    only infosvc's own output, TRUSTED_READERS)."""
    callers = set()
    for path in SOURCES:
        if _relative(path) == "infosvc/codec/safexml.py":
            continue
        for function, node in _functions(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "parse"
                    and isinstance(node.func.value, ast.Name) and node.func.value.id == "safexml"):
                callers.add((_relative(path), function))
            if isinstance(node, ast.ImportFrom) and node.module == "infosvc.codec.safexml":
                assert all(a.name != "parse" for a in node.names), f"{path}: import safexml and call safexml.parse"
    covered = {entry.covers for entry in ENTRY_POINTS.values() if entry.covers}
    assert callers - set(TRUSTED_READERS) == covered, (
        f"readers not in ENTRY_POINTS: {sorted(callers - covered - set(TRUSTED_READERS))}; "
        f"ENTRY_POINTS naming no reader: {sorted(covered - callers)}")


def test_every_xml_route_is_in_the_corpus() -> None:
    """The routes that take XML, as schemas/openapi.json describes them (tests/web/test_openapi.py keeps
    it equal to the app's route table), are the routes of XML_ROUTES."""
    document: dict[str, Any] = json.loads((ROOT / "schemas" / "openapi.json").read_text(encoding="utf-8"))
    xml_routes = {path for path, operations in document["paths"].items() for operation in operations.values()
                  if isinstance(operation, dict)
                  and any(media.endswith("xml") for media in operation.get("requestBody", {}).get("content", {}))}
    assert xml_routes == set(XML_ROUTES)
