"""Entry confirmation probes (cpc.entryprobes) against the reference data plane.

For every entry of random networks and FlowMods: each inside probe, sent through
cpc.refdp from its ingress, matches the entry; without the entry, its exit reports
change, and every new one carries tags the model does not allow (a switch that did not
install it is caught), unless the entry's paths reach no exit; each outside
probe does not match the entry but does match a copy of it widened by the flipped bit
(a switch whose entry is wider than accepted is caught). The probes differ in the fields
the exits recognize them by. Entries whose Verify identity another entry shares are left
out: the tags cannot tell them apart.
"""

from __future__ import annotations

import dataclasses

from hypothesis import HealthCheck, given, settings

from cpc.entryprobes import entry_probes
from cpc.model import Model
from cpc.refdp import RefDataPlane
from cpc.rules import FlowMod, Instructions, Match
from cpc.topology import Topology
from tests.cpc.netgen import scenarios
from tests.cpc.test_model_vs_bruteforce import run_flowmods

KEY = ("ipv4_dst", "ipv4_src", "ip_proto", "tp_dst", "tp_src")


def _hits(e, ds) -> bool:
    ref = (e.table, e.priority, e.cookie, e.rule_id)
    return any(h.dpid == e.dpid and ref in h.rules for d in ds for h in d.hops)


def _exits(ds) -> set:
    return {(d.egress, d.verify_port, d.verify_rule) for d in ds if d.kind == "egress"}


def _widen(e, f):
    fields = []
    for g, v, m in e.match.fields:
        if g == f:
            m &= m - 1  # drop the lowest masked bit
            v &= m
        if m:
            fields.append((g, v, m))
    return dataclasses.replace(e, match=Match(tuple(fields), e.match.in_port))


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios(rewrite=False))
def test_probes_against_bruteforce(sc):
    topo, groups, fms, _ = sc
    model = run_flowmods(topo, groups, fms)
    entries = model.entries()
    ref = RefDataPlane(topo, entries, model.groups())
    # Entries that share a Verify identity are one to the tags (pazzd's proxy gives each
    # its own rule ID): whether the switch holds one or the other cannot show.
    twins = {id(x) for group in model.identity_collisions() for x in group}
    for e in entries:
        if id(e) in twins:
            continue
        probes = entry_probes(model, e, topo.edge_ports(), n=3, key_fields=KEY)
        keys = [tuple(p.header.get(f, 0) for f in KEY) for p in probes]
        assert len(set(keys)) == len(keys)
        inside = [p for p in probes if p.kind == "inside"]
        assert len(inside) <= 3
        if not inside:
            assert not probes
            continue
        without = RefDataPlane(topo, [x for x in entries if x is not e], model.groups())
        for p in inside:
            assert _hits(e, ref.send(p.ingress, p.header)), p
            have = _exits(ref.send(p.ingress, p.header))
            lost = _exits(without.send(p.ingress, p.header))
            # Without the entry the exits report something else: other tags (a report
            # the model does not allow) or nothing where the model expects a report;
            # or the same, where the entry's own paths reach no exit (dropped either way,
            # or out of a port that leads nowhere): the data plane cannot show it there.
            for egress, vport, vrule in lost - have:
                assert not model.allows(egress, p.header, vport, vrule), p
        for p in probes:
            if p.kind != "outside":
                continue
            assert not _hits(e, ref.send(p.ingress, p.header)), p
            wide = _widen(e, p.field)
            if any(
                x is not e
                and (x.dpid, x.table, x.priority) == (e.dpid, e.table, e.priority)
                and x.match.overlaps(wide.match)
                for x in entries
            ):
                continue  # a tie with the widened entry: which one wins is the switch's choice
            wider = RefDataPlane(topo, [wide if x is e else x for x in entries], model.groups())
            assert _hits(wide, wider.send(p.ingress, p.header)), p


