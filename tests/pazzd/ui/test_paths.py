"""The actual path rebuilt from a report's Verify_Port (pazzd.ui.paths), against a brute
force: every simple path of the whole topology from every edge port to the egress, its
ports' bits ORed with the hash of docs/verify-header.md (cpc.tags.port_bits, itself checked
against OVS's jhash vectors). On small random networks the chains found are exactly the
paths whose filter is the packet's; on the evaluation networks (4x4 and 8x8 grids, the
k=4 fat-tree) the packet's own path is always among them, every chain is a real path with
that filter, and one chain is never claimed where several fit."""

from __future__ import annotations

import random

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cpc.tags import port_bits
from cpc.topology import Topology
from pazzd.faulttext import path_lines
from pazzd.ui.paths import MAX_CHAINS, PathFinder, actual_path_json
from pazzdata.workloads import fattree, grid, next_hops, random_links


def _filter(hops, bits=port_bits) -> int:
    v = 0
    for d, i, _ in hops:
        v |= bits(d, i)
    return v


def folded_bits(dpid: int, port: int) -> int:
    """The real bits folded into 9 positions: a small filter where paths collide often."""
    v = 0
    for i in range(32):
        if port_bits(dpid, port) >> i & 1:
            v |= 1 << (i % 9)
    return v


def all_paths(topo: Topology, egress, at_hop: bool) -> list[tuple]:
    """Every path that enters at an edge port, enters each switch once and leaves by
    egress (at_hop: arrives at egress over its link); no Bloom filter involved."""
    if at_hop:
        last, last_out = topo.links[egress]
        barred = {egress[0]}
    else:
        (last, last_out), barred = egress, set()
    out = []

    def walk(d, inp, seen, hops):
        if d == last:
            out.append((*hops, (d, inp, last_out)))
            return
        for q in sorted(topo.switches[d].ports):
            peer = topo.links.get((d, q))
            if peer is not None and peer[0] not in seen and peer[0] not in barred:
                walk(peer[0], peer[1], seen | {peer[0]}, [*hops, (d, inp, q)])

    for s in sorted(topo.edges):
        if s[0] not in barred:
            walk(s[0], s[1], {s[0]}, [])
    return out


def random_network(rng: random.Random) -> Topology:
    n = rng.randint(2, 7)
    links, free = random_links(rng, n, (0, n), ports=8)
    topo = Topology()
    for d in range(1, n + 1):
        topo.add_switch(d, f"s{d}", range(1, 9))
    for a, b in links:
        topo.add_link(a, b)
    hosted = rng.sample(range(1, n + 1), rng.randint(1, n))
    for d in hosted:
        for _ in range(min(rng.randint(1, 2), len(free[d]))):
            topo.add_edge((d, free[d].pop()), f"h{d}-{len(topo.edges)}")
    return topo


def _check_chain(topo: Topology, chain, vp: int, egress, at_hop: bool) -> None:
    """A chain is a real path of the topology with exactly this filter."""
    assert chain[0][:2] in topo.edges
    seen = set()
    for (d, _i, o), (d2, i2, _) in zip(chain, chain[1:], strict=False):
        assert topo.links[(d, o)] == (d2, i2)
    for d, _, _ in chain:
        assert d not in seen
        seen.add(d)
    if at_hop:
        assert chain[-1][:2] == egress and chain[-1][2] is None
        assert _filter(chain[:-1]) == vp
    else:
        assert (chain[-1][0], chain[-1][2]) == egress
        assert _filter(chain) == vp


@settings(
    max_examples=300, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow]
)
@given(seed=st.integers(0, 2**32 - 1), at_hop=st.booleans(), small=st.booleans())
def test_chains_are_exactly_the_paths_with_the_filter(seed, at_hop, small):
    """small: a 9-bit filter, where ambiguity is common; else the real 32 bits."""
    bits = folded_bits if small else port_bits
    rng = random.Random(seed)
    topo = random_network(rng)
    ends = sorted(topo.links) if at_hop else sorted(topo.edges)
    if not ends:
        return
    egress = rng.choice(ends)
    paths = all_paths(topo, egress, at_hop)
    if not paths:
        return
    true = rng.choice(paths)
    vp = _filter(true, bits)
    fault = {
        "actual": {"verify_port": vp, "verify_rule": 1},
        "egress": list(egress),
        "localization": {"sampled_at": "hop"} if at_hop else {},
    }
    fitting = {p for p in paths if _filter(p, bits) == vp}
    if at_hop:  # where the sample was taken is the answer's last hop, not in the filter
        fitting = {(*p, (egress[0], egress[1], None)) for p in fitting}
    ans = actual_path_json(PathFinder(topo, bits=bits), fault)
    got = {tuple(tuple(h) for h in c["hops"]) for c in ans["chains"]}
    if len(fitting) > MAX_CHAINS:  # said as "more", nothing claimed solid
        assert ans["more"] and ans["status"] == "ambiguous" and ans["solid"] == []
        return
    assert not ans["more"]
    assert ans["chain_count"] == len(fitting)
    if len(fitting) <= 8:
        assert got == fitting
    assert ans["status"] == ("unique" if len(fitting) == 1 else "ambiguous")
    if ans["status"] == "unique":
        want = true if not at_hop else (*true, (egress[0], egress[1], None))
        assert got == {want}
        assert {tuple(p) for p in ans["solid"]} == {h[:2] for h in want}
        assert ans["candidate"] == []
    on_chain = {h[:2] for p in fitting for h in p}
    common = set.intersection(*({h[:2] for h in p} for p in fitting))
    assert {tuple(p) for p in ans["solid"]} == common
    assert {tuple(p) for p in ans["candidate"]} == on_chain - common
    in_filter = {p for p in [(d, q) for d in topo.switches for q in topo.switches[d].ports]}
    in_filter = {p for p in in_filter if vp & bits(*p) == bits(*p)}
    assert {tuple(p) for p in ans["possible"]} == in_filter - on_chain


