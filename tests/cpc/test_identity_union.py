"""An entry inserted below one entry and above exactly _UNION_MAX others of its element
takes only what the higher one leaves: the pieces it takes from the lower ones and the
miss are then more than _UNION_MAX, and its region must not fall back to its whole match.
The oracle: the reference data plane's tags for every header against the model's
expected reports."""

from __future__ import annotations

from cpc.model import Model
from cpc.refdp import RefDataPlane
from cpc.rules import FlowMod, Instructions, Match
from cpc.tables import _UNION_MAX
from cpc.topology import Topology

IP = {"eth_type": (0x0800, 0xFFFF)}


def out(port):
    return Instructions((("output", port),), (), False, None)


def test_an_entry_between_one_above_and_union_max_below():
    topo = Topology()
    topo.add_switch(1, "s1", [1, 2, 3])
    for p in (1, 2, 3):
        topo.add_edge((1, p))
    model = Model(topo)
    model.add_entries([])
    n = _UNION_MAX
    # Below: n entries on TCP ports 1..n, overlapping the new entry's match (all TCP).
    for i in range(n):
        m = Match.build({**IP, "ip_proto": (6, 0xFF), "tp_dst": (i + 1, 0xFFFF)})
        model.apply(FlowMod("add", 1, 0, 10 + i, m, out(2), rule_id=100 + i))
    # Above: TCP to 10.0.0.0/8 goes out port 3.
    above = Match.build({**IP, "ip_proto": (6, 0xFF), "ipv4_dst": (0x0A000000, 0xFF000000)})
    model.apply(FlowMod("add", 1, 0, 500, above, out(3), rule_id=1))
    # The new one, in between: all TCP out port 2 (takes n pieces and the miss).
    model.apply(
        FlowMod("add", 1, 0, 300, Match.build({**IP, "ip_proto": (6, 0xFF)}), out(2), rule_id=2)
    )
    ref = RefDataPlane(topo, list(model.entries()), model.groups())
    for dst in (0x0A000001, 0x0B000001):
        for port in (1, n, n + 1):
            h = {"eth_type": 0x0800, "ip_proto": 6, "ipv4_dst": dst, "tp_dst": port}
            for d in ref.send((1, 1), h):
                assert d.kind == "egress"
                got = {(e.verify_port, e.verify_rule) for e in model.expected(d.egress, h)}
                assert (d.verify_port, d.verify_rule) in got, (h, d.egress)
                assert model.allows(d.egress, h, d.verify_port, d.verify_rule)
