"""The web page at / (docs/web-page.md). Its files: served from a fixed table only, with a strict
Content-Security-Policy, shipped in the package, nothing loaded from elsewhere. The page itself in
a real headless browser (Debian's chromium over the DevTools protocol, tests/support/browser.py)
against the real server: it loads without an error, shows a posted host, follows a state change
without a reload, shows a host's facts and history, asks for a read token when the server wants
one, says inline that the server is away, and fits a phone's width."""

from __future__ import annotations

import json
import re
from importlib import resources
from typing import Iterator

import pytest

from support import ROOT
from support.browser import Browser, chromium_or_skip
from support.server import Server, ServerFactory
from infosvc.web.page import FILES

STATIC = ROOT / "infosvc" / "web" / "static"
TILE = "document.querySelector('.tile[data-host=\"{}\"]')"


# --- the files --------------------------------------------------------------------------------

def test_the_page_and_its_files_are_served_with_their_headers(serve_app: ServerFactory) -> None:
    server = serve_app()
    for path, name in [("/", "index.html"), *((f"/page/{name}", name) for name in FILES)]:
        reply = server.get(path)
        assert reply.status == 200, (path, reply.body)
        assert reply.body == (STATIC / name).read_bytes()
        assert reply.headers["content-type"] == FILES[name]
        csp = reply.headers["content-security-policy"]
        assert "default-src 'none'" in csp and "script-src 'self'" in csp and "unsafe" not in csp
        assert "frame-ancestors 'none'" in csp
        assert reply.headers["x-content-type-options"] == "nosniff"
        assert reply.headers["cache-control"] == "no-cache"
        again = server.get(path, headers={"If-None-Match": reply.headers["etag"]})
        assert again.status == 304 and again.body == b""
    assert server.request("HEAD", "/").status == 200


def test_the_apis_answers_are_never_sniffed_run_or_framed_by_a_browser(serve_app: ServerFactory) -> None:
    # a review: the page's files had these headers, the API's answers (host names and job names an
    # agent or a submitter chose, in JSON and XML) had none
    server = serve_app()
    for path in ("/v1/nodes", "/v1/glue?format=xml", "/healthz", "/metrics", "/v1/nodes/nope", "/openapi.json"):
        reply = server.get(path)
        assert reply.headers["x-content-type-options"] == "nosniff", path
        assert reply.headers["content-security-policy"] == "default-src 'none'; frame-ancestors 'none'", path
    assert "script-src 'self'" in server.get("/").headers["content-security-policy"]  # the page keeps its own


@pytest.mark.parametrize("name", ["nope.js", "page.py", "__init__.py", "static", "..%2Fpage.py",
                                  "%2E%2E%2F%2E%2E%2F%2E%2E%2Fpyproject.toml", "..%5Cpage.py", "index.html%00.js"])
def test_only_the_files_of_the_table_are_served(serve_app: ServerFactory, name: str) -> None:
    server = serve_app()
    assert server.get(f"/page/{name}").is_error(404)


def test_the_page_needs_no_token_and_its_data_keeps_its_own(serve_app: ServerFactory) -> None:
    server = serve_app({"service": {"read_token_required": True}})
    assert server.get("/").status == 200
    assert server.get("/page/page.js").status == 200
    assert server.get("/v1/glue").is_error(401)
    assert server.get("/?refresh=1").is_error(400)  # the page takes no parameters: its state is in the #


def test_every_file_is_in_the_table_the_package_and_the_api_description() -> None:
    assert {path.name for path in STATIC.iterdir()} == set(FILES)
    installed = resources.files("infosvc.web").joinpath("static")
    assert all(installed.joinpath(name).is_file() for name in FILES)
    document = json.loads((ROOT / "schemas" / "openapi.json").read_text())
    parameter = document["paths"]["/page/{name}"]["get"]["parameters"][0]
    assert parameter["schema"]["enum"] == list(FILES)


