"""End to end on the real model: a grid from pazzdata.workloads, the reference data plane
sending tagged reports through sFlow datagrams, and faults injected into the reference.
"""

from __future__ import annotations

import dataclasses

from cpc.fields import parse_header
from cpc.refdp import RefDataPlane
from cpc.results import RuleRef
from cpc.rules import FlowEntry, Instructions, Match
from pazzdata import workloads
from tester.detect import BLACKHOLE, TYPE_A, TYPE_P_ACTION, TYPE_P_MATCH
from tester.emit import ReferenceEmitter, synthetic_ifmap
from tester.engine import Tester
from tester.store import FaultStore
from tester.timers import BlackholeMonitor, CriticalFlow


def all_ports(topo):
    return [(d, p) for d in sorted(topo.switches) for p in topo.ports_of(d)]


def rules_at(model):
    by = {}
    for e in model.entries():
        by.setdefault(e.dpid, []).append(RuleRef(e.table, e.priority, e.cookie, e.rule_id))
    return lambda dpid: by.get(dpid, ())


def make_tester(tmp_path, wl, m, **kw):
    ports = all_ports(wl.topo)
    store = FaultStore(str(tmp_path / "f.db"))
    return Tester(m, store, synthetic_ifmap(ports), ports=ports, rules_at=rules_at(m), **kw), store


def traffic(wl):
    """(ingress, header) pairs: every host to a few prefixes of every other host."""
    out = []
    nets = sorted(wl.prefixes)
    for src in sorted(wl.hosts):
        for i, net in enumerate(nets[:18]):
            if wl.prefixes[net] == src:
                continue
            ip = net + 7 + i
            h = parse_header(
                f"tcp_dst=80,tcp_src={1000 + i},nw_src=10.0.{int(src[1:]) - 1}.9,"
                f"nw_dst={ip >> 24}.{(ip >> 16) & 255}.{(ip >> 8) & 255}.{ip & 255}"
            )
            out.append((wl.hosts[src], h))
    return out


def replay(t, ref, pairs, now, em=None):
    em = em or ReferenceEmitter()
    n = 0
    for ingress, h in pairs:
        for d, final in ref.send_with_headers(ingress, h):
            n += em.add_delivery(d, final)
    for dg in em.flush():
        t.process_datagram(dg, now)
    return n


def with_entries(wl, m, change):
    entries = change(list(m.entries()))
    return RefDataPlane(wl.topo, entries, m.groups())


def route_entry(entries, dpid, net):
    for e in entries:
        if e.dpid == dpid and e.priority == workloads.ROUTE_PRIORITY:
            v = e.match.get("ipv4_dst")
            if v and v[0] == net:
                return e
    raise LookupError((dpid, net))


def test_no_faults_without_injection(tmp_path, net) -> None:
    wl, m = net
    t, store = make_tester(tmp_path, wl, m)
    ref = RefDataPlane(wl.topo, m.entries(), m.groups())
    n = replay(t, ref, traffic(wl), 1.0)
    assert n > 100 and t.stats.reports == n
    assert t.stats.consistent == n and t.stats.fault_samples == 0 and store.faults() == []


def _find_misroute(wl, m):
    """A (switch, prefix, wrong port) whose misroute still reaches the right exit."""
    pairs = traffic(wl)
    for ingress, h in pairs:
        dst_net = h["ipv4_dst"] & 0xFFFFFF00
        egress = wl.hosts[wl.prefixes[dst_net]]
        x = ingress[0]
        if x == egress[0]:
            continue
        e = route_entry(m.entries(), x, dst_net)
        for port in wl.topo.ports_of(x):
            if port == 5 or port not in wl.topo.links and (x, port) not in wl.topo.links:
                continue
            bad = dataclasses.replace(e, instructions=Instructions((("output", port),)))
            ref = with_entries(wl, m, lambda es, e=e, bad=bad: [bad if y is e else y for y in es])
            for d in ref.send(ingress, h):
                if d.kind == "egress" and d.egress == egress:
                    tags = {(x.verify_port, x.verify_rule) for x in m.expected(egress, h)}
                    if (d.verify_port, d.verify_rule) not in tags:
                        return x, ingress, h, ref
    raise AssertionError("no misroute found")


def test_changed_output_port(tmp_path, net) -> None:
    wl, m = net
    x, ingress, h, ref = _find_misroute(wl, m)
    t, store = make_tester(tmp_path, wl, m)
    replay(t, ref, [(ingress, h)], 1.0)
    faults = store.faults()
    assert faults and all(f.kind == TYPE_P_ACTION for f in faults)
    assert {f.location for f in faults} == {f"dpid:{x}"}


