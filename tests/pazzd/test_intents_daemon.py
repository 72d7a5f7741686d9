"""Intent checks in a running pazzd: FlowMods through the API open and resolve findings,
each witness checked against the reference data plane (cpc.refdp), and a restart resolves
what the rules no longer break."""

from __future__ import annotations

import json

import pytest

from cpc.fields import parse_header
from cpc.ofctl import format_header, parse_flow, read_rules
from cpc.refdp import RefDataPlane
from cpc.rules import FlowEntry
from cpc.topology import load_topology
from pazzlab.demo import metrics_of as scrape
from pazzlab.flowhash import select_bucket

from .helpers import Pazzd, base_config, pazzctl, wait_for, write_config

POLICIES = [
    {
        "name": "reach-h4",
        "check": "reach",
        "from": "s1:5",
        "to": "s4:5",
        "match": "ip,nw_dst=10.0.3.0/24",
    },
    {
        "name": "reply-h1",
        "check": "reply",
        "from": "s1:5",
        "to": "s4:5",
        "match": "tcp,nw_src=10.0.0.0/24,nw_dst=10.0.3.0/24",
    },
]
# s1 east to s2, south to s4, west to s3, north to s1 again (grid ports: 1 N, 2 E, 3 S, 4 W).
LOOP = [
    (sw, f"priority=60000,ip,nw_dst=10.9.0.0/16,actions=output:{port}")
    for sw, port in (("s1", 2), ("s2", 3), ("s4", 4), ("s3", 1))
]
ROUTE = "priority=24,ip,nw_dst=10.0.3.0/24"
DROP_REPLY = "priority=2000,tcp,nw_src=10.0.3.0/24,nw_dst=10.0.0.0/24,actions=drop"


def open_findings(d) -> dict[str, dict]:
    return {f["name"]: f for f in d.call("findings", kind="intent", state="open")}


class Network:
    """The rules pazzd holds, mirrored for the reference data plane."""

    def __init__(self, cfg: dict) -> None:
        self.topo = load_topology(cfg["topology"])
        items = list(read_rules(cfg["rules"]))
        self.entries = [e for e in items if isinstance(e, FlowEntry)]
        self.groups = [g for g in items if not isinstance(g, FlowEntry)]

    def add(self, switch: str, flow: str) -> None:
        self.entries.append(parse_flow(flow, self.topo.resolve_switch(switch), "add").entry())

    def delete_strict(self, switch: str, flow: str) -> None:
        fm = parse_flow(flow, self.topo.resolve_switch(switch), "delete_strict")
        self.entries = [
            e
            for e in self.entries
            if not (e.dpid == fm.dpid and e.priority == fm.priority and e.match == fm.match)
        ]

    def send(self, port: str, header_text: str):
        ref = RefDataPlane(self.topo, self.entries, self.groups, select=select_bucket)
        return ref.send(self.topo.resolve_port(port), parse_header(header_text))


@pytest.fixture
def pazzd(tmp_path):
    cfg = base_config(tmp_path, intents={"policies": POLICIES})
    path = write_config(tmp_path / "pazzd.yaml", cfg)
    d = Pazzd(path)
    try:
        st = d.wait_ready()
        yield d, cfg, st, path
    finally:
        d.stop()


