"""Which entry each header matches, per element, as tables change (cpc.tables.Identities)."""

from __future__ import annotations

import itertools

import pytest

from cpc import ofctl
from cpc.model import Model
from cpc.refdp import RefDataPlane
from cpc.topology import load_topology

TOPO = """\
switches:
  - {name: s1, dpid: 1, ports: [1, 2, 3]}
edge: [s1:1, s1:2, s1:3]
"""
HEADERS = [
    {"eth_type": 0x0800, "ip_proto": 6, "ipv4_dst": dst, "tp_dst": tp}
    for dst in (0x0A000001, 0x0A000101, 0x0B000001)
    for tp in (22, 80)
]


@pytest.fixture
def topo(tmp_path):
    path = tmp_path / "t.yaml"
    path.write_text(TOPO)
    return load_topology(path)


def check(model, topo):
    ref = RefDataPlane(topo, model.entries(), model.groups())
    for ing in topo.edge_ports():
        for h in HEADERS:
            key = lambda d: (d.kind, d.egress, d.hops, d.verify_port, d.verify_rule)  # noqa: E731
            assert sorted(map(key, model.trace(ing, h))) == sorted(map(key, ref.send(ing, h)))
            for d in ref.send(ing, h):
                if d.kind == "egress":
                    assert model.allows(d.egress, h, d.verify_port, d.verify_rule)
                    assert not model.allows(d.egress, h, d.verify_port, d.verify_rule ^ 1)


def test_in_port_entry_beside_a_wildcard_entry_with_the_same_match(topo):
    """An in_port element also holds the table's wildcard entries; an entry of its own with
    the same fields and priority is another entry, added and deleted on its own."""
    flows = [
        "priority=10,ip,nw_dst=10.0.0.0/16,actions=output:2",
        "priority=10,in_port=1,ip,nw_dst=10.0.0.0/16,actions=output:3",
        "priority=20,tcp,tp_dst=22,actions=drop",
        "priority=5,ip,actions=output:3",
    ]
    for order in itertools.permutations(range(len(flows))):
        model = Model(topo)
        model.add_entries([])
        for i in order:
            model.add_flow(1, flows[i])
        for e in list(model.entries()):
            model.apply(delete_strict(e))
            if sum(x.priority == 10 for x in model.entries()) < 2:  # equal priorities overlap:
                check(model, topo)  # undefined in OpenFlow while both are there
        assert model.rule_count() == 0 and model.class_count() == 1


def test_identity_only_changes_move_no_class(topo):
    """A more specific route with its parent's output changes the entry headers match, and
    the Verify_Rule the model expects, without moving a class."""
    model = Model(topo)
    model.add_entries([])
    model.subscribe(lambda u: None)  # Update.classes names identity-only classes for subscribers
    model.add_flow(1, "priority=8,ip,nw_dst=10.0.0.0/8,actions=output:2")
    classes = model.class_count()
    upd = model.add_flow(1, "priority=24,cookie=0x7,ip,nw_dst=10.0.1.0/24,actions=output:2")
    assert model.class_count() == classes
    assert upd.classes  # still named, so that the tester holds their reports back
    check(model, topo)


def delete_strict(e):
    from cpc.rules import FlowMod

    return FlowMod(
        "delete_strict",
        e.dpid,
        e.table,
        e.priority,
        e.match,
        cookie=e.cookie,
        cookie_mask=(1 << 64) - 1,
    )


def test_bulk_load_into_a_table_that_has_entries(topo):
    """add_entries on a non-empty model: the new entries take headers from the old ones."""
    from cpc import ofctl

    model = Model(topo)
    model.add_entries([])
    model.add_flow(1, "priority=5,ip,actions=output:3")
    model.add_flow(1, "priority=30,tcp,tp_dst=80,actions=output:2")
    more = [
        ofctl.parse_flow(f, 1, "add")
        for f in (
            "priority=16,ip,nw_dst=10.0.0.0/16,actions=output:2",
            "priority=24,ip,nw_dst=10.0.1.0/24,actions=output:3",
            "priority=24,tcp,nw_dst=10.0.0.0/24,tp_dst=22,actions=drop",
        )
    ]
    model.add_entries([fm.entry() for fm in more])
    check(model, topo)
    fresh = Model(topo)
    fresh.add_entries(model.entries())
    assert fresh.class_count() == model.class_count()
    check(fresh, topo)


