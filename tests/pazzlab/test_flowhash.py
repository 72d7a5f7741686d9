"""pazzlab.flowhash: one SELECT bucket per flow, checked against every outcome of cpc.refdp."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cpc.refdp import RefDataPlane
from cpc.rules import Group
from pazzdata.workloads import generate
from pazzlab.flowhash import select_bucket


@pytest.fixture(scope="module")
def wl():
    return generate("fattree", 4, 400, seed=1)


def key(d):
    return (d.kind, d.egress, d.hops, d.verify_port, d.verify_rule)


def header(wl, rng: random.Random, proto: int | None = None) -> dict[str, int]:
    net = rng.choice(sorted(wl.prefixes))
    return {
        "eth_type": 0x0800,
        "ipv4_dst": net | rng.randrange(1, 255),
        "ipv4_src": rng.getrandbits(32),
        "ip_proto": proto or rng.choice((6, 17)),
        "tp_dst": rng.choice((80, 443, 22)),
        "tp_src": rng.randrange(1024, 65536),
        "vlan_vid": 0,
        "eth_dst": rng.getrandbits(48),
        "eth_src": rng.getrandbits(48),
    }


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 1 << 30))
def test_one_outcome_per_flow_among_every_outcome(wl, seed):
    """The network has SELECT groups and single outputs only: a flow leaves by exactly one
    of the outcomes the full reference lists, the same one every time it is sent, and the
    UDP ports (outside OVS's hash) do not change it."""
    rng = random.Random(seed)
    ingress = rng.choice(sorted(wl.hosts.values()))
    h = header(wl, rng)
    full = {key(d) for d in RefDataPlane(wl.topo, wl.entries, wl.groups).send(ingress, h)}
    ovs = RefDataPlane(wl.topo, wl.entries, wl.groups, select=select_bucket)
    (first,) = ovs.send(ingress, h)
    assert key(first) in full
    assert not first.alternative
    for _ in range(5):
        assert [key(d) for d in ovs.send(ingress, dict(h))] == [key(first)]
    if h["ip_proto"] == 17:
        other = dict(h, tp_src=rng.randrange(1024, 65536), tp_dst=rng.randrange(1, 65536))
        assert [key(d) for d in ovs.send(ingress, other)] == [key(first)]


def test_flows_spread_over_every_bucket_of_the_first_group(wl):
    """From an edge switch to another pod, the route's group has two buckets (the two
    aggregation switches): TCP flows that differ in their source port use both, about
    evenly; the full reference's first hops are the oracle."""
    rng = random.Random(7)
    full_dp = RefDataPlane(wl.topo, wl.entries, wl.groups)
    ovs = RefDataPlane(wl.topo, wl.entries, wl.groups, select=select_bucket)
    checked = 0
    for ingress in sorted(wl.hosts.values())[::3]:
        h = header(wl, rng, proto=6)
        buckets = {d.hops[0].out_port for d in full_dp.send(ingress, h)}
        if len(buckets) < 2:
            continue
        used: dict[int, int] = {}
        for _ in range(80):
            (d,) = ovs.send(ingress, dict(h, tp_src=rng.randrange(1024, 65536)))
            used[d.hops[0].out_port] = used.get(d.hops[0].out_port, 0) + 1
        assert set(used) == buckets, (ingress, used)
        assert min(used.values()) >= 80 / len(buckets) / 2, (ingress, used)
        checked += 1
    assert checked >= 3


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_equal_groups_pick_the_same_index_and_hash_is_symmetric(data):
    """OVS hashes with basis 0 on every switch and picks by the hash and the buckets alone:
    groups with as many buckets pick the same index wherever they are; swapping source
    and destination does not change the pick (the hash XORs each pair)."""
    n = data.draw(st.integers(1, 6))
    a = Group(1, 1, "select", tuple((("output", p),) for p in range(1, n + 1)))
    b = Group(9, 4, "select", tuple((("output", p),) for p in range(10, n + 10)))
    u32, u48, u16 = (
        st.integers(0, (1 << 32) - 1),
        st.integers(0, (1 << 48) - 1),
        st.integers(0, 65535),
    )
    h = {
        "eth_type": 0x0800,
        "ipv4_src": data.draw(u32),
        "ipv4_dst": data.draw(u32),
        "ip_proto": data.draw(st.sampled_from((6, 17, 132, 1))),
        "tp_src": data.draw(u16),
        "tp_dst": data.draw(u16),
        "vlan_vid": 0,
        "eth_src": data.draw(u48),
        "eth_dst": data.draw(u48),
    }
    i = select_bucket(1, a, h)
    assert 0 <= i < n and select_bucket(9, b, h) == i
    swapped = dict(
        h,
        ipv4_src=h["ipv4_dst"],
        ipv4_dst=h["ipv4_src"],
        tp_src=h["tp_dst"],
        tp_dst=h["tp_src"],
        eth_src=h["eth_dst"],
        eth_dst=h["eth_src"],
    )
    assert select_bucket(4, b, swapped) == select_bucket(1, a, swapped) == i
