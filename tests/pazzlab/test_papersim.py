"""pazzlab.paperfaults and pazzlab.papersim against the full reference data plane."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cpc.refdp import RefDataPlane
from cpc.rules import FlowEntry, Match
from fuzzer.engine import Fuzzer
from pazzdata.workloads import next_hops
from pazzlab.paperfaults import FAMILIES, PaperFault, paper_faults
from pazzlab.papersim import (
    FUZZ_PPS,
    MAC_DST,
    MAC_SRC,
    Net,
    Scenario,
    _geometric_times,
    fuzz_stream,
    simulate,
)


@pytest.fixture(scope="module")
def net():
    return Net("grid9", "grid", 3, 600)


@pytest.fixture(scope="module")
def scenarios(net):
    return [Scenario(net, f) for f in paper_faults(net.wl, seed=3)]


def test_proportions(scenarios):
    fams = [s.fault.family for s in scenarios]
    assert {f: fams.count(f) for f in FAMILIES} == FAMILIES
    assert sum(s.fault.type == "p" for s in scenarios) == 10
    assert sum(s.fault.type == "a" for s in scenarios) == 18


def test_type_a_outside_production_type_p_inside(scenarios):
    for s in scenarios:
        if s.fault.type == "p":
            assert s.prod_rate > 0, s.fault.name
        elif s.fault.type in ("a", "hard"):
            assert s.prod_rate == 0, s.fault.name


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_restricted_reference_is_the_full_one(net, scenarios, data):
    """Inside a fault's match the reduced reference delivers exactly what the whole one does."""
    s = data.draw(st.sampled_from(scenarios))
    full = RefDataPlane(net.wl.topo, s.fault.entries + net.wl.entries, net.wl.groups)
    rng = random.Random(data.draw(st.integers(0, 1 << 30)))
    ing, h = s.uniform_header(rng)
    if s.prod_rate > 0 and data.draw(st.booleans()):
        ing, h = s.prod_header(rng)
    key = lambda outs: sorted((d.kind, d.egress, d.verify_port, d.verify_rule) for d in outs)  # noqa: E731
    assert key(s.ref.send(ing, h)) == key(full.send(ing, h))


def test_every_fault_changes_some_delivery(net, scenarios):
    """A brute-force witness per fault: some header in its match, from some edge port, leaves
    the faulty network at an exit or with tags the intended network never gives it."""
    intended = RefDataPlane(net.wl.topo, net.wl.entries, net.wl.groups)
    rng = random.Random(5)
    for s in scenarios:
        found = False
        # A held-out fault starts on one edge switch: only its ingresses meet it.
        first = s.fault.entries[0].dpid
        held = [p for p in net.edges if p[0] == first]
        for _ in range(200):
            ing, h = s.prod_header(rng) if s.prod_rate else s.uniform_header(rng)
            if s.fault.type == "held":
                ing = rng.choice(held)
            ok = {(d.egress, d.verify_port, d.verify_rule) for d in intended.send(ing, h)}
            bad = [d for d in s.ref.send(ing, h) if d.kind == "egress"]
            if any((d.egress, d.verify_port, d.verify_rule) not in ok for d in bad):
                found = True
                break
        if s.fault.type != "hard":
            assert found, s.fault.name


def test_geometric_stream_rate():
    rng = random.Random(1)
    ts = list(_geometric_times(0.01, 1000.0, 0.0, 200.0, rng))
    assert 1600 < len(ts) < 2400  # 10 per second expected over 200 s
    assert all(b > a for a, b in zip(ts, ts[1:], strict=False))


def test_type_p_found_by_production_alone(scenarios):
    """At 1/100 a Type-p fault's in-match production packets are sampled within seconds:
    every prober finds it the same way; a fault with no probe and no traffic is not found."""
    s = next(s for s in scenarios if s.fault.family == "subprefix")
    for system in ("pazz", "random", "atpg"):
        r = simulate(s, system, 100, 5.0, 60.0, seed=1, fuzz_hits=[], atpg=([], 1, 500.0, []))
        assert r["detect_s"] is not None and r["detect_s"] <= 60
        assert 0 < r["first_s"] <= r["detect_s"]  # the first of the corroborating samples
        assert set(r["samples"]) <= {"prod", "reprobe"}
    a = next(s for s in scenarios if s.fault.family == "acl_bypass")
    r = simulate(a, "pazz", 100, 5.0, 60.0, seed=1, fuzz_hits=[], atpg=None)
    assert r["detect_s"] is None


def test_fuzz_stream_is_the_fuzzers_own(net, scenarios):
    """The stream leaves Fuzzer.record out: the same fuzzer, recording as pazzd does, sends
    the same probes; every hit is a probe of the stream inside its fault's match, and every
    such probe is a hit (checked with Match.contains alone)."""
    faults = [s.fault for s in scenarios]
    got = fuzz_stream(net, faults, 3.0, seed=5)
    now = [0.0]
    fz = Fuzzer(net.model, seed=5, subscribe=False, clock=lambda: now[0], sampling=100)
    sent = []
    while len(sent) < 3000:
        now[0] = len(sent) / FUZZ_PPS
        probes = fz.next_probes(50)
        fz.record(probes)
        sent += probes
    assert got["probes"] == len(sent)
    assert got["sent_by_area"] == fz.sent_by_area
    for f in faults:
        want = [
            (i / FUZZ_PPS, p.ingress, p.header)
            for i, p in enumerate(sent)
            if f.match.contains(p.header, p.ingress[1])
        ]
        assert got["hits"][f.name] == want, f.name
    assert any(got["hits"][f.name] for f in faults if f.type == "a")


