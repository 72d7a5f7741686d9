"""pazzlab.paperfaults and pazzlab.papersim against the full reference data plane."""

from __future__ import annotations

import dataclasses
import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cpc.refdp import RefDataPlane
from cpc.rules import FlowEntry, Match
from fuzzer.engine import Fuzzer
from fuzzer.hspace import Sampler
from pazzdata.workloads import ACL_PRIORITY, next_hops
from pazzlab.paperfaults import FAMILIES, PaperFault, paper_faults, paper_pair
from pazzlab.papersim import (
    FUZZ_PPS,
    MAC_DST,
    MAC_SRC,
    MODES,
    SYSTEMS,
    Net,
    Scenario,
    _geometric_times,
    _points_given_one,
    build_scenarios,
    fuzz_stream,
    production_packets,
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
    for mode in MODES:
        for system in SYSTEMS:
            r = simulate(s, system, 100, 5.0, 60.0, seed=1, fuzz_hits=[], mode=mode)
            assert r["detect_s"] is not None and r["detect_s"] <= 60
            assert 0 < r["first_s"] <= r["detect_s"]  # the first of the corroborating samples
            assert set(r["samples"]) <= {"prod", "reprobe"}
    a = next(s for s in scenarios if s.fault.family == "acl_bypass")
    for mode in MODES:
        r = simulate(a, "pazz", 100, 5.0, 60.0, seed=1, fuzz_hits=[], mode=mode)
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


# ------------------------------------------------------------------ modes U and P


def _clean(sc: Scenario) -> Scenario:
    """The same match and shares, without the hidden entries: nothing to find."""
    return Scenario(sc.net, dataclasses.replace(sc.fault, entries=[]))


def _in_match_probes(sc: Scenario, n: int, seed: int) -> list:
    rng = random.Random(seed)
    return [(5.0 + i / FUZZ_PPS, *sc.uniform_header(rng)) for i in range(n)]


def test_p_reports_every_probe_that_leaves_u_about_one_in_n(scenarios):
    """At sampling 1/1000, in P every in-match probe that leaves the network is reported
    (the exits counted by the reference alone); in U about 1 in 1000 of them. Its
    arrivals are sampled at 1/N in P and never in U. A clean network opens no fault."""
    sc = _clean(next(s for s in scenarios if s.fault.family == "misroute"))
    hits = _in_match_probes(sc, 3000, seed=8)
    exits = sum(
        d.kind == "egress" for _, ing, h in hits for d, _ in sc.ovs.send_with_headers(ing, h)
    )
    arrivals = sum(len(sc.ovs.arrivals(ing, h)) for _, ing, h in hits)
    assert exits > 2000 and arrivals > 2000  # most leave, over links
    got = {m: simulate(sc, "pazz", 1000, 5.0, 30.0, seed=3, fuzz_hits=hits, mode=m) for m in MODES}
    p, u = got["P"], got["U"]
    for r in (p, u):  # production's reports beside the probes'
        assert r["tester"]["reports"] == r["seen"]["probe_reports"] + r["seen"]["prod_reports"]
    assert p["seen"]["probe_reports"] == exits
    assert u["seen"]["probe_reports"] <= 15  # mean 3
    assert u["seen"]["hop_samples"] == 0 == u["tester"]["hop_samples_judged"]
    assert p["seen"]["hop_samples"] > 0  # probes' (about arrivals / 1000) and production's
    assert (
        p["tester"]["hop_samples_judged"]
        == p["tester"]["hop_consistent"]
        == p["seen"]["hop_samples"]
    )
    for r in got.values():
        assert r["detect_s"] is None and r["tester"]["faults_opened"] == 0


def test_per_hop_samples_of_production_judged_clean_network_no_fault(net, scenarios):
    """Production in P: reports at 1/N and every arrival sampled at 1/N, independently,
    from the same packets; the tester judges each per-hop sample consistent on a clean
    network (both modes open nothing). Counts against the reference's mean path."""
    sc = _clean(next(s for s in scenarios if s.fault.family == "misroute"))
    rng = random.Random(4)
    heads = [sc.prod_header(rng) for _ in range(400)]
    mean_arr = sum(len(sc.ovs.arrivals(i, h)) for i, h in heads) / len(heads)
    n, secs = 10, 30.0
    want_reports = sc.prod_rate * secs / n
    for mode in MODES:
        r = simulate(sc, "random", n, 5.0, secs, seed=6, mode=mode)
        assert r["detect_s"] is None and r["tester"]["faults_opened"] == 0
        rep = r["seen"]["prod_reports"]
        assert abs(rep - want_reports) < 5 * math.sqrt(want_reports) + 0.02 * want_reports
        hops = r["seen"]["hop_samples"]
        if mode == "U":
            assert hops == 0
        else:
            want = want_reports * mean_arr
            assert abs(hops - want) < 5 * math.sqrt(want) + 0.05 * want, (hops, want)
            t = r["tester"]
            assert t["hop_samples_judged"] == t["hop_consistent"] == hops


def test_p_judges_per_hop_samples_of_type_p_faults(scenarios):
    """At sampling 1/1 in P, every arrival of the first in-match production packets is
    sampled; a Type-p fault on a switch before the exit (a subprefix's rule tag, a
    misroute over a link) makes per-hop fault samples (or ones the open fault explains),
    which U never has; both open every fault."""
    hop_faults = {m: 0 for m in MODES}
    for sc in [s for s in scenarios if s.fault.type == "p"]:
        for mode in MODES:
            r = simulate(sc, "random", 1, 5.0, 30.0, seed=2, mode=mode)
            assert r["detect_s"] is not None, (sc.fault.name, mode)
            hop_faults[mode] += r["tester"]["hop_fault_samples"] + r["tester"]["hop_explained"]
    assert hop_faults["U"] == 0 and hop_faults["P"] > 0, hop_faults


def test_points_given_one_against_brute_force():
    """Which of m points are sampled given one is: each point's frequency is p / q(m), as
    drawing m independent Bernoulli(p) and keeping the draws with one gives."""
    m, p, k = 4, 0.3, 20000
    rng = random.Random(1)
    ours = [0] * m
    for _ in range(k):
        for j in _points_given_one(m, p, rng):
            ours[j] += 1
    brute, kept = [0] * m, 0
    while kept < k:
        got = [j for j in range(m) if rng.random() < p]
        if got:
            kept += 1
            for j in got:
                brute[j] += 1
    q = 1 - (1 - p) ** m
    for j in range(m):
        assert abs(ours[j] / k - p / q) < 0.02 and abs(brute[j] / k - p / q) < 0.02, (ours, brute)
    assert _points_given_one(3, 1.0, rng) == [0, 1, 2]


def test_baseline_sets_against_the_entries(net):
    """The ACL baseline's sets: every header of the deny set is matched by some ACL entry,
    no header of the uncovered set by any intended entry (brute force over the entries)."""
    rng = random.Random(2)
    acls = [e for e in net.wl.entries if e.priority == ACL_PRIORITY]
    deny, unc = Sampler(net.space, net.deny), Sampler(net.space, net.uncovered)
    for _ in range(40):
        h = deny.uniform(rng)
        assert any(e.match.contains(h, 0) for e in acls)
        h = unc.uniform(rng)
        assert not any(e.match.contains(h, 0) for e in net.wl.entries)


def test_pair_setting_faults_meet_the_pair(net):
    """The single-pair setting: the same families and counts (no held-out ones), and every
    fault has a witness among the in-match headers sent from the pair's source (the full
    reference, every SELECT bucket, against the intended one)."""
    pair = paper_pair(net.wl)
    scs = build_scenarios(net, pair=pair)
    fams = [s.fault.family for s in scs]
    assert {f: fams.count(f) for f in FAMILIES if f != "heldout"} == {
        f: n for f, n in FAMILIES.items() if f != "heldout"
    }
    src = net.wl.hosts[pair[0]]
    intended = RefDataPlane(net.wl.topo, net.wl.entries, net.wl.groups)
    rng = random.Random(9)
    for s in scs:
        assert s.probe_ingresses == [src]
        found = False
        for _ in range(300):
            ing, h = s.uniform_header(rng)
            if s.fault.type == "p" and rng.random() < 0.5:
                h = s.prod_header(rng)[1]
            ok = {(d.egress, d.verify_port, d.verify_rule) for d in intended.send(ing, h)}
            bad = [d for d in s.ref.send(ing, h) if d.kind == "egress"]
            if any((d.egress, d.verify_port, d.verify_rule) not in ok for d in bad):
                found = True
                break
        assert found, s.fault.name


def test_lab_production_is_the_simulations(net, scenarios):
    """The packets the lab replays (production_packets) lie in the simulation's production
    space of their ingress, and every fault's in-match share among them is the share the
    simulation computes from BDD counts (within 4 standard deviations)."""
    sp, rng, n = net.space, random.Random(5), 3000
    for host, ingress in sorted(net.wl.hosts.items()):
        pkts = production_packets(net.wl, host, n, rng)
        u = net.prod[ingress]
        assert (len(pkts) > 0) == (u != sp.false), host
        if not pkts:
            continue
        hdrs = [
            {
                "eth_type": 0x0800,
                "ip_proto": proto,
                "ipv4_src": src,
                "ipv4_dst": dst,
                "tp_src": sport,
                "tp_dst": dport,
                "vlan_vid": 0,
                "eth_src": MAC_SRC,
                "eth_dst": MAC_DST,
                "in_port": ingress[1],
            }
            for src, dst, proto, sport, dport in pkts
        ]
        assert all(sp.contains(u, h) for h in hdrs), host
        for sc in scenarios:
            cell = u & sp.match_bdd(sc.fault.match.fields)
            p = sp.count(cell) / sp.count(u)
            got = sum(sc.fault.match.contains(h, ingress[1]) for h in hdrs) / n
            assert abs(got - p) <= 4 * math.sqrt(p * (1 - p) / n) + 1e-9, (host, sc.fault.name)
