"""Valid headers, ranges and the uniform BDD sampler."""

from __future__ import annotations

import random
from collections import Counter
from itertools import product

import pytest

from cpc.fields import FIELD_NAMES
from cpc.space import HeaderSpace
from fuzzer.hspace import (
    Sampler,
    canonicalize,
    is_valid,
    range_bdd,
    range_prefixes,
    valid_headers,
)


@pytest.fixture(scope="module")
def space():
    return HeaderSpace()


def test_range_prefixes_cover_exactly():
    rng = random.Random(3)
    for _ in range(200):
        lo = rng.randrange(0, 1 << 10)
        hi = rng.randrange(lo, 1 << 10)
        vals = set()
        for v, m in range_prefixes(lo, hi, 10):
            vals |= {x for x in range(1 << 10) if x & m == v}
        assert vals == set(range(lo, hi + 1))


def test_valid_predicate_agrees_with_canonicalize(space):
    v = valid_headers(space)
    rng = random.Random(1)
    for _ in range(3000):
        h = {
            f: rng.getrandbits(w)
            for f, w in (
                ("ipv4_dst", 32),
                ("ipv4_src", 32),
                ("ip_proto", 8),
                ("tp_dst", 16),
                ("tp_src", 16),
                ("eth_type", 16),
                ("vlan_vid", 13),
                ("eth_dst", 48),
                ("eth_src", 48),
            )
        }
        if rng.random() < 0.5:
            h["eth_type"] = 0x0800
        if rng.random() < 0.5:
            h["ip_proto"] = rng.choice((6, 17))
        c = canonicalize(h)
        assert space.contains(v, c) and is_valid(c)
        assert space.contains(v, h) == (c == h)


def test_sampler_total_is_exact(space):
    u = (space.field_bdd("ip_proto", 6, 0xFF) | space.field_bdd("ip_proto", 17, 0xFF)) & range_bdd(
        space, "tp_dst", 100, 1999
    )
    s = Sampler(space, u & valid_headers(space))
    per = 2**32 * 2**32 * 2**16 * 2**95 * 4097  # dst, src, tp_src, MACs (unicast source), vlan
    assert s.total == 2 * 1900 * per
    assert Sampler(space, space.false).total == 0
    assert Sampler(space, space.true).total == 2 ** sum(
        w
        for _, w in (
            ("a", 32),
            ("b", 32),
            ("c", 8),
            ("d", 16),
            ("e", 16),
            ("f", 16),
            ("g", 13),
            ("h", 48),
            ("i", 48),
        )
    )


def test_sampler_is_uniform_chi_square(space):
    """A 60-header set with an irregular shape; chi-square over 30k draws."""
    u = space.false
    cells = []
    for proto, port in product((1, 6, 17, 47), range(15)):
        if (proto * 7 + port) % 5 == 0:
            continue
        cells.append((proto, 1000 + port * 3))
    for proto, port in cells:
        u = u | (space.field_bdd("ip_proto", proto, 0xFF) & space.field_bdd("tp_dst", port, 0xFFFF))
    # Pin every other field so that the set is exactly the cells.
    for f in FIELD_NAMES:
        if f not in ("ip_proto", "tp_dst"):
            u = u & space.field_bdd(
                f,
                0,
                (
                    1
                    << {
                        "ipv4_dst": 32,
                        "ipv4_src": 32,
                        "tp_src": 16,
                        "eth_type": 16,
                        "vlan_vid": 13,
                        "eth_dst": 48,
                        "eth_src": 48,
                    }[f]
                )
                - 1,
            )
    s = Sampler(space, u)
    assert s.total == len(cells)
    rng = random.Random(7)
    n = 30000
    counts = Counter()
    for _ in range(n):
        h = s.uniform(rng)
        assert space.contains(u, h)
        counts[(h["ip_proto"], h["tp_dst"])] += 1
    assert set(counts) == set(cells)
    exp = n / len(cells)
    chi2 = sum((counts[c] - exp) ** 2 / exp for c in cells)
    k = len(cells) - 1
    # chi-square critical value at p = 0.001 (Wilson-Hilferty approximation).
    z = 3.09
    crit = k * (1 - 2 / (9 * k) + z * (2 / (9 * k)) ** 0.5) ** 3
    assert chi2 < crit, (chi2, crit)


def test_sampler_index_is_a_bijection(space):
    u = range_bdd(space, "tp_dst", 3, 40) & space.field_bdd("ip_proto", 6, 0xFE)
    for f in ("ipv4_dst", "ipv4_src", "tp_src", "eth_type", "vlan_vid", "eth_dst", "eth_src"):
        u = u & space.field_bdd(
            f,
            0,
            (
                1
                << {
                    "ipv4_dst": 32,
                    "ipv4_src": 32,
                    "tp_src": 16,
                    "eth_type": 16,
                    "vlan_vid": 13,
                    "eth_dst": 48,
                    "eth_src": 48,
                }[f]
            )
            - 1,
        )
    s = Sampler(space, u)
    got = {(h["ip_proto"], h["tp_dst"]) for h in (s.header(r) for r in range(s.total))}
    assert got == {(p, t) for p in (6, 7) for t in range(3, 41)}
    assert s.paths() == sum(1 for _ in space.cubes(u))


def test_spread_draws_stay_in_set_and_spread(space):
    u = valid_headers(space) & ~space.field_bdd("ipv4_dst", 0x0A000000, 0xFF000000)
    s = Sampler(space, u)
    gen = s.spread(random.Random(2))
    tops = Counter()
    for _ in range(256):
        h = next(gen)
        assert space.contains(u, h)
        tops[h["ipv4_dst"] >> 28] += 1
    # 16 top nibbles, 256 draws: a golden-ratio walk gives each nibble 16 +- 2 draws.
    assert all(12 <= tops[i] <= 20 for i in range(16)), tops
