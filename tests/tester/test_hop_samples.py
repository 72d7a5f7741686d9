"""Per-hop samples judged: the reference data plane's arrivals over links, emitted as the
ingress samples patched OVS takes there (the Verify shim as the switches before built it),
on a grid from pazzdata.workloads with the real model."""

from __future__ import annotations

import dataclasses

from cpc.refdp import RefDataPlane
from cpc.rules import Instructions
from tester.detect import TYPE_A, TYPE_P_ACTION
from tester.emit import ReferenceEmitter
from tester.timers import TransientGuard
from tests.tester.test_tester_e2e import make_tester, route_entry, traffic


def send_hops(t, ref, pairs, now, em=None, edge=True) -> tuple[int, int]:
    """Emit (marked as patched OVS marks them: a shim alone makes a report of another
    agent's sample) a per-hop sample of every arrival over a link (and, with edge, the host's own
    ingress sample, without a shim); no report. Returns (link arrivals, edge samples)."""
    em = em or ReferenceEmitter(ovs_marking=True)
    n = e = 0
    for ingress, h in pairs:
        n += em.add_arrivals(ref.arrivals(ingress, h))
        if edge:
            em.add_ingress(ingress, h)
            e += 1
    for dg in em.flush():
        t.process_datagram(dg, now)
    return n, e


def test_clean_network_has_no_hop_fault(tmp_path, net) -> None:
    wl, m = net
    t, store = make_tester(tmp_path, wl, m)
    ref = RefDataPlane(wl.topo, m.entries(), m.groups())
    n, e = send_hops(t, ref, traffic(wl), 1.0)
    st = t.stats
    assert n > 100 and st.ingress_samples == n + e
    assert st.hop_samples_judged == n and st.hop_consistent == n, st.as_dict()
    assert st.hop_fault_samples == 0 and store.faults() == []
    assert st.hop_edge_samples == e and st.hop_undecodable == 0 and st.hop_unjudged == 0


def _mid_path_misroute(wl, m):
    """(x, wrong port, ingress, header, broken data plane): x is a middle switch of the
    header's path whose route outputs to one port, and the wrong port's link leads to a
    switch where, by the intended data plane, that header never arrives from x."""
    ref0 = RefDataPlane(wl.topo, m.entries(), m.groups())
    pairs = traffic(wl)
    arrived = set()  # (port, header) of every intended arrival over a link, any ingress
    for ingress, h in pairs:
        for port, hdr, _, _, _ in ref0.arrivals(ingress, h):
            arrived.add((port, tuple(sorted(hdr.items()))))
    for ingress, h in pairs:
        for d in ref0.send(ingress, h):
            if d.kind != "egress" or len(d.hops) < 3:
                continue
            x = d.hops[1].dpid
            e = route_entry(m.entries(), x, h["ipv4_dst"] & 0xFFFFFF00)
            if len(e.instructions.apply) != 1 or e.instructions.apply[0][0] != "output":
                continue
            for port in wl.topo.ports_of(x):
                peer = wl.topo.links.get((x, port))
                if peer is None or port in (d.hops[1].in_port, d.hops[1].out_port):
                    continue
                if (peer, tuple(sorted(h.items()))) in arrived:
                    continue
                bad = dataclasses.replace(e, instructions=Instructions((("output", port),)))
                ref = RefDataPlane(wl.topo, [bad if y is e else y for y in m.entries()], m.groups())
                return x, port, peer, ingress, h, ref
    raise AssertionError("no mid-path misroute found")


def test_mid_path_misroute_is_judged_at_the_next_switch(tmp_path, net) -> None:
    wl, m = net
    x, port, peer, ingress, h, ref = _mid_path_misroute(wl, m)
    t, store = make_tester(tmp_path, wl, m)
    # Only per-hop samples of the one packet, cut before the loop it may run into: the
    # fault is seen where x's wrong link arrives.
    arrivals = [a for a in ref.arrivals(ingress, h) if len(a[4]) <= 2]
    assert [a[0] for a in arrivals if a[4][-1].dpid == x] == [peer]
    em = ReferenceEmitter(ovs_marking=True)
    em.add_arrivals(arrivals)
    for dg in em.flush():
        t.process_datagram(dg, 1.0)
    st = t.stats
    assert st.reports == 0 and st.hop_fault_samples == 1, st.as_dict()
    (f,) = store.faults()
    assert f.kind == TYPE_P_ACTION and f.location == f"dpid:{x}"
    assert f.localization["culprit"] == x and f.localization["sampled_at"] == "hop"
    assert f.egress == peer and f.expected
    # The record's expected are the beginnings of paths through x, its hop last.
    assert all(e["path"][-1][0] == x for e in f.expected)


