"""Hand-built expectations for tester tests: tags computed independently with cpc.tags."""

from __future__ import annotations

from cpc.model import Model
from cpc.results import Expected, Hop, RuleRef
from cpc.tags import VERIFY_PORT_INIT, VERIFY_RULE_INIT, set_verify_port, set_verify_rule


def tags_of(hops) -> tuple[int, int]:
    vp, vr = VERIFY_PORT_INIT, VERIFY_RULE_INIT
    for h in hops:
        for r in h.rules:
            vp = set_verify_port(vp, h.dpid, h.in_port)
            vr = set_verify_rule(vr, h.dpid, r.table, r.priority, r.cookie, r.rule_id)
    return vp, vr


def expected(hops) -> Expected:
    vp, vr = tags_of(hops)
    return Expected((hops[0].dpid, hops[0].in_port), tuple(hops), vp, vr)


def rule(prio: int, rid: int = 0, table: int = 0, cookie: int = 0) -> RuleRef:
    return RuleRef(table, prio, cookie, rid)


def path(*steps) -> tuple[Hop, ...]:
    """steps: (dpid, in_port, out_port, rule) tuples."""
    return tuple(Hop(d, i, (r,), o) for d, i, o, r in steps)


# A line s1 - s2 - s3 (port 2 of each goes right, port 1 comes from the left), plus s4
# between s1 (port 3) and s3 (port 3), and a parallel link s1:4 - s2:4.
R1, R2, R3, R4 = rule(10, 1), rule(10, 2), rule(10, 3), rule(10, 4)
GOOD = path((1, 1, 2, R1), (2, 1, 2, R2), (3, 1, 2, R3))
# The same flow through s4 instead of s2, leaving at the same egress port (3, 2).
BAD = path((1, 1, 3, R1), (4, 1, 2, R4), (3, 3, 2, R3))
EGRESS = (3, 2)
ALL_PORTS = [(d, p) for d in (1, 2, 3, 4) for p in (1, 2, 3, 4)]
HDR = {
    "ipv4_dst": 0x0A000302,
    "ipv4_src": 0x0A000101,
    "ip_proto": 6,
    "tp_dst": 80,
    "tp_src": 5555,
    "eth_type": 0x0800,
    "vlan_vid": 0,
    "eth_dst": 0x020000000302,
    "eth_src": 0x020000000101,
}


class FakeModel:
    """expected() from a table keyed by (egress, ipv4_dst); class id = ipv4_dst."""

    def __init__(self, table: dict | None = None) -> None:
        self.table = dict(table or {})
        self.version = 1
        self.calls = 0

    def classify(self, header: dict) -> int:
        return header["ipv4_dst"]

    def expected(self, egress, header):
        self.calls += 1
        return list(self.table.get((egress, header["ipv4_dst"]), []))

    def allows(self, egress, header, verify_port, verify_rule):
        return any(
            (e.verify_port, e.verify_rule) == (verify_port, verify_rule)
            for e in self.expected(egress, header)
        )


def line_model(ingress: tuple[int, int], egress: tuple[int, int]) -> Model:
    """s1 - s2 - s3 (ports 1 and 2 each; s1:2-s2:1, s2:2-s3:1) with the two edge ports,
    built and without entries."""
    from cpc.topology import Topology

    topo = Topology()
    for d in (1, 2, 3):
        topo.add_switch(d, f"s{d}", [1, 2])
    topo.add_link((1, 2), (2, 1))
    topo.add_link((2, 2), (3, 1))
    topo.add_edge(ingress)
    topo.add_edge(egress)
    m = Model(topo)
    m.build()
    return m
