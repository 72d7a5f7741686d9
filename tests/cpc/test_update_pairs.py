"""Update.pairs after a partial re-walk: a class walked again only from the ingresses
whose paths cross the changed switch must still name the pairs those paths lost."""

from __future__ import annotations

from cpc import ofctl
from cpc.model import Model
from cpc.topology import load_topology

TOPO = """\
switches:
  - {name: s1, dpid: 1, ports: [1, 2, 3]}
  - {name: s2, dpid: 2, ports: [1, 2, 3]}
  - {name: s3, dpid: 3, ports: [1, 2, 3]}
links:
  - [s1:2, s2:1]
  - [s2:2, s3:1]
edge: [s1:1, s1:3, s2:3, s3:2, s3:3]
"""


def corpus_pairs(model):
    edges = model.topo.edge_ports()
    return {(i, e): model.reach(i, e) for i in edges for e in edges if i != e}


def test_pairs_lost_and_gained_at_the_far_end_of_a_path(tmp_path):
    path = tmp_path / "t.yaml"
    path.write_text(TOPO)
    topo = load_topology(path)
    model = Model(topo)
    model.add_entries([])
    for dpid, out in ((1, 2), (2, 2), (3, 2)):
        model.add_flow(dpid, f"priority=8,ip,nw_dst=10.0.0.0/8,actions=output:{out}")
    model.add_flow(2, "priority=8,ip,nw_dst=11.0.0.0/8,actions=output:3")
    steps = [
        ("delete_strict", 3, "priority=8,ip,nw_dst=10.0.0.0/8"),  # s1 and s2 lose s3:2
        ("add", 3, "priority=8,ip,nw_dst=10.0.0.0/8,actions=output:3"),  # they gain s3:3
        ("add", 3, "priority=9,ip,nw_dst=10.1.0.0/16,actions=output:2"),
    ]
    for cmd, dpid, text in steps:
        before = corpus_pairs(model)
        upd = model.apply(ofctl.parse_flow(text, dpid, cmd))
        after = corpus_pairs(model)
        changed = {p for p in after if after[p] != before[p]}
        assert changed, text  # each step changes some pair
        assert changed <= upd.pairs, (text, changed - upd.pairs)
