"""Every probe lies in its intended area, checked without the BDD code: the reference data
plane (cpc.refdp) and Match.contains over the entries."""

from __future__ import annotations

import pytest

from cpc.model import Model
from cpc.ofctl import parse_flow
from cpc.refdp import RefDataPlane
from cpc.workloads import generate
from fuzzer.craft import Crafter
from fuzzer.engine import Fuzzer
from tester.packet import parse_frame

EXTRA = "priority=50,ip,nw_dst=192.168.0.0/16,actions=output:5"  # only on the exit switch


@pytest.fixture(scope="module")
def net():
    wl = generate("grid", 2, 300, rule_ids=True)
    extra = parse_flow(EXTRA, 4, "add").entry()
    entries = wl.entries + [extra]
    model = Model(wl.topo)
    model.add_entries(entries, wl.groups)
    ref = RefDataPlane(wl.topo, entries, wl.groups)
    return wl, model, ref, entries


def _exit_outputs(entries, groups, dpid, h) -> set[int]:
    """Ports the exit switch's table 0 sends h to (linear scan, highest priority first)."""
    cands = sorted((e for e in entries if e.dpid == dpid and e.table == 0),
                   key=lambda e: -e.priority)  # fmt: skip
    for e in cands:
        if e.match.contains(h, 1):
            outs = set(e.instructions.outputs())
            for gid in e.instructions.groups():
                for g in groups:
                    if g.dpid == dpid and g.group_id == gid:
                        outs |= {a[1] for b in g.buckets for a in b if a[0] == "output"}
            return outs
    return set()


def test_probes_lie_in_their_areas(net):
    wl, model, ref, entries = net
    fz = Fuzzer(model, seed=3, subscribe=False)
    crafter = Crafter()
    areas = set()
    for _ in range(40):
        probes = fz.next_probes(64)
        fz.record(probes)
        for pr in probes:
            areas.add(pr.area)
            # A real packet: the tester's frame parser reads the same header back.
            assert parse_frame(crafter.frame(pr.header, pr.seq)).header == pr.header
            outs = ref.send(pr.ingress, pr.header)
            delivered = {d.egress for d in outs if d.kind == "egress"}
            if pr.area == "sweep":
                ingress, egress = pr.pair
                assert egress not in delivered
                assert egress[1] in _exit_outputs(entries, wl.groups, egress[0], pr.header)
            else:  # boundary and random: outside everything delivered from the ingress
                assert not delivered, (pr.area, pr.header, outs)
    assert {"sweep", "boundary", "random"} <= areas


def test_sweep_comes_first_and_is_exhausted(net):
    wl, model, ref, entries = net
    fz = Fuzzer(model, pairs=[((1, 5), (4, 5))], seed=1, subscribe=False)
    probes = fz.next_probes(8)
    fz.record(probes)
    assert [p.area for p in probes][:3] == ["sweep"] * 3
    for _ in range(20):
        fz.record(fz.next_probes(64))
    cov = fz.coverage((1, 5), (4, 5))
    assert cov["areas_exhausted"] >= 1  # the sweep area's classes are all probed
    assert 0 < cov["coverage_ratio"] <= 1
