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


@pytest.mark.parametrize("mode", ["inline", "stage"])
def test_wide_acls_drop_their_services_from_every_destination(mode):
    """generate(wide_acls=...): the model agrees with the reference data plane header by
    header, and a denied service from a denied source is dropped at the first switch
    whatever its destination; in a stage of its own the ACL table only filters."""
    import random

    from cpc.model import Model
    from cpc.refdp import RefDataPlane
    from pazzdata.workloads import WIDE_ACL_COOKIE, generate

    wl = generate("grid", 3, 300, seed=4, rule_ids=True, acls=3, wide_acls=mode)
    model = Model(wl.topo)
    model.add_entries(wl.entries, wl.groups)
    ref = RefDataPlane(wl.topo, model.entries(), model.groups())
    rng = random.Random(9)
    nets = sorted(wl.prefixes)
    lines = [e for e in wl.entries if e.cookie == WIDE_ACL_COOKIE and e.priority]
    assert lines and all(e.table == 0 for e in lines)
    key = lambda d: (d.kind, d.egress, d.hops, d.verify_port, d.verify_rule)  # noqa: E731
    denied = 0
    for _ in range(60):
        acl = rng.choice(lines)
        f = dict((name, (v, m)) for name, v, m in acl.match.fields)
        h = {
            "eth_type": 0x0800,
            "ip_proto": 6,
            "ipv4_dst": rng.choice(nets) | rng.randrange(1, 255),
            "ipv4_src": f["ipv4_src"][0] | rng.randrange(256) if rng.random() < 0.7 else 7,
            "tp_dst": f["tp_dst"][0] if rng.random() < 0.7 else 80,
        }
        ing = next(p for p in wl.topo.edge_ports() if p[0] == acl.dpid)
        got = model.trace(ing, h)
        assert sorted(map(key, got)) == sorted(map(key, ref.send(ing, h)))
        hits = [e for e in lines if e.dpid == acl.dpid and _matches(e, h)]
        if hits and max(hits, key=lambda e: e.priority).instructions.drops():
            assert got and all(d.kind == "drop" for d in got), h
            denied += 1
    assert denied > 5
    if mode == "stage":
        assert model.part.factored  # the ACL table's elements are a filter group
    with pytest.raises(ValueError, match="wide_acls"):
        generate("grid", 2, 40, wide_acls="middle")


def _matches(entry, header) -> bool:
    return all(header.get(f, 0) & m == v for f, v, m in entry.match.fields)
