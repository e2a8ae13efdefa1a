"""GET /v1/prometheus/targets: Prometheus HTTP service discovery over a real server.

The answer is what Prometheus's http_sd_configs reads: a JSON array of {"targets": [...],
"labels": {...}} with string label values, served as application/json.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from support.server import ServerFactory, wait_for

PATH = "/v1/prometheus/targets"


def assert_http_sd(groups: Any) -> None:
    """The http_sd format, as Prometheus parses it (discovery/http/http.go: []*targetgroup.Group)."""
    assert isinstance(groups, list)
    for group in groups:
        assert set(group) == {"targets", "labels"}
        assert isinstance(group["targets"], list) and group["targets"]
        assert all(isinstance(t, str) and re.fullmatch(r"(\[[0-9a-f:]+\]|[^:\s]+):\d{1,5}", t) for t in group["targets"])
        assert all(isinstance(k, str) and re.fullmatch(r"[a-zA-Z_][a-zA-Z0-9_]*", k) and isinstance(v, str)
                   for k, v in group["labels"].items())


def by_node(groups: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {g["labels"]["node"]: g for g in groups}


def test_live_hosts_are_targets_with_their_place_in_glue(serve_app: ServerFactory) -> None:
    server = serve_app()
    assert server.get(PATH).json() == []
    server.report("node002", server.agent_token())
    server.report("node001", server.agent_token())
    server.report("big01", server.agent_token(), processors=64, memory_mb=262144)
    assert server.admin("node002", "pause").status == 200

    reply = server.get(PATH)
    assert reply.status == 200 and reply.headers["content-type"].startswith("application/json")
    groups = reply.json()
    assert_http_sd(groups)
    assert [g["labels"]["node"] for g in groups] == ["big01", "node001", "node002"]  # sorted by Id

    glue_hosts = {h["unique_id"]: h for h in server.get("/v1/glue").json()["hosts"]}
    for node, group in by_node(groups).items():
        assert group["targets"] == [f"{node}:9100"]  # node_exporter's port by default
        assert group["labels"] == {"node": node, "subcluster": glue_hosts[node]["subcluster"], "cluster": "default",
                                   "__meta_infosvc_state": glue_hosts[node]["state"]}
    assert by_node(groups)["node002"]["labels"]["__meta_infosvc_state"] == "Paused"
    assert by_node(groups)["big01"]["labels"]["subcluster"] != by_node(groups)["node001"]["labels"]["subcluster"]


def test_exporter_port_and_clusters_from_the_config(serve_app: ServerFactory) -> None:
    server = serve_app(start=False)
    server.config_file.write_text('[prometheus]\nexporter_port = 9256\n\n'
                                  '[[clusters]]\nid = "gpu"\nnodes = "gpu[01-04]"\n\n[[clusters]]\nid = "compute"\n')
    server.start()
    server.report("gpu02", server.agent_token())
    server.report("cn7", server.agent_token())
    groups = by_node(server.get(PATH).json())
    assert groups["gpu02"]["targets"] == ["gpu02:9256"] and groups["gpu02"]["labels"]["cluster"] == "gpu"
    assert groups["cn7"]["targets"] == ["cn7:9256"] and groups["cn7"]["labels"]["cluster"] == "compute"


def test_pending_hosts_are_not_targets_until_approved(serve_app: ServerFactory) -> None:
    server = serve_app({"lifecycle": {"require_approval": True}})
    server.report("new01", server.agent_token())
    assert server.state_of("new01") == "Pending"
    assert server.get(PATH).json() == []
    assert server.admin("new01", "approve").status == 200
    (group,) = server.get(PATH).json()
    assert group["targets"] == ["new01:9100"] and group["labels"]["__meta_infosvc_state"] == "Ready"


def test_unreachable_hosts_stay_targets(serve_app: ServerFactory) -> None:
    """Prometheus marks them down (up == 0) itself; dropping them would hide that from alerts."""
    server = serve_app({"lifecycle": {"heartbeat_seconds": 0.2, "missed_heartbeats": 1}})
    server.report("gone01", server.agent_token())
    wait_for(lambda: server.state_of("gone01") == "Unreachable", message="gone01 Unreachable")
    (group,) = server.get(PATH).json()
    assert group["targets"] == ["gone01:9100"]
    assert group["labels"]["__meta_infosvc_state"] == "Unreachable"


def test_reads_need_a_token_when_the_config_says_so(serve_app: ServerFactory) -> None:
    server = serve_app({"service": {"read_token_required": True}})
    assert server.get(PATH).is_error(401)
    reply = server.get(PATH, token=server.tokens["admin"])
    assert reply.status == 200 and reply.json() == []


def test_ipv6_literal_ids_are_bracketed() -> None:
    from infosvc.publish.targets import address

    assert address("node001", 9100) == "node001:9100"
    assert address("fd00::17", 9100) == "[fd00::17]:9100"


# --- which addresses may be targets: a host's Id is chosen by whoever holds an agent token --------

#: Ids that name, to Prometheus, the scraper's own host, its link, or a cloud's metadata service:
#: each in the spelling the grammar of Ids lets through (inet_aton's forms included).
BLOCKED_IDS = {
    "169.254.169.254": "metadata (AWS, GCP, Azure, OpenStack)", "169.254.170.2": "link-local (ECS metadata)",
    "2852039166": "169.254.169.254 as one number", "0xa9fea9fe": "169.254.169.254 in hex",
    "0251.0376.0251.0376": "169.254.169.254 in octal", "169.254.43518": "169.254.169.254 as a.b.c",
    "100.100.100.200": "metadata (Alibaba)",
    "127.0.0.1": "loopback", "127.1": "loopback as a.b", "127.3.4.5": "loopback",
    "0.0.0.0": "unspecified", "0": "unspecified as one number", "0.1.2.3": "this network",
    "224.0.0.1": "multicast", "239.1.2.3": "multicast", "255.255.255.255": "broadcast",
    "localhost": "the loopback's name", "db.localhost": "the localhost zone (RFC 6761)",
    "metadata.google.internal": "GCP's metadata name", "metadata": "GCP's short name",
    "instance-data": "AWS's metadata name", "instance-data.ec2.internal": "AWS's metadata name",
    # a review: loopback's names in the stock /etc/hosts of RHEL and Debian, and public names whose
    # every subdomain resolves to an address it spells (nip.io) or to loopback (localtest.me)
    "localhost4": "RHEL's /etc/hosts", "localhost6": "RHEL's /etc/hosts",
    "localhost4.localdomain4": "RHEL's /etc/hosts", "localhost6.localdomain6": "RHEL's /etc/hosts",
    "ip6-localnet": "Debian's /etc/hosts", "localtest.me": "resolves to loopback",
    "x.localtest.me": "resolves to loopback", "127.0.0.1.nip.io": "resolves to the address it spells",
    "169-254-169-254.sslip.io": "resolves to the address it spells", "lvh.me": "resolves to loopback",
}
PUBLISHED_IDS = ("node001", "10.1.2.3", "192.0.2.7", "172.16.0.9", "100.64.0.1", "8.8.8.8")


def report_all(server: Any, ids: Any) -> None:
    for ident in ids:
        server.report(ident, server.agent_token())


def target_nodes(server: Any) -> list[str]:
    groups = server.get(PATH).json()
    assert_http_sd(groups)
    return [g["labels"]["node"] for g in groups]


def test_loopback_link_local_metadata_and_the_rest_are_never_default_targets(serve_app: ServerFactory) -> None:
    server = serve_app(agents=len(BLOCKED_IDS) + len(PUBLISHED_IDS))
    report_all(server, [*BLOCKED_IDS, *PUBLISHED_IDS])
    assert set(server.node_ids()) == {*BLOCKED_IDS, *PUBLISHED_IDS}  # the hosts are there: only not targets
    assert target_nodes(server) == sorted(PUBLISHED_IDS)


def test_a_configured_list_allows_only_its_networks(serve_app: ServerFactory) -> None:
    server = serve_app(start=False, agents=8)
    server.config_file.write_text('[prometheus]\ntarget_networks = ["10.0.0.0/8", "192.0.2.0/24", "0.0.0.0/0"]\n'
                                  'target_names = false\n')
    server.start()
    report_all(server, ["10.1.2.3", "192.0.2.7", "198.51.100.1", "node001", "169.254.169.254", "127.0.0.1",
                        "2852039166", "localhost"])
    # 0.0.0.0/0 is every ordinary address, not the families a list must name themselves
    assert target_nodes(server) == ["10.1.2.3", "192.0.2.7", "198.51.100.1"]


def test_a_list_that_names_a_blocked_family_itself_allows_it(serve_app: ServerFactory) -> None:
    server = serve_app(start=False, agents=4)
    server.config_file.write_text('[prometheus]\ntarget_networks = ["127.0.0.0/8", "10.0.0.0/24"]\n')
    server.start()
    report_all(server, ["127.0.0.2", "10.0.0.5", "10.0.1.5", "node001"])
    assert target_nodes(server) == ["10.0.0.5", "127.0.0.2", "node001"]  # names: allowed by default


def test_names_can_be_refused(serve_app: ServerFactory) -> None:
    server = serve_app({"prometheus": {"target_names": False}}, agents=2)
    report_all(server, ["node001", "10.1.2.3"])
    assert target_nodes(server) == ["10.1.2.3"]


@pytest.mark.parametrize("ident", [
    "169.254.169.254", "fe80::1", "fe80::1%eth0", "febf::1", "::1", "::", "ff02::1", "fd00:ec2::254",
    "::ffff:169.254.169.254", "::ffff:127.0.0.1", "64:ff9b::a9fe:a9fe", "::169.254.169.254",
    "2852039166", "localhost", "LOCALHOST.", "x.localhost", "metadata.google.internal."])
def test_every_blocked_family_by_default(ident: str) -> None:
    """IPv6 Ids cannot be reported (':' is outside the grammar of Ids), but the policy refuses them
    all the same: it is the policy, not the grammar, that keeps them out."""
    from infosvc.publish.targets import target_policy

    assert not target_policy((), True).allows(ident)


@pytest.mark.parametrize("ident", ["node001", "10.1.2.3", "2001:db8::7", "fd00:ec2::253", "::ffff:10.1.2.3",
                                   "169.253.1.1", "169.255.0.1", "126.255.255.255", "128.0.0.1"])
def test_ordinary_addresses_by_default(ident: str) -> None:
    from infosvc.publish.targets import target_policy

    assert target_policy((), True).allows(ident)


def test_configured_networks_of_both_families() -> None:
    from infosvc.publish.targets import target_policy

    policy = target_policy(("2001:db8::/32", "10.0.0.0/8", "fe80::/64"), False)
    assert [policy.allows(i) for i in ("2001:db8::7", "2001:db9::7", "10.9.9.9", "11.0.0.1", "fe80::5",
                                       "fe80:0:0:1::5", "::ffff:10.1.1.1", "node001")] == [
        True, False, True, False, True, False, True, False]


@pytest.mark.parametrize("networks, said", [
    (["10.0.0.1/8"], "10.0.0.1/8"), (["nonsense"], "nonsense"), (["10.0.0.0/33"], "10.0.0.0/33"),
    (["10.0.0.0/8", "10.0.0.0/8"], "twice"), ([""], "''")])
def test_bad_networks_are_config_errors_that_name_the_key(networks: list[str], said: str) -> None:
    from infosvc.config.site import parse_config
    from infosvc.config.table import ConfigError

    with pytest.raises(ConfigError) as raised:
        parse_config({"prometheus": {"target_networks": networks}})
    assert str(raised.value).startswith("prometheus.target_networks: ") and said in str(raised.value)


def test_the_answer_made_a_slice_at_a_time_is_the_whole(serve_app: ServerFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    # made in slices of hosts, the event loop's turn between two (a scrape of 10,000 hosts held it
    # ~0.1 s in one piece): no host lost or repeated at a slice's edge, in order of Id
    from infosvc.web import prometheus

    server = serve_app()
    for name in ("c1", "a1", "b2", "b1", "a2", "d1", "c2"):
        server.report(name, server.agent_token())
    whole = server.get(PATH).json()
    assert [g["labels"]["node"] for g in whole] == ["a1", "a2", "b1", "b2", "c1", "c2", "d1"]
    for size in (1, 2, 3, 7, 8):
        monkeypatch.setattr(prometheus, "TARGETS_SLICE", size)
        assert server.get(PATH).json() == whole, size