def test_batch_with_regions_returned_to_the_miss_and_taken_again(topo):
    """apply_many collects an element's moves by action; a region that went back to the
    table-miss in the batch and is taken again must be moved after it (compared with the
    reference data plane, and with the class count of the same FlowMods one by one)."""
    flows = [
        ("add", "priority=10,ip,nw_dst=10.0.0.0/16,actions=output:1"),
        ("add", "priority=20,ip,nw_dst=10.0.1.0/24,actions=output:2"),
        ("delete_strict", "priority=10,ip,nw_dst=10.0.0.0/16"),
        ("add", "priority=5,ip,nw_dst=10.0.0.0/8,actions=output:3"),
        ("add", "priority=30,ip,nw_dst=10.0.0.1,tcp,tp_dst=80,actions=output:1"),
        ("delete_strict", "priority=20,ip,nw_dst=10.0.1.0/24"),
        ("add", "priority=10,ip,nw_dst=10.0.0.0/16,actions=output:2"),
    ]
    # An entry from before the batch gives its region to the miss, and an entry with an
    # action already collected takes it back.
    flows2 = [
        ("add", "priority=10,ip,nw_dst=10.0.0.0/8,actions=output:1"),
        ("delete_strict", "priority=10,ip,nw_dst=11.0.0.0/8"),
        ("add", "priority=12,ip,nw_dst=11.0.0.0/8,actions=output:1"),
    ]
    before = [ofctl.parse_flow("priority=10,ip,nw_dst=11.0.0.0/8,actions=output:2", 1, "add")]
    for batch_flows in (flows, flows2):
        fms = [ofctl.parse_flow(text, 1, cmd) for cmd, text in batch_flows]
        batch, one = Model(topo), Model(topo)
        batch.add_entries([fm.entry() for fm in before])
        one.add_entries([fm.entry() for fm in before])
        _, errors = batch.apply_many(fms)
        assert errors == []
        for fm in fms:
            one.apply(fm)
        check(batch, topo)
        assert batch.class_count() == one.class_count()


def test_bulk_load_of_routes_then_updates(topo):
    """A bulk load into empty tables cuts the routes' classes from their prefix trie
    (cpc.routes) and derives each table-miss once; a duplicate (same match and priority:
    the later one replaces it) or an entry whose ipv4_dst is not a prefix ends that mode
    part-way. Checked against the reference data plane and against the same entries one
    by one, after the load and after updates that take from and give back to the miss."""
    routes = [
        "priority=24,ip,nw_dst=10.0.1.0/24,actions=output:3",
        "priority=16,ip,nw_dst=10.0.0.0/16,actions=output:2",
        "priority=30,tcp,nw_dst=10.0.0.0/24,tp_dst=22,actions=drop",
        "priority=24,in_port=1,ip,nw_dst=10.0.0.0/24,actions=output:2",
        "priority=0,actions=output:1",
        "priority=16,ip,nw_dst=10.0.0.0/23,actions=output:3",  # ties with the /16: earlier wins
        "priority=8,ip,nw_dst=10.0.0.0/8,actions=drop",
    ]
    tails = [
        [],
        ["priority=16,ip,nw_dst=10.0.0.0/16,actions=output:3"],  # a duplicate
        ["priority=20,ip,nw_dst=10.0.0.1/255.0.255.255,actions=output:1"],  # not a prefix
    ]
    updates = [
        ("add", "priority=4,ip,nw_dst=11.0.0.0/8,actions=output:2"),  # from the miss
        ("delete_strict", "priority=8,ip,nw_dst=10.0.0.0/8"),  # back to the miss
        ("delete_strict", "priority=0"),
        ("add", "priority=2,ip,actions=output:3"),
    ]
    for tail in tails:
        for order in itertools.permutations(range(len(routes)), 2):
            flows = [routes[i] for i in order]
            flows += [r for r in routes if r not in flows] + tail
            entries = [ofctl.parse_flow(f, 1, "add").entry() for f in flows]
            bulk = Model(topo)
            bulk.add_entries(entries)
            one = Model(topo)
            one.add_entries([])
            for f in sorted(flows, key=lambda f: -ofctl.parse_flow(f, 1, "add").priority):
                one.add_flow(1, f)  # highest priority first; ties keep file order
            check(bulk, topo)
            assert bulk.class_count() == one.class_count()
            assert sorted(map(str, bulk.entries())) == sorted(map(str, one.entries()))
            for cmd, text in updates:
                for model in (bulk, one):
                    model.apply(ofctl.parse_flow(text, 1, cmd))
                check(bulk, topo)
                assert bulk.class_count() == one.class_count()