def test_nothing_inline_and_nothing_from_elsewhere() -> None:
    """The CSP forbids inline script and style; the machine may have no internet: no CDN."""
    html = (STATIC / "index.html").read_text()
    assert not re.search(r"<script(?![^>]*\bsrc=)", html), "an inline script"
    assert "<style" not in html and not re.search(r"\s(style|on[a-z]+)\s*=", html), "inline style or handler"
    referred = set(re.findall(r'(?:src|href)="/page/([^"]+)"', html))
    for path in STATIC.glob("*.js"):
        text = path.read_text()
        referred |= set(re.findall(r'from "\./([^"]+)"', text)) | set(re.findall(r'import\("/page/([^"]+)"\)', text))
        assert ".innerHTML" not in text and "insertAdjacentHTML" not in text and "eval(" not in text, path.name
        assert "setAttribute(\"style\"" not in text, path.name
    assert referred <= set(FILES), referred - set(FILES)
    for path in STATIC.iterdir():
        text = path.read_text()
        # the SVG namespace is a name, never fetched; any other absolute URL would be
        urls = set(re.findall(r"https?://[^\s\"'`)]+", text)) - {"http://www.w3.org/2000/svg"}
        assert not urls, (path.name, urls)


# --- in the browser ----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def chromium(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Browser]:
    browser = Browser(chromium_or_skip(), tmp_path_factory.mktemp("chromium"))
    try:
        yield browser
    finally:
        browser.close()


@pytest.fixture
def browser(chromium: Browser) -> Browser:
    """The module's browser on a blank page at a desktop's size, its error list empty."""
    chromium.navigate("about:blank")
    chromium.call("Emulation.setDeviceMetricsOverride", width=1200, height=900, deviceScaleFactor=1, mobile=False)
    chromium.errors.clear()
    return chromium


def tile(host: str) -> str:
    return TILE.format(host)


def test_the_page_shows_a_posted_host_and_its_change_without_a_reload(serve_app: ServerFactory,
                                                                     browser: Browser) -> None:
    server = serve_app()
    server.report("web01.example.org", server.agent_token(), processors=4, free_processors=1)
    browser.navigate(f"{server.url}/")
    assert browser.wait_for(f"{tile('web01.example.org')}?.dataset.state", message="the host's tile") == "Ready"
    classes = browser.evaluate(f"{tile('web01.example.org')}.className").split()
    assert "state-ready" in classes and "load-8" in classes  # 3 of its 4 CPUs in use
    assert re.fullmatch(r"updated at \d\d:\d\d:\d\d", browser.evaluate("document.getElementById('updated').textContent"))
    assert "web01" in browser.evaluate("document.querySelector('.clusters').textContent")
    browser.evaluate("window.stillTheSamePage = true")

    assert server.admin("web01.example.org", "pause").status == 200
    assert browser.wait_for(f"{tile('web01.example.org')}?.dataset.state === 'Paused' && "
                            f"{tile('web01.example.org')}.className", message="the tile turning Paused")
    assert "state-paused" in browser.evaluate(f"{tile('web01.example.org')}.className").split()
    assert browser.evaluate("window.stillTheSamePage === true"), "the page was reloaded"
    assert browser.errors == []


def test_a_host_view_has_its_facts_and_its_history_plotted(serve_app: ServerFactory, browser: Browser) -> None:
    server = serve_app()
    token = server.agent_token()
    for free in (4, 2, 1):
        server.report("web02.example.org", token, processors=4, free_processors=free, free_memory_mb=2048 * free)
    browser.navigate(f"{server.url}/")
    browser.wait_for(f"!!{tile('web02.example.org')}", message="the host's tile")
    browser.evaluate(f"{tile('web02.example.org')}.click()")
    facts = browser.wait_for("document.querySelector('section.host[data-host=\"web02.example.org\"] dl')?.textContent",
                             message="the host's facts")
    assert "web02.example.org" in facts and "Xeon Gold 6130" in facts
    assert "x86_64 4cpu Xeon Gold 6130" in facts  # its subcluster by its readable name
    lines = browser.wait_for("document.querySelectorAll('section.host svg.plot polyline').length",
                             message="the history's lines")
    assert lines >= 2  # busy CPUs and memory in use, over three reports
    points = browser.evaluate("document.querySelector('section.host svg.plot polyline.s-busy').getAttribute('points')")
    assert len(points.split()) == 3
    assert browser.evaluate("location.hash") == "#/host/web02.example.org"
    browser.evaluate("document.querySelector('.back a').click()")
    browser.wait_for(f"!!{tile('web02.example.org')}", message="back to the overview")
    assert browser.errors == []