def _random_walk(rng: random.Random, topo: Topology) -> tuple | None:
    """A misroute-like path: from a random edge port, random links without coming back to
    a switch, out by an edge port of a switch reached."""
    start = rng.choice(sorted(topo.edges))
    d, inp, seen, hops = start[0], start[1], {start[0]}, []
    for _ in range(64):
        exits = [q for q in sorted(topo.switches[d].ports) if (d, q) in topo.edges]
        if exits and hops and rng.random() < 0.3:
            q = rng.choice(exits)
            return (*hops, (d, inp, q))
        nxt = [
            (q, topo.links[(d, q)])
            for q in sorted(topo.switches[d].ports)
            if (d, q) in topo.links and topo.links[(d, q)][0] not in seen
        ]
        if not nxt:
            return (*hops, (d, inp, rng.choice(exits))) if exits else None
        q, (d2, p2) = rng.choice(nxt)
        hops.append((d, inp, q))
        d, inp = d2, p2
        seen.add(d)
    return None


def _shortest(rng: random.Random, topo: Topology) -> tuple:
    """A path as destination routing takes it: shortest, ties broken at random."""
    a, b = rng.sample(sorted(topo.edges), 2)
    hops_to = next_hops(topo, b[0])
    d, inp, hops = a[0], a[1], []
    while d != b[0]:
        q = rng.choice(hops_to[d])
        hops.append((d, inp, q))
        d, inp = topo.links[(d, q)]
    return (*hops, (d, inp, b[1]))


def test_the_packets_path_is_found_on_the_evaluation_networks():
    rng = random.Random(7)
    tally = {}
    for name, topo in (
        ("grid4", grid(4)[0]),
        ("fattree4", fattree(4)[0]),
        ("grid8", grid(8)[0]),
    ):
        finder = PathFinder(topo)
        counts = {"unique": 0, "ambiguous": 0, "none": 0, "incomplete": 0}
        for i in range(150):
            path = _shortest(rng, topo) if i % 2 else _random_walk(rng, topo)
            if path is None:
                continue
            vp = _filter(path)
            egress = (path[-1][0], path[-1][2])
            res = finder.chains(vp, egress)
            for c in res.chains:
                _check_chain(topo, c, vp, egress, False)
            if res.complete:
                assert path in res.chains, (name, path)
            else:
                counts["incomplete"] += 1
            ans = actual_path_json(finder, {"actual": {"verify_port": vp}, "egress": list(egress)})
            counts[ans["status"]] += 1
            if ans["status"] == "unique":
                assert [tuple(h) for h in ans["chains"][0]["hops"]] == list(path)
        tally[name] = counts
    print(tally)
    # Shortest paths on the grid of 16 and the fat-tree come out unique most of the time.
    assert tally["grid4"]["unique"] > 60 and tally["fattree4"]["unique"] > 60, tally


def test_exact_on_the_3x3_grid():
    """The brute force on a grid of 9 with the real hash, long detours included."""
    topo = grid(3)[0]
    finder = PathFinder(topo)
    rng = random.Random(3)
    ambiguous = 0
    for egress in sorted(topo.edges):
        paths = all_paths(topo, egress, False)
        for true in rng.sample(paths, 40):
            vp = _filter(true)
            fitting = {p for p in paths if _filter(p) == vp}
            res = finder.chains(vp, egress)
            assert res.complete and set(res.chains) == fitting
            ambiguous += len(fitting) > 1
    print(f"{ambiguous} of {9 * 40} filters fit more than one path")


def test_no_chain_and_no_report():
    topo, _ = grid(2)
    finder = PathFinder(topo)
    # The bits of one port in the middle only: no chain enters at an edge port.
    vp = port_bits(2, 4)
    ans = actual_path_json(finder, {"actual": {"verify_port": vp}, "egress": [2, 5]})
    assert ans["status"] == "none" and ans["chains"] == [] and ans["solid"] == []
    assert [2, 4] in ans["possible"]
    assert actual_path_json(finder, {"actual": None, "egress": None}) is None
    assert actual_path_json(finder, {"actual": {"verify_port": vp}, "egress": None}) is None


def test_pazzctl_prints_the_path():
    topo, _ = grid(2)
    finder = PathFinder(topo)
    hops = ((1, 5, 2), (2, 4, 5))  # h1 in at s1, over the link to s2, out to h2
    f = {"actual": {"verify_port": _filter(hops)}, "egress": [2, 5]}
    lines = path_lines(actual_path_json(finder, f))
    assert lines == ["actual path  s1(5→2) s2(4→5)"]
    two = {"status": "ambiguous", "more": False, "chain_count": 2, "verify_port": "0x1"}
    two["chains"] = [{"text": "A"}, {"text": "B"}]
    assert path_lines(two)[0].endswith("ambiguous: 2 paths fit Verify_Port 0x1")
    assert path_lines(None) == []
