"""GET /v1/glue in a grid format (LDIF, GLUE 2.0 XML and JSON) on the real app on loopback: a
document is rendered once for the tree it reads and then reused, whoever asks, until that tree
changes (a change is in the next read, whatever the time); readers of the same document at once
wait for one rendering; renderings are one at a time, with a few waiting, and the rest are told to
come back (503, Retry-After); the documents kept are bounded in number, whatever `site=` a reader
names. Before, every read rendered the whole tree anew in a worker thread of its own: eight
readers of a 17.6 MB LDIF at once held /healthz 0.9-1.2 s.

Renderings are counted, and slowed, by wrapping the grid formats' documents (GRID_FORMATS)."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Iterator

import pytest

from infosvc.codec.glue_xml import Fragment
from infosvc.model.glue import GlueTree
from infosvc.publish.glue import GRID_FORMATS, Documents
from support.overlap import Overlap
from support.server import InProcessServer, Reply, ServerFactory, wait_for

SITE = """
[service]
information_service_url = "https://infosvc.example.org:8443"

[[clusters]]
id = "compute"
nodes = "cn[01-09]"

[[computing_elements]]
id = "ce.example.org:8443/infosvc-long"
queue = "long"
clusters = ["compute"]
access_control = ["VO:atlas"]
"""
#: a job no host of the site can run yet (each has 4 processors): it waits in the CE's queue
JOB = """<Job><Id>w</Id><Name>w</Name><Executable>/bin/true</Executable>
<Requested><Processors>12</Processors></Requested></Job>"""


class Counted(Overlap):
    """Each grid format's documents wrapped: how many trees were rendered, how many at once at most."""

    def __init__(self) -> None:
        super().__init__(delay=0.0)

    @property
    def renders(self) -> int:
        return self.calls

    def wrap(self, make: Callable[[Any], Documents]) -> Callable[[Any], Documents]:
        counted = self

        class Wrapped:
            def __init__(self, options: Any) -> None:
                self._documents = make(options)

            def __getattr__(self, name: str) -> Any:
                return getattr(self._documents, name)

            def tree(self, tree: GlueTree, fragment: Fragment) -> bytes:
                with counted.timed():
                    return self._documents.tree(tree, fragment)

            def tree_parts(self, tree: GlueTree, fragment: Fragment) -> list[bytes]:
                with counted.timed():
                    return self._documents.tree_parts(tree, fragment)

        return Wrapped  # type: ignore[return-value]


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> Counted:
    found = Counted()
    for name, make in list(GRID_FORMATS.items()):
        monkeypatch.setitem(GRID_FORMATS, name, found.wrap(make))
    return found


@pytest.fixture
def site(serve_app: ServerFactory) -> Iterator[InProcessServer]:
    server = serve_app(agents=12, start=False)
    server.config_file.write_text(SITE)
    server.start()
    for host in ("cn01", "cn02", "cn03"):
        server.report(host, server.agent_token(), memory_mb=4096)
    assert isinstance(server, InProcessServer)
    settled(server)
    yield server


def settled(server: InProcessServer) -> None:
    """Once the job queue has counted the last change into the CE's figures (a pass of its own,
    after the change): what a reader reads is then the same from one read to the next."""
    def figures() -> Any:
        return server.get("/v1/glue").json()["computing_elements"]

    wait_for(lambda: figures() == (time.sleep(0.3) or figures()), timeout=10, message="the CE's figures settled")


def at_once(server: InProcessServer, paths: list[str]) -> list[Reply]:
    with ThreadPoolExecutor(len(paths)) as pool:
        return list(pool.map(lambda path: server.get(path, timeout=60), paths))


def test_readers_of_one_document_at_once_wait_for_one_rendering(site: InProcessServer, counted: Counted) -> None:
    counted.delay = 0.5  # every reader arrives while the first rendering is under way
    replies = at_once(site, ["/v1/glue?format=ldif&site=EXAMPLE-SITE"] * 8)
    assert [r.status for r in replies] == [200] * 8
    assert len({r.body for r in replies}) == 1 and b"GlueSiteUniqueID=EXAMPLE-SITE" in replies[0].body
    assert counted.renders == 1, f"{counted.renders} renderings for 8 readers of one document"


