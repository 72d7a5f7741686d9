"""Per-hop samples on real patched OVS: the ingress samples OVS takes where a link arrives
carry the Verify shim as the switches before built it, and the tester judges them.

The same 2x2 grid as tests/ovs/test_tester_ovs.py (its `grid` fixture and `Run`), sFlow at
sampling 1: every packet is sampled at every switch it enters.
"""

from __future__ import annotations

import asyncio

import pytest

from cpc.tags import port_bits
from tester.detect import TYPE_P_MATCH
from tester.packet import is_report, parse_frame
from tester.sflow import decode
from tests.ovs import test_tester_ovs as lab

pytestmark = pytest.mark.ovs

grid = lab.grid  # the module-scoped lab (one ovs-vswitchd, four bridges)


def diagonal_flow(g):
    """(src, dst ip, frame, paths) of a frame whose intended paths all cross three
    switches: src's host port, a middle switch (OVS's SELECT hash picks which), the exit."""
    for src in sorted(g.topo.switches):
        for net in sorted(g.wl.prefixes):
            dst = g.egress_of(net)
            if dst[0] == src:
                continue
            ip = net + 21
            frame = g.frame(src, ip, 6000)
            ds = g.model.trace((src, 5), parse_frame(frame).header)
            if ds and all(d.kind == "egress" and len(d.hops) == 3 for d in ds):
                return src, ip, frame, [d.hops for d in ds]
    raise AssertionError("no three-switch flow in the grid")


def path_taken(g, datagrams, src, ip, paths):
    """The intended path the frame took: the one whose middle switch sampled it arriving
    over the link from src; and {port: Verify_Port} of its samples on links."""
    seen = {}
    for port, pf in hop_samples(datagrams, g.ifmap):
        if pf.header["ipv4_dst"] == ip:
            seen[port] = pf.verify_port
    (first,) = [p for p in seen if g.topo.links[p][0] == src]
    (hops,) = [h for h in paths if (h[1].dpid, h[1].in_port) == first]
    return hops, seen


def hop_samples(datagrams, ifmap):
    """[((dpid, in_port), ParsedFrame)] of the ingress samples that carry a Verify shim."""
    out = []
    for data in datagrams:
        dg = decode(data)
        for s in dg.flows:
            if is_report(s):
                continue
            pf = parse_frame(s.header)
            if pf.has_verify:
                out.append((ifmap.lookup(dg.agent, dg.sub_agent, s.input), pf))
    return out


def test_clean_network_judges_every_hop_sample_consistent(grid, tmp_path):
    """Every host to prefixes of every other host: every ingress sample on a link is
    judged, none is a fault. On one three-switch flow, OVS's sample at a switch carries the
    bits of the switches before it only: the sample is taken before the switch's own
    set_verify_port (checked against cpc.tags directly)."""
    src, ip, frame, paths = diagonal_flow(grid)
    pairs = lab.flows_between(grid)
    frames = [(s, grid.frame(s, dip, 1000 + i)) for i, (s, dip) in enumerate(pairs)]

    async def main():
        async with lab.Run(grid, tmp_path) as r:
            for s, f in frames + [(src, frame)]:
                grid.send(s, [f])
            await r.reports(len(frames) + 1)
            await asyncio.sleep(lab.FLUSH_S)  # the samples of the last hops
            return r

    r = asyncio.run(main())
    st = r.tester.stats
    assert st.hop_samples_judged > len(frames) // 2, st.as_dict()
    assert st.hop_consistent == st.hop_samples_judged and st.hop_fault_samples == 0
    assert st.hop_unjudged == 0 and st.hop_undecodable == 0
    assert st.hop_edge_samples >= len(frames) + 1  # each frame's host-port sample
    assert r.store.faults() == []
    hops, seen = path_taken(grid, r.datagrams, src, ip, paths)
    a, x, d = hops
    assert seen == {
        (x.dpid, x.in_port): port_bits(a.dpid, a.in_port),
        (d.dpid, d.in_port): port_bits(a.dpid, a.in_port) | port_bits(x.dpid, x.in_port),
    }


def test_changed_entry_mid_path_is_judged_at_the_next_switch(grid, tmp_path):
    """The middle switch's route is changed behind the controller's back (its Verify rule
    ID, with ovs-ofctl mod-flows): the next switch's per-hop sample is a fault localized
    to the switches before it; the exit's report names the whole path."""
    src, ip, frame, paths = diagonal_flow(grid)
    got = {}

    async def main():
        async with lab.Run(grid, tmp_path) as r:
            grid.send(src, [frame])
            await r.reports(1)
            await asyncio.sleep(lab.FLUSH_S)
            assert r.store.faults() == [] and r.tester.stats.hop_samples_judged == 2
            got["hops"], _ = path_taken(grid, r.datagrams, src, ip, paths)
            x = got["hops"][1]
            route = grid.route(x.dpid, ip & 0xFFFFFF00)
            text = lab.format_flow(route)
            assert f"set_verify_rule:{route.rule_id}," in text
            changed = text.replace(f"set_verify_rule:{route.rule_id},", "set_verify_rule:4242,")
            grid.ovs.ofctl("mod-flows", "--strict", grid.br(x.dpid), changed)
            grid.ovs.appctl("revalidator/purge")
            grid.send(src, [frame])
            await r.reports(1)
            await asyncio.sleep(lab.FLUSH_S)
            return r

    try:
        r = asyncio.run(main())
    finally:
        grid.restore()
    a, x, d = got["hops"]
    st = r.tester.stats
    assert st.hop_fault_samples == 1 and st.hop_samples_judged == 4, st.as_dict()
    faults = r.store.faults()
    by = {f.localization.get("sampled_at", "exit"): f for f in faults}
    assert sorted(by) == ["exit", "hop"], faults
    hop, exit_ = by["hop"], by["exit"]
    assert hop.kind == exit_.kind == TYPE_P_MATCH
    assert hop.egress == (d.dpid, d.in_port) and exit_.egress == (d.dpid, 5)
    # Before the next switch: the two switches the packet crossed, in path order.
    assert hop.localization["candidates"] == [a.dpid, x.dpid]
    assert hop.location == f"path:{a.dpid},{x.dpid}"
    assert exit_.localization["candidates"] == [a.dpid, x.dpid, d.dpid]
    assert hop.actual["verify_port"] == port_bits(a.dpid, a.in_port) | port_bits(x.dpid, x.in_port)
