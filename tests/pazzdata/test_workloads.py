"""pazzdata.workloads.fattree against the k-ary fat-tree's arithmetic."""

from __future__ import annotations

from collections import deque

import pytest

from pazzdata.workloads import fattree


def _dist(links, src):
    adj = {}
    for (a, _), (b, _) in links.items():
        adj.setdefault(a, set()).add(b)
    dist, q = {src: 0}, deque([src])
    while q:
        u = q.popleft()
        for v in adj.get(u, ()):
            if v not in dist:
                dist[v] = dist[u] + 1
                q.append(v)
    return dist


@pytest.mark.parametrize("k", [4, 8, 16])
def test_fattree_shape(k):
    topo, hosts = fattree(k)
    assert len(topo.switches) == 5 * k * k // 4
    assert len(hosts) == k**3 // 4
    assert len(topo.links) == 2 * (k**3 // 2)  # both directions of every cable
    for d in topo.switches:  # every port of every switch is cabled or holds a host
        used = {p for (s, p) in topo.links if s == d} | {p for s, p in hosts.values() if s == d}
        assert used == set(range(1, k + 1)), d
    edge = sorted({s for s, _ in hosts.values()})
    assert len(edge) == k * k // 2
    dist = _dist(topo.links, edge[0])
    assert len(dist) == len(topo.switches)  # connected
    assert max(dist[e] for e in edge) == 4  # edge - agg - core - agg - edge


def test_small_fattrees_keep_their_dpids():
    topo, _ = fattree(4)
    assert sorted(topo.switches) == [100, 101, 102, 103] + list(range(200, 208)) + list(
        range(300, 308)
    )