def test_hidden_rule_same_path(tmp_path, net) -> None:
    wl, m = net
    ingress, h = next(
        (i, h) for i, h in traffic(wl) if wl.hosts[wl.prefixes[h["ipv4_dst"] & ~0xFF]][0] != i[0]
    )
    dst_net = h["ipv4_dst"] & 0xFFFFFF00
    x = ingress[0]
    e = route_entry(m.entries(), x, dst_net)
    hidden = FlowEntry(
        x,
        0,
        100,
        Match.build({"eth_type": (0x0800, 0xFFFF), "ipv4_dst": (h["ipv4_dst"], 0xFFFFFFFF)}),
        e.instructions,
        cookie=0xBAD,
        rule_id=0,
    )
    ref = with_entries(wl, m, lambda es: es + [hidden])
    t, store = make_tester(tmp_path, wl, m)
    replay(t, ref, traffic(wl), 1.0)
    faults = store.faults()
    # One fault per path through x (every source sends to that address).
    assert faults
    for f in faults:
        assert f.kind == TYPE_P_MATCH and x in f.localization["candidates"]
        assert f.header["ipv4_dst"] == h["ipv4_dst"]


def test_hidden_rule_admits_dropped_traffic(tmp_path, net) -> None:
    wl, m = net
    # The generator's ACLs protect one of a host's prefixes at the host's edge switch.
    acl = next(e for e in m.entries() if e.priority == workloads.ACL_PRIORITY)
    src, _ = acl.match.get("ipv4_src")
    proto, _ = acl.match.get("ip_proto")
    dport, _ = acl.match.get("tp_dst")
    dst_net, _ = acl.match.get("ipv4_dst")
    ingress = next(p for p in wl.topo.edge_ports() if p[0] != acl.dpid)
    h = parse_header("")
    h.update(
        eth_type=0x0800,
        ipv4_src=src + 3,
        ipv4_dst=dst_net + 9,
        ip_proto=proto,
        tp_dst=dport,
        tp_src=999,
    )
    ref0 = RefDataPlane(wl.topo, m.entries(), m.groups())
    assert all(d.kind != "egress" for d in ref0.send(ingress, h))
    route = route_entry(m.entries(), acl.dpid, dst_net)
    hidden = dataclasses.replace(route, priority=2000, cookie=0xBAD, rule_id=0)
    ref = with_entries(wl, m, lambda es: es + [hidden])
    t, store = make_tester(tmp_path, wl, m)
    replay(t, ref0, traffic(wl), 0.5)
    assert store.faults() == []
    replay(t, ref, [(ingress, h)], 1.0)
    faults = store.faults()
    assert faults and {f.kind for f in faults} == {TYPE_A}
    assert all(acl.dpid in f.localization["candidates"] for f in faults)


def test_deleted_rule_blackhole(tmp_path, net) -> None:
    wl, m = net
    ingress, h = next(
        (i, h) for i, h in traffic(wl) if wl.hosts[wl.prefixes[h["ipv4_dst"] & ~0xFF]][0] != i[0]
    )
    dst_net = h["ipv4_dst"] & 0xFFFFFF00
    egress = wl.hosts[wl.prefixes[dst_net]]
    flow = CriticalFlow("crit", ingress, egress, {"ipv4_dst": h["ipv4_dst"]}, timeout=3.0, header=h)
    mon = BlackholeMonitor([flow], k=5.0, now=0.0)
    t, store = make_tester(tmp_path, wl, m, blackholes=mon)
    ref = RefDataPlane(wl.topo, m.entries(), m.groups())
    em = ReferenceEmitter(sampling_rate=1)  # every packet sampled, at ingress and egress
    for s in range(10):
        em.add_ingress(ingress, h)
        replay(t, ref, [(ingress, h)], float(s), em)
        t.tick(s + 0.5)
    assert store.faults() == []
    x = ingress[0]
    gone = route_entry(m.entries(), x, dst_net)
    broken = with_entries(wl, m, lambda es: [e for e in es if e is not gone])
    assert all(d.kind != "egress" for d in broken.send(ingress, h))
    for s in range(10, 20):
        em.add_ingress(ingress, h)
        replay(t, broken, [(ingress, h)], float(s), em)
        t.tick(s + 0.5)
    (f,) = store.faults()
    # At 1/1 one ingress sample without its report is proof: the first after the last
    # report (9 s) and its batch and latency allowances (1.5 s each ways), once the
    # flow's 3 s timeout has passed.
    assert f.first_seen == 12.5 and "ingress" in f.localization["detail"]
    assert f.kind == BLACKHOLE and x in f.localization["candidates"]
