"""The topology's layout (pazzd.ui.layout) and its SVG (pazzd.ui.svg), checked against what
the generators know by construction: a grid's rows and columns, a fat-tree's tiers and
pods; link crossings counted by brute-force segment intersection."""

from __future__ import annotations

import itertools
import random
import xml.etree.ElementTree as ET

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cpc.topology import Topology
from pazzd.ui.layout import BOX_H, BOX_W, HOST_GAP, layout
from pazzd.ui.svg import render
from pazzdata import workloads

SVG = "{http://www.w3.org/2000/svg}"


def _cross(p1, p2, q1, q2) -> bool:
    """Do the open segments p1-p2 and q1-q2 cross (shared end points do not count)?"""
    if {p1, p2} & {q1, q2}:
        return False

    def orient(a, b, c):
        v = (b[0] - a[0]) * (c[1] - a[1]) - (b[1] - a[1]) * (c[0] - a[0])
        return (v > 1e-9) - (v < -1e-9)

    return (
        orient(p1, p2, q1) * orient(p1, p2, q2) < 0 and orient(q1, q2, p1) * orient(q1, q2, p2) < 0
    )


def _crossings(lay, links) -> int:
    segs = [(lay.switches[a], lay.switches[b]) for a, b in links]
    return sum(_cross(*s, *t) for s, t in itertools.combinations(segs, 2))


def _links(topo):
    return sorted({tuple(sorted((a[0], b[0]))) for a, b in topo.links.items()})


def _no_overlap(lay) -> None:
    for (a, pa), (b, pb) in itertools.combinations(lay.switches.items(), 2):
        assert abs(pa[0] - pb[0]) >= BOX_W or abs(pa[1] - pb[1]) >= BOX_H, (a, b, pa, pb)


def _inside(lay) -> None:
    for x, y in [*lay.switches.values(), *lay.hosts.values()]:
        assert 0 <= x <= lay.width and 0 <= y <= lay.height


@pytest.mark.parametrize("n", [2, 3, 4, 5])
def test_a_grid_is_drawn_as_its_rows_and_columns(n):
    topo, _ = workloads.grid(n)
    lay = layout(topo)
    assert lay.kind == "stress"
    pos = {(r, c): lay.switches[r * n + c + 1] for r in range(n) for c in range(n)}
    step = pos[(0, 1)][0] - pos[(0, 0)][0]
    assert step > BOX_W
    for (r, c), (x, y) in pos.items():  # within a tenth of a step of the ideal grid
        x0, y0 = pos[(0, 0)]
        assert abs(x - (x0 + c * step)) < step / 10, (r, c)
        assert abs(y - (y0 + r * step)) < step / 10, (r, c)
    assert _crossings(lay, _links(topo)) == 0
    _no_overlap(lay)
    _inside(lay)


@pytest.mark.parametrize("k", [4, 6])
def test_a_fat_tree_is_drawn_in_tiers_with_its_pods_together(k):
    topo, hosts = workloads.fattree(k)
    lay = layout(topo)
    assert lay.kind == "tiers"
    tier = {d: {"c": 2, "a": 1, "e": 0}[s.name[0]] for d, s in topo.switches.items()}
    for t in (0, 1, 2):  # one row per tier, the core on top
        ys = {lay.switches[d][1] for d in topo.switches if tier[d] == t}
        assert len(ys) == 1
    y = {t: next(lay.switches[d][1] for d in topo.switches if tier[d] == t) for t in (0, 1, 2)}
    assert y[2] < y[1] < y[0]
    for p in hosts.values():  # hosts below their edge switch
        assert lay.hosts[p][1] == y[0] + HOST_GAP
        assert abs(lay.hosts[p][0] - lay.switches[p[0]][0]) <= BOX_W
    # Pods side by side: no aggregation-edge link crosses one of another pod.
    pod = {d: (d % 100) // (k // 2) for d in topo.switches if tier[d] < 2}
    low = [(a, b) for a, b in _links(topo) if {tier[a], tier[b]} == {0, 1}]
    for (a, b), (c, d) in itertools.combinations(low, 2):
        if pod[a] != pod[c]:
            assert not _cross(lay.switches[a], lay.switches[b], lay.switches[c], lay.switches[d])
    # The barycentre sweeps never do worse than the name order they start from.
    natural = {}
    for t in (0, 1, 2):
        row = sorted((d for d in topo.switches if tier[d] == t), key=lambda d: d)
        for i, d in enumerate(row):
            natural[d] = (i * 100.0, -t * 100.0)
    base = type(lay)("x", natural, {}, 0, 0)
    assert _crossings(lay, _links(topo)) <= _crossings(base, _links(topo))
    _no_overlap(lay)
    _inside(lay)


def _random_topology(seed: int, n: int, hosts: bool) -> Topology:
    rng = random.Random(seed)
    links, free = workloads.random_links(rng, n, (0, n // 2 + 1), ports=n + 8)
    t = Topology()
    for d in range(1, n + 1):
        t.add_switch(d, f"s{d}", range(1, n + 9))
    for a, b in links:
        t.add_link(a, b)
    for d in range(1, n + 1):
        if hosts and rng.random() < 0.6:
            t.add_edge((d, free[d][0]), f"h{d}")
    return t


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 30), st.booleans())
def test_any_network_gets_a_layout_without_overlaps(seed, n, hosts):
    topo = _random_topology(seed, n, hosts)
    lay = layout(topo)
    assert set(lay.switches) == set(topo.switches) and set(lay.hosts) == set(topo.edges)
    _no_overlap(lay)
    _inside(lay)
    assert layout(topo) == lay  # deterministic


def test_a_disconnected_network_and_a_big_one_are_drawn_too():
    t = Topology()
    for d in (1, 2, 3):
        t.add_switch(d, f"s{d}", [1, 2])
    t.add_link((1, 1), (2, 1))  # s3 alone
    lay = layout(t)
    _no_overlap(lay)
    big = _random_topology(7, 160, False)
    lay = layout(big)
    assert lay.kind == "rows"
    _no_overlap(lay)
    _inside(lay)


names = st.text(
    st.characters(codec="utf-8", exclude_categories=["Cs", "Cc"]), min_size=1, max_size=12
)


@settings(max_examples=40, deadline=None)
@given(st.lists(names, min_size=2, max_size=4, unique=True), names)
def test_the_svg_names_every_part_and_escapes_names(sw_names, host):
    t = Topology()
    for i, name in enumerate(sw_names, 1):
        t.add_switch(i, name, [1, 2, 3])
    for i in range(1, len(sw_names)):
        t.add_link((i, 2), (i + 1, 1))
    t.add_edge((1, 3), host)
    root = ET.fromstring(render(t))
    groups = {g.get("class"): [] for g in root.iter(f"{SVG}g")}
    for g in root.iter(f"{SVG}g"):
        groups[g.get("class")].append(g)
    assert {g.get("data-name") for g in groups["switch"]} == set(sw_names)
    assert {g.get("data-dpid") for g in groups["switch"]} == {str(d) for d in t.switches}
    (h,) = groups["host"]
    assert (h.get("data-name"), h.get("data-port")) == (host, "1:3")
    links = {
        (e.get("data-a"), e.get("data-b"))
        for e in root.iter(f"{SVG}line")
        if e.get("class") == "link"
    }
    assert links == {(f"{i}:2", f"{i + 1}:1") for i in range(1, len(sw_names))}
    for layer in ("overlay", "callouts"):
        assert root.find(f".//{SVG}g[@id='{layer}']") is not None