def test_shadowed_entry_has_no_probe():
    topo = Topology()
    topo.add_switch(1, "s1", [1, 2])
    topo.add_edge((1, 1))
    topo.add_edge((1, 2))
    model = Model(topo)
    model.add_entries([])
    ip = {"eth_type": (0x0800, 0xFFFF)}
    out2 = Instructions((("output", 2),), (), False, None)
    model.apply(FlowMod("add", 1, 0, 100, Match.build(ip), out2))
    narrow = Match.build({**ip, "ipv4_dst": (0x0A000001, 0xFFFFFFFF)})
    model.apply(FlowMod("add", 1, 0, 10, narrow, out2, rule_id=7))
    low = model.find_entry(1, 0, 10, narrow)
    assert entry_probes(model, low, topo.edge_ports(), key_fields=KEY) == []
    top = model.find_entry(1, 0, 100, Match.build(ip))
    probes = entry_probes(model, top, topo.edge_ports(), key_fields=KEY)
    assert probes and {p.kind for p in probes} == {"inside"}  # eth_type only: no IPv4 outside it


def test_dropping_entry_is_probed():
    """A table-0 entry without actions forwards like the table-miss: the class walks name
    no element for it, the probes come from the ingresses of its switch."""
    topo = Topology()
    topo.add_switch(1, "s1", [1, 2])
    topo.add_edge((1, 1))
    topo.add_edge((1, 2))
    model = Model(topo)
    model.add_entries([])
    ip = {"eth_type": (0x0800, 0xFFFF)}
    model.apply(
        FlowMod(
            "add",
            1,
            0,
            10,
            Match.build(ip),
            Instructions((("output", 2),), (), False, None),
            rule_id=1,
        )
    )
    m = Match.build({**ip, "ip_proto": (6, 0xFF), "tp_dst": (8080, 0xFFFF)})
    model.apply(FlowMod("add", 1, 0, 100, m, Instructions((), (), False, None), rule_id=2))
    e = model.find_entry(1, 0, 100, m)
    probes = entry_probes(model, e, topo.edge_ports(), key_fields=KEY)
    ref = RefDataPlane(topo, model.entries())
    inside = [p for p in probes if p.kind == "inside"]
    assert inside and all(_hits(e, ref.send(p.ingress, p.header)) for p in inside)
    outside = {p.field: p for p in probes if p.kind == "outside"}
    assert set(outside) == {"ip_proto", "tp_dst"}
    assert outside["tp_dst"].header["tp_dst"] == 8081
    assert all(d.kind == "egress" for p in outside.values() for d in ref.send(p.ingress, p.header))


def test_outside_probe_must_reach_the_entrys_table():
    """s2's table 1 drops ip_proto 6 from port 1 after table 0 sent it on; the inside probe
    then loops (s2, s1, back to s2, stopped on arrival: no table). ip_proto 7 misses s2's
    table 0, so it never reaches table 1 and shows nothing of a wider entry there: no
    outside probe on ip_proto. (The loop's last visit, with no rules, once passed for one
    that reached table 1 without earlier matches.)"""
    topo = Topology()
    for d in (1, 2):
        topo.add_switch(d, f"s{d}", [1, 2, 3, 4])
    topo.add_link((1, 1), (2, 1))
    topo.add_link((1, 2), (2, 2))
    topo.add_edge((1, 3))
    topo.add_edge((2, 3))
    model = Model(topo)
    model.add_entries([])
    tcp = {"eth_type": (0x0800, 0xFFFF), "ip_proto": (6, 0xFF)}
    out1 = Instructions((), (("output", 1),), False, None)
    model.apply(FlowMod("add", 1, 0, 1, Match.build({}), out1))
    model.apply(FlowMod("add", 1, 1, 1, Match.build(tcp), out1))
    to_table1 = Instructions((), (("output", 2),), False, 1)
    model.apply(FlowMod("add", 2, 0, 1, Match.build(tcp, in_port=1), to_table1))
    model.apply(FlowMod("add", 2, 1, 1, Match.build(tcp, in_port=1), Instructions(())))
    e = model.find_entry(2, 1, 1, Match.build(tcp, in_port=1))
    probes = entry_probes(model, e, topo.edge_ports(), key_fields=KEY)
    assert [p.kind for p in probes].count("inside") >= 1
    assert "ip_proto" not in {p.field for p in probes if p.kind == "outside"}
    ref = RefDataPlane(topo, model.entries(), model.groups())
    for p in probes:
        assert _hits(e, ref.send(p.ingress, p.header)) == (p.kind == "inside"), p