def test_a_document_is_reused_until_what_it_reads_changes(site: InProcessServer, counted: Counted) -> None:
    path = "/v1/glue?format=ldif&schema=1.3"
    first = site.get(path)
    assert first.status == 200 and counted.renders == 1
    again = site.get(path)
    assert again.body == first.body and counted.renders == 1, "an unchanged tree was rendered again"
    # another document of the same tree is a rendering of its own, kept too
    xml = site.get("/v1/glue?format=glue2-xml")
    assert xml.status == 200 and counted.renders == 2
    assert site.get("/v1/glue?format=glue2-xml").body == xml.body and counted.renders == 2
    # only the CE's figures change (a job waits in its queue): a new snapshot, in the next read
    reply = site.request("POST", "/v1/jobs", JOB.encode(), token=site.tokens["submit"],
                         headers={"Content-Type": "application/xml"})
    assert reply.status == 201, reply.body
    wait_for(lambda: site.get("/v1/glue").json()["computing_elements"][0]["state"]["waiting_jobs"] == 1,
             timeout=20, message="the job counted in the CE's figures (the queue's next pass)")
    settled(site)
    waiting = site.get(path)
    assert counted.renders == 3 and b"GlueCEStateWaitingJobs: 1" in waiting.body, "the change is not in the next read"
    assert site.get(path).body == waiting.body and counted.renders == 3
    # a host that reports more processors: its subcluster and the CE change
    site.report("cn01", site.tokens["agent0"], memory_mb=4096, processors=32)
    settled(site)
    changed = site.get(path)
    assert counted.renders == 4 and b"GlueCEInfoTotalCPUs: 40" in changed.body, "the change is not in the next read"
    assert site.get(path).body == changed.body and counted.renders == 4


def test_a_reader_after_a_change_waits_for_no_rendering_of_the_tree_before_it(site: InProcessServer,
                                                                              counted: Counted) -> None:
    path = "/v1/glue?format=ldif&schema=1.3"
    counted.delay = 1.0
    with ThreadPoolExecutor(1) as pool:
        before = pool.submit(site.get, path, timeout=60)
        wait_for(lambda: counted.running, timeout=10, message="the first rendering under way")
        site.report("cn03", site.tokens["agent2"], memory_mb=4096, processors=16)
        after = site.get(path, timeout=60)
        assert before.result().status == after.status == 200
    assert b"GlueCEInfoTotalCPUs: 12" in before.result().body
    assert b"GlueCEInfoTotalCPUs: 24" in after.body, "a read after the change was answered the tree before it"
    assert counted.renders == 2 and counted.most == 1


def test_renderings_are_one_at_a_time_and_the_queue_is_bounded(site: InProcessServer, counted: Counted) -> None:
    counted.delay = 0.4
    replies = at_once(site, [f"/v1/glue?format=glue2-json&site=S{n:02d}" for n in range(16)])
    statuses = [r.status for r in replies]
    assert counted.most == 1, f"{counted.most} renderings at once"
    assert set(statuses) == {200, 503} and statuses.count(200) == counted.renders <= 8, statuses
    busy = next(r for r in replies if r.status == 503)
    assert busy.headers["retry-after"] and busy.json()["error"]
    for reply, n in zip(replies, range(16)):  # each answered reader got its own site's document
        assert reply.status != 200 or f'"S{n:02d}"'.encode() in reply.body


def test_a_host_filter_takes_its_turn_too(site: InProcessServer, counted: Counted) -> None:
    """A filter that chooses every host is the whole tree again, rendered for its reader alone."""
    counted.delay = 0.4
    replies = at_once(site, [f"/v1/glue?format=glue2-json&state=Ready&site=S{n:02d}" for n in range(16)])
    statuses = [r.status for r in replies]
    assert counted.most == 1, f"{counted.most} renderings at once"
    assert set(statuses) == {200, 503} and statuses.count(200) == counted.renders, statuses


def test_the_documents_kept_are_bounded_whatever_site_is_named(site: InProcessServer, counted: Counted) -> None:
    sites = [f"S{n:03d}" for n in range(60)]  # more than are kept
    for name in sites:
        assert site.get(f"/v1/glue?format=glue2-xml&site={name}").status == 200
    assert counted.renders == len(sites)
    assert site.get(f"/v1/glue?format=glue2-xml&site={sites[-1]}").status == 200
    assert counted.renders == len(sites), "the last document read was not kept"
    assert site.get(f"/v1/glue?format=glue2-xml&site={sites[0]}").status == 200
    assert counted.renders == len(sites) + 1, "the first of many was still kept"
    from infosvc.web.gridquery import GridAnswers
    from infosvc.web.keys import GRID_ANSWERS

    assert GridAnswers.ENTRIES < len(sites) and 0 < site._runner.app[GRID_ANSWERS].kept <= GridAnswers.ENTRIES