def test_hops_after_a_misroute_open_no_fault_of_their_own(tmp_path, net) -> None:
    """Every switch after a misroute judges the packet again; once the misroute's fault
    is open, those samples are counted as explained and open nothing more."""
    wl, m = net
    x, port, peer, ingress, h, ref = _mid_path_misroute(wl, m)
    t, store = make_tester(tmp_path, wl, m)
    arrivals = [a for a in ref.arrivals(ingress, h) if len(a[4]) <= 8]
    first = [a for a in arrivals if a[0] == peer]
    em = ReferenceEmitter(ovs_marking=True)
    em.add_arrivals(first)
    for dg in em.flush():
        t.process_datagram(dg, 1.0)
    (f,) = store.faults()
    before = t.stats.hop_fault_samples
    em.add_arrivals(arrivals)
    for dg in em.flush():
        t.process_datagram(dg, 2.0)
    st = t.stats
    wrong = st.hop_samples_judged - st.hop_consistent
    assert wrong > before and st.hop_explained == wrong - before, st.as_dict()
    assert [g.id for g in store.faults()] == [f.id]


def test_header_never_brought_to_a_switch_is_type_a_there(tmp_path, net) -> None:
    """A packet whose tags say it came in somewhere the model never admits it from, and
    arrived where the model never brings it: Type-a at that hop."""
    wl, m = net
    _, _, _, ingress, h, _ = _mid_path_misroute(wl, m)
    ref = RefDataPlane(wl.topo, m.entries(), m.groups())
    port, hdr, _, _, _ = ref.arrivals(ingress, h)[0]
    t, store = make_tester(tmp_path, wl, m)
    em = ReferenceEmitter(ovs_marking=True)
    em.add_ingress(port, hdr, (0, 1))  # no switch's bits: entered nowhere
    for dg in em.flush():
        t.process_datagram(dg, 1.0)
    (f,) = store.faults()
    assert f.kind == TYPE_A and f.location == f"hop:{port[0]}:{port[1]}"


def test_samples_not_judged_are_counted(tmp_path, net) -> None:
    wl, m = net
    ref = RefDataPlane(wl.topo, m.entries(), m.groups())
    ingress, h = traffic(wl)[0]
    port, hdr, vp, vr, _ = ref.arrivals(ingress, h)[0]
    em = ReferenceEmitter(ovs_marking=True)
    em.add_ingress(ingress, h, (0, 1))  # a host's frame that brings a shim: an edge port
    em.add_ingress(port, hdr)  # no shim on a link: not judged
    dgs = em.flush()
    t, store = make_tester(tmp_path, wl, m)
    for dg in dgs:
        t.process_datagram(dg, 1.0)
    st = t.stats
    assert (st.hop_edge_samples, st.hop_undecodable, st.hop_samples_judged) == (1, 1, 0)
    # Held back: an update of the header's class in flight.
    guard = TransientGuard(settle=2.0, clock=lambda: 1.0)
    t2, _ = make_tester(tmp_path, wl, m, guard=guard)
    guard.begin([m.classify(hdr)], now=1.0)
    em.add_ingress(port, hdr, (vp ^ 0x10, vr))  # a fault, if it were judged
    for dg in em.flush():
        t2.process_datagram(dg, 1.0)
    assert t2.stats.hop_held_transient == 1 and t2.stats.hop_samples_judged == 0
    # Turned off: counted as ingress samples only.
    t3, _ = make_tester(tmp_path, wl, m, judge_hops=False)
    em.add_ingress(port, hdr, (vp ^ 0x10, vr))
    for dg in em.flush():
        t3.process_datagram(dg, 1.0)
    assert t3.stats.ingress_samples == 1 and t3.stats.hop_samples_judged == 0
    assert store.faults() == []


def test_hop_faults_are_corroborated_like_reports(tmp_path, net) -> None:
    wl, m = net
    x, port, peer, ingress, h, ref = _mid_path_misroute(wl, m)
    (arr,) = [a for a in ref.arrivals(ingress, h) if len(a[4]) == 2]
    t, store = make_tester(tmp_path, wl, m)
    t.corroborate = 2
    suspects = []
    t.on_suspect = lambda *a: suspects.append(a)
    em = ReferenceEmitter(ovs_marking=True)  # one agent: two samples, numbered 1 and 2
    for now in (5000.0, 5001.0):  # wall-clock-like times: within the window
        em.add_arrivals([arr])
        for dg in em.flush():
            t.process_datagram(dg, now)
        assert len(store.faults()) == (now == 5001.0)
    assert t.stats.uncorroborated == 1 and t.stats.hop_fault_samples == 2
    # The first sample asks for a re-probe, from the ingresses of the paths through the
    # switch the misrouted packet came from: its own ingress among them.
    ((where, hdr, alts),) = suspects
    assert where == peer and hdr == arr[1] and ingress in {e.ingress for e in alts}