def test_a_suspicious_sample_is_corroborated_by_copies(scenarios):
    """The first sample of a Type-a fault has the probe's header sent again in 3N copies
    from its ingress: the second sample follows within seconds (before, a header the
    model delivers nowhere got no re-probe, and the second sample had to be another
    fuzzer probe)."""
    s = next(s for s in scenarios if s.fault.family == "adjacent")
    rng = random.Random(2)
    ing, h = s.uniform_header(rng)
    hits = [(5.0 + i / FUZZ_PPS, ing, h) for i in range(150)]  # 0.15 s of in-match probes
    r = simulate(s, "pazz", 1, 5.0, 60.0, seed=3, fuzz_hits=hits[:1])
    assert r["detect_s"] is not None and r["samples"] == {"fuzz": 1, "reprobe": 1}, r
    # At 1/100 the 150 probes give a first sample in 1 - 0.99^150 = 78 % of the runs, two
    # of them in 44 %; a run with one sample is found when one of its 300 copies is
    # sampled (95 %).
    sampled = found = by_copies = 0
    for seed in range(20):
        r = simulate(s, "pazz", 100, 5.0, 60.0, seed=seed, fuzz_hits=hits)
        if r["samples"].get("fuzz", 0):
            sampled += 1
            if r["detect_s"] is not None:
                assert r["detect_s"] - r["first_s"] <= 3.0, r
                found += 1
                by_copies += r["samples"].get("reprobe", 0) > 0
    assert sampled >= 12 and found >= sampled - 2 and by_copies >= 3, (sampled, found, by_copies)


def test_copies_of_a_header_follow_its_path_through_ecmp(net):
    """A hidden entry on one of two equal-cost branches (the route's own actions, another
    rule tag), on SSH only, so that no production traffic meets it. At sampling 1/1 each
    probe is sampled: a header whose path (one SELECT bucket per flow) crosses the entry
    is found on its first copy, every time; one whose path does not is never suspected.
    Both kinds occur, and the full reference (every bucket) is the oracle of which is
    which: a header crosses the entry iff its outcome is one the intended network never
    gives it."""
    wl, topo = net.wl, net.wl.topo
    pick = None
    for prefix, owner in sorted(wl.prefixes.items()):
        d = wl.hosts[owner][0]
        hops = next_hops(topo, d)
        a = next((a for a in sorted(hops) if len(hops[a]) == 2 and a != d), None)
        if a is not None:
            pick = prefix, d, a
            break
    prefix, d, a = pick
    s = topo.links[(a, hops[a][0])][0]
    if s == d:
        s = topo.links[(a, hops[a][1])][0]
    route = next(
        e
        for e in wl.entries
        if e.dpid == s and e.match.get("ipv4_dst") == (prefix, 0xFFFFFF00) and e.priority < 1000
    )
    m = Match.build(
        {
            "eth_type": (0x0800, 0xFFFF),
            "ipv4_dst": (prefix, 0xFFFFFF00),
            "ip_proto": (6, 0xFF),
            "tp_dst": (22, 0xFFFF),
        }
    )
    hidden = FlowEntry(s, 0, route.priority + 1, m, route.instructions, cookie=0x99)
    sc = Scenario(net, PaperFault("ecmp-0", "subprefix", "a", m, [hidden]))
    assert sc.prod_rate == 0
    intended = RefDataPlane(topo, wl.entries, wl.groups)
    ingress = wl.hosts[next(h for h, p in wl.hosts.items() if p[0] == a)]
    rng = random.Random(4)
    kinds = {True: 0, False: 0}
    for i in range(24):
        h = {
            "eth_type": 0x0800,
            "ipv4_dst": prefix | rng.randrange(1, 255),
            "ipv4_src": rng.getrandbits(32),
            "ip_proto": 6,
            "tp_dst": 22,
            "tp_src": rng.randrange(1024, 65536),
            "vlan_vid": 0,
            "eth_dst": MAC_DST,
            "eth_src": MAC_SRC,
        }
        ok = {(x.egress, x.verify_port, x.verify_rule) for x in intended.send(ingress, h)}
        every = [(x.egress, x.verify_port, x.verify_rule) for x in sc.ref.send(ingress, h)]
        assert any(o not in ok for o in every) and any(o in ok for o in every)  # 2 branches
        (mine,) = sc.ovs.send(ingress, h)
        crosses = (mine.egress, mine.verify_port, mine.verify_rule) not in ok
        kinds[crosses] += 1
        r = simulate(sc, "pazz", 1, 5.0, 30.0, seed=i, fuzz_hits=[(5.0, ingress, h)])
        if crosses:
            assert r["detect_s"] is not None, (i, r)
            assert r["samples"] == {"fuzz": 1, "reprobe": 1}, (i, r)
        else:
            assert r["detect_s"] is None and r["samples"] == {"fuzz": 1}, (i, r)
    assert min(kinds.values()) >= 4, kinds