def test_a_reader_of_a_kept_document_is_answered_it_while_others_fill_the_queue(site: InProcessServer,
                                                                                counted: Counted) -> None:
    # a review: one anonymous client naming a new site= (or a host filter) in each request kept the
    # queue full, and every read of the BDII's document was refused, its figures changing each
    # second (a job's estimated start) so that none was answered from what was kept
    bdii = "/v1/glue?format=ldif&site=EXAMPLE-SITE"
    first = site.get(bdii)
    assert first.status == 200 and site.get(bdii).body == first.body  # read twice: the BDII's own
    counted.delay = 0.5
    with ThreadPoolExecutor(12) as pool:
        flood = [pool.submit(site.get, f"/v1/glue?format=glue2-json&site=X{n:02d}", timeout=60) for n in range(6)]
        flood += [pool.submit(site.get, f"/v1/glue?format=glue2-json&state=Ready&site=Y{n:02d}", timeout=60)
                  for n in range(6)]
        wait_for(lambda: counted.running, timeout=10, message="the flood's renderings under way")
        site.report("cn02", site.tokens["agent1"], memory_mb=4096, processors=16)  # the tree changes
        reply = site.get(bdii, timeout=60)
        statuses = [f.result().status for f in flood]
    assert 503 in statuses, statuses  # the flood did fill the queue
    assert reply.status == 200, reply.body[:200]
    assert reply.body.startswith(b"dn: ") or b"GlueSiteUniqueID=EXAMPLE-SITE" in reply.body
    # the new sites, each read once, did not push the BDII's document out
    counted.delay = 0.0
    for n in range(40):
        assert site.get(f"/v1/glue?format=glue2-xml&site=Z{n:02d}").status == 200
    from infosvc.codec.gridformat import GridOptions
    from infosvc.web.keys import GRID_ANSWERS

    assert ("ldif", GridOptions(site="EXAMPLE-SITE"), "", "") in site._runner.app[GRID_ANSWERS].kept_keys


def test_a_reader_with_a_token_is_rendered_its_first_document_while_anonymous_readers_fill_the_queue(
        site: InProcessServer, counted: Counted) -> None:
    # a review: nothing kept for a document (the first read after a start), one anonymous client
    # naming a new site= in each request kept every renderings' place taken, and the site BDII's
    # provider, reading with its token, was refused (503) at every read while the flood lasted
    counted.delay = 0.5
    token, bdii_path = site.tokens["admin"], "/v1/glue?format=ldif&site=EXAMPLE-SITE"
    flood = [f"/v1/glue?format=glue2-json&site=X{n:02d}" for n in range(8)]
    flood += [f"/v1/glue?format=glue2-json&state=Ready&site=Y{n:02d}" for n in range(8)]
    statuses, (anonymous, agent, bdii, filtered) = counted.during_flood(site.get, flood, lambda: (
        site.get(bdii_path, timeout=60), site.get(bdii_path, token=site.tokens["agent0"], timeout=60),
        site.get(bdii_path, token=token, timeout=60),
        site.get("/v1/glue?format=glue2-json&state=Ready", token=token, timeout=60)))
    assert 503 in statuses, statuses  # the flood did fill the queue
    assert anonymous.status == 503, anonymous.status  # an anonymous reader is still refused past it
    # an agent's token (on every host) is no reader's: it takes the anonymous places, not the BDII's
    assert agent.status == 503, agent.status
    assert bdii.status == 200, bdii.body[:200]
    assert b"GlueSiteUniqueID=EXAMPLE-SITE" in bdii.body
    assert filtered.status == 200, filtered.body[:200]
    # one at a time still, whoever asks (a whole document's and a filtered read's turns are apart)
    assert counted.most <= 2, f"{counted.most} renderings at once"


def test_readers_with_tokens_have_a_bounded_queue_of_their_own(site: InProcessServer, counted: Counted) -> None:
    counted.delay = 0.4
    token = site.tokens["admin"]
    with ThreadPoolExecutor(16) as pool:
        replies = list(pool.map(lambda n: site.get(f"/v1/glue?format=glue2-json&site=T{n:02d}", token=token,
                                                   timeout=60), range(16)))
    statuses = [r.status for r in replies]
    assert set(statuses) == {200, 503} and statuses.count(200) == counted.renders <= 8, statuses
