"""fuzzer.plan.field_intervals and RegionEdges against brute force over the covered prefixes."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from cpc.rules import Match
from cpc.space import HeaderSpace
from fuzzer.hspace import CountCache, valid_headers
from fuzzer.region import RegionEdges, field_intervals

IP = (0x0800, 0xFFFF)

prefixes = st.lists(
    st.tuples(st.integers(8, 30), st.integers(0, (1 << 32) - 1)), min_size=1, max_size=12
)


def _matches(pfx):
    out = []
    for k, addr in pfx:
        mask = (0xFFFFFFFF << (32 - k)) & 0xFFFFFFFF
        out.append(Match.build({"eth_type": IP, "ipv4_dst": (addr & mask, mask)}))
    return out


def _merged(pfx):
    """The prefixes' address ranges, merged by hand."""
    rs = []
    for k, addr in pfx:
        size = 1 << (32 - k)
        lo = addr & ~(size - 1) & 0xFFFFFFFF
        rs.append((lo, lo + size - 1))
    rs.sort()
    out = []
    for lo, hi in rs:
        if out and lo <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return out


def _covered(space, ms):
    return space.union(space.match_bdd(m.fields) for m in ms) & valid_headers(space)


@settings(max_examples=40, deadline=None)
@given(prefixes)
def test_intervals_are_the_merged_prefixes(pfx):
    sp = HeaderSpace()
    assert field_intervals(sp, _covered(sp, _matches(pfx)), "ipv4_dst") == _merged(pfx)


@settings(max_examples=15, deadline=None)
@given(prefixes, st.integers(0, 1 << 30))
def test_region_probes_lie_outside_and_reach_every_distance(pfx, seed):
    sp = HeaderSpace()
    ms = _matches(pfx)
    region = RegionEdges(sp, _covered(sp, ms), CountCache(sp), random.Random(seed))
    merged = _merged(pfx)
    seen = set()
    for _ in range(3000):
        h = region.draw()
        if h is None:
            continue
        assert not any(m.contains(h, 1) for m in ms), h  # outside every covered prefix
        if h["eth_type"] == 0x0800:
            d = h["ipv4_dst"]
            dist = min(min(abs(d - lo), abs(d - hi)) for lo, hi in merged)
            seen.add(dist.bit_length() - 1)  # stratum j: 2^j to 2^(j+1) - 1 away
    # The widest gap next to the region has room for the strata 0..c: each up to c - 2
    # (nearer to this edge than to the gap's other end) is probed.
    gaps = [b - a - 1 for (_, a), (b, _) in zip(merged, merged[1:], strict=False)]
    gaps += [merged[0][0], (1 << 32) - 1 - merged[-1][1]]
    c = max(gaps).bit_length() - 1
    assert set(range(c - 1)) <= seen, (sorted(seen), c)


def test_a_block_of_adjacent_routes_has_two_edges():
    """4,096 adjacent /24s are one interval: the probes right below and above it come
    often, where per-route edges would give each of the 8,192 edges one turn in 8,192."""
    sp = HeaderSpace()
    pfx = [(24, 0x0A000000 + (i << 8)) for i in range(4096)]
    ms = _matches(pfx)
    region = RegionEdges(sp, _covered(sp, ms), CountCache(sp), random.Random(1))
    lo, hi = 0x0A000000, 0x0A000000 + (4096 << 8) - 1
    below = above = 0
    for _ in range(2000):
        h = region.draw()
        if h is not None and h["eth_type"] == 0x0800:
            below += lo - (1 << 12) <= h["ipv4_dst"] < lo  # a /20 just below the block
            above += hi < h["ipv4_dst"] <= hi + (1 << 12)
    assert below > 100 and above > 100, (below, above)
