"""Every probe lies in its intended area, checked without the BDD code: the reference data
plane (cpc.refdp) and Match.contains over the entries."""

from __future__ import annotations

import pytest

from cpc.model import Model
from cpc.ofctl import parse_flow
from cpc.refdp import RefDataPlane
from fuzzer.craft import Crafter
from fuzzer.engine import Fuzzer
from pazzdata.workloads import generate
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
    cands = sorted(
        (e for e in entries if e.dpid == dpid and e.table == 0), key=lambda e: -e.priority
    )
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
    assert {"sweep", "boundary", "class", "random"} <= areas


def test_small_areas_are_probed_in_every_window(net):
    """Steady state: long after the last model change, the headers an intended ACL drops
    (a tiny part of the header space, reached by no production traffic) still get probes
    in every window, from the ingress whose traffic the ACL would drop."""
    wl, model, ref, entries = net
    acls = [e for e in entries if e.dpid == 4 and e.priority == 1000]
    assert acls
    fz = Fuzzer(model, seed=5, subscribe=False, min_replan_s=0.0)
    windows = []
    for _ in range(6):
        hits = dict.fromkeys(range(len(acls)), 0)
        for _ in range(25):
            probes = fz.next_probes(80)
            fz.record(probes)
            for pr in probes:
                for k, acl in enumerate(acls):
                    hits[k] += acl.match.contains(pr.header, pr.ingress[1])
        windows.append(hits)
    # Every ACL's dropped headers are probed in every window of 2,000 probes, the first
    # (right after the plans were built) and the later ones alike.
    for w, hits in enumerate(windows):
        assert all(n > 0 for n in hits.values()), (w, hits)


def test_groups_get_their_shares_and_areas_keep_turning(net):
    wl, model, ref, entries = net
    fz = Fuzzer(
        model,
        pairs=[((1, 5), (4, 5))],
        seed=1,
        subscribe=False,
        shares={"sweep": 0.3, "boundary": 0.3, "region": 0.1, "class": 0.2, "random": 0.1},
    )
    probes = []
    for _ in range(40):
        batch = fz.next_probes(100)
        fz.record(batch)
        probes += batch
    n = len(probes)
    assert n == 4000
    want_shares = {"sweep": 0.3, "boundary": 0.3, "region": 0.1, "class": 0.2, "random": 0.1}
    by = {g: sum(p.area == g for p in probes) / n for g in want_shares}
    for g, want in want_shares.items():
        assert abs(by[g] - want) < 0.03, by
    plan = fz.state[(1, 5)].plan
    areas = [a for g in plan.areas.values() for a in g]
    assert all(a.sent > 1 for a in areas), [(a.name, a.sent) for a in areas if a.sent <= 1]
    # Areas of equal weight (every class area) get equal turns.
    sent = [a.sent for a in plan.areas["class"]]
    assert len(sent) > 1 and max(sent) - min(sent) <= 3, sent