def test_the_page_fits_a_phone(serve_app: ServerFactory, browser: Browser) -> None:
    server = serve_app()
    long_name = "a-host-with-a-rather-long-name-to-see-that-it-wraps-or-is-cut." + "x" * 40 + ".example.org"
    for host in ("web03.example.org", long_name):
        server.report(host, server.agent_token(), processors=4, free_processors=2)
    job = b"<Job><Id>big</Id><Name>big</Name><Executable>/bin/true</Executable><Requested><Processors>64</Processors></Requested></Job>"
    assert server.request("POST", "/v1/jobs", job, token=server.tokens["submit"]).status == 201
    browser.call("Emulation.setDeviceMetricsOverride", width=375, height=740, deviceScaleFactor=2, mobile=True)
    browser.navigate(f"{server.url}/")
    browser.wait_for(f"!!{tile('web03.example.org')}", message="the host's tile")
    assert "Queued" in browser.wait_for("document.querySelector('.queue table')?.textContent", message="the queue")
    assert browser.evaluate("window.innerWidth") == 375
    assert browser.evaluate("document.documentElement.scrollWidth") <= 375
    browser.evaluate(f"location.hash = '#/host/{long_name}'")
    browser.wait_for("!!document.querySelector('section.host dl')", message="the host's view")
    browser.wait_for("!!document.querySelector('section.host svg.plot')", message="the host's history")
    assert browser.evaluate("document.documentElement.scrollWidth") <= 375
    assert browser.errors == []


def test_a_read_token_is_asked_for_and_kept_for_the_tab(serve_app: ServerFactory, browser: Browser) -> None:
    server = serve_app({"service": {"read_token_required": True}})
    server.report("web04.example.org", server.agent_token())
    browser.navigate(f"{server.url}/")
    browser.wait_for("!document.getElementById('token-form').hidden", message="the token form")
    assert "read token" in browser.evaluate("document.getElementById('problem').textContent")
    assert browser.evaluate(f"!{tile('web04.example.org')}")
    token = server.tokens["submit"]  # a token of any role reads
    browser.evaluate(f"document.getElementById('token-input').value = {json.dumps(token)};"
                     "document.getElementById('token-form').requestSubmit()")
    browser.wait_for(f"!!{tile('web04.example.org')}", message="the host, read with the token")
    assert browser.evaluate("document.getElementById('token-form').hidden")
    assert browser.evaluate("sessionStorage.getItem('infosvc.read_token')") == token
    # the one error: the first read's 401, before there was a token
    assert browser.errors and all(e.source == "network" and "401" in e.text for e in browser.errors), browser.errors


def test_a_server_gone_away_is_said_on_the_page(serve_app: ServerFactory, browser: Browser) -> None:
    server: Server = serve_app()
    server.report("web05.example.org", server.agent_token())
    browser.navigate(f"{server.url}/")
    browser.wait_for(f"!!{tile('web05.example.org')}", message="the host's tile")
    server.stop()
    problem = browser.wait_for("!document.getElementById('problem').hidden && "
                               "document.getElementById('problem').textContent", message="the error, inline")
    assert "cannot reach the server" in problem and "Showing what was read at" in problem
    assert browser.evaluate(f"!!{tile('web05.example.org')}")  # the last data stays
    server.start()
    browser.wait_for("document.getElementById('problem').hidden", message="the error gone once it answers")