def test_findings_open_and_resolve_with_witnesses(pazzd):
    d, cfg, st, path = pazzd
    net = Network(cfg)
    assert open_findings(d) == {}, d.log_text()

    # A forwarding loop between s1 and s2 for 10.9.0.0/16.
    for sw, flow in LOOP:
        d.call("flowmod", switch=sw, flow=flow)
        net.add(sw, flow)
    loop = wait_for(lambda: open_findings(d).get("no_loops"))
    assert loop, d.log_text()
    det = loop["detail"]
    assert det["cause"]["source"] == "api flowmod" and det["cause"]["switch"] == "s3"
    outcomes = net.send(det["ingress"], det["witness"])
    assert any(o.kind == "loop" for o in outcomes), (det, outcomes)
    assert parse_header(det["witness"])["ipv4_dst"] >> 16 == 0x0A09
    m = scrape(st["metrics"])
    assert m['pazz_intent_violations{policy="no_loops"}'] == 1
    assert m['pazz_intent_violations{policy="reach-h4"}'] == 0

    # s4 loses its route to h4's prefix: reach-h4 breaks.
    d.call("flowmod", switch="s4", flow=ROUTE, command="delete_strict")
    net.delete_strict("s4", ROUTE)
    reach = wait_for(lambda: open_findings(d).get("reach-h4"))
    assert reach, d.log_text()
    det = reach["detail"]
    assert not any(
        o.kind == "egress" and o.egress == (4, 5) for o in net.send("s1:5", det["witness"])
    )

    # The controller puts it back: resolved; the loop is removed: resolved.
    d.call("flowmod", switch="s4", flow=ROUTE + ",actions=output:5")
    net.add("s4", ROUTE + ",actions=output:5")
    for sw, flow in LOOP:
        d.call("flowmod", switch=sw, flow=flow.split(",actions")[0], command="delete_strict")
        net.delete_strict(sw, flow.split(",actions")[0])
    assert wait_for(lambda: not open_findings(d)), open_findings(d)
    resolved = {f["name"]: f for f in d.call("findings", kind="intent", state="resolved")}
    assert {"no_loops", "reach-h4"} <= set(resolved)

    # Replies dropped at s4: reply-h1 breaks; the reply header is the witness's, swapped.
    d.call("flowmod", switch="s4", flow=DROP_REPLY)
    rep = wait_for(lambda: open_findings(d).get("reply-h1"))
    assert rep, d.log_text()
    det = rep["detail"]
    w, r = parse_header(det["witness"]), parse_header(det["reply"])
    assert (r["ipv4_src"], r["ipv4_dst"], r["tp_src"], r["tp_dst"]) == (
        w["ipv4_dst"], w["ipv4_src"], w["tp_dst"], w["tp_src"]
    )  # fmt: skip
    net.add("s4", DROP_REPLY)
    assert any(o.kind == "egress" and o.egress == (4, 5) for o in net.send("s1:5", det["witness"]))
    assert not any(
        o.kind == "egress" and o.egress == (1, 5) for o in net.send("s4:5", det["reply"])
    )

    out = pazzctl(d.sock, "intents", "show", str(rep["id"])).stdout
    reply = format_header(parse_header(det["reply"]))  # pazzctl writes it as an ofctl match
    assert "reply-h1" in out and reply in out and "api flowmod at s4" in out
    listing = json.loads(pazzctl(d.sock, "--json", "intents", "--open").stdout)
    assert [f["name"] for f in listing] == ["reply-h1"]

    # A restart reads the rules file again, where replies pass: the finding resolves.
    d.stop()
    d2 = Pazzd(path)
    try:
        d2.wait_ready()
        assert open_findings(d2) == {}
        assert d2.call("finding", id=rep["id"])["state"] == "resolved"
    finally:
        d2.stop()


def test_bad_policy_names_the_field(tmp_path):
    from pazzd.config import ConfigError, load_config

    bad = dict(POLICIES[0], to="s4:9")
    cfg = base_config(tmp_path, intents={"policies": [bad]})
    path = write_config(tmp_path / "pazzd.yaml", cfg)
    with pytest.raises(ConfigError, match=r"pazzd.yaml:\d+: intents.policies\[0\].to"):
        load_config(path)
    for field, value, msg in (
        ("check", "reachable", "must be one of"),
        ("match", "ip,nw_dst=10.0.0.0/33", "prefix length"),
        ("via", ["s9"], "s9"),
    ):
        pol = dict(POLICIES[0], **{field: value})
        if field == "via":
            pol["check"] = "waypoint"
        write_config(path, base_config(tmp_path, intents={"policies": [pol]}))
        with pytest.raises(ConfigError, match=msg):
            load_config(path)
