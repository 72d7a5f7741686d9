"""The delivered group's mask edges (fuzzer.region.MaskEdges): probes where a prefix
installed with a wrong mask forwards otherwise. Checked by brute force: over the addresses
of a small field, every mask slip of a prefix meets one of its targets; on random
networks, every mask fault that random headers from the hosts can reveal by its tags is
revealed by a target's probe (the reference data plane with the fault against the
model); in the plan, the area gets its turns and every probe of it lies in a target."""

from __future__ import annotations

import dataclasses
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cpc.model import Model
from cpc.rules import Match
from fuzzer.engine import Fuzzer
from fuzzer.hspace import CountCache, Sampler, valid_headers
from fuzzer.plan import shares_with_delivered
from fuzzer.region import MASK_SLIP, MaskEdges, _mask_targets
from pazzdata.detectnet import FaultSpec, mask, random_network
from pazzlab.sim import detects

W = 10  # a field this wide is small enough to list


def _block(value: int, n: int, width: int = W) -> set[int]:
    size = 1 << (width - n)
    lo = value & ~(size - 1)
    return set(range(lo, lo + size))


def _pmask(n: int, width: int = W) -> int:
    return ((1 << width) - 1) ^ ((1 << (width - n)) - 1)


def _winners(entries, width=W):
    """The entry each address of the field goes to: the longest prefix that holds it, the
    earlier on a tie (an entry keeps the priority of its intended length: (prio, lo, n))."""
    out = {}
    blocks = [_block(value, n, width) for _, value, n in entries]
    for a in range(1 << width):
        best = None
        for k, (prio, _, _) in enumerate(entries):
            if a in blocks[k] and (best is None or prio > entries[best][0]):
                best = k
        out[a] = best
    return out


# other prefixes: (length relative to the prefix's, address bits)
others_st = st.lists(
    st.tuples(st.integers(-MASK_SLIP, MASK_SLIP + 1), st.integers(0, (1 << W) - 1)), max_size=6
)


@settings(max_examples=400, deadline=None)
@given(
    st.integers(0, W),
    st.integers(0, (1 << W) - 1),
    st.integers(-MASK_SLIP, MASK_SLIP),
    others_st,
)
def test_every_visible_mask_slip_meets_a_target(n, addr, d, others):
    _check_slip(n, addr, d, others)


def _check_slip(n, addr, d, others, near_only=True, width=W):
    """A prefix typed d bits narrower (d < 0: wider) among other prefixes (others:
    (length relative to n, address)): wherever the slip changes which entry an address
    goes to (longest match wins; the typed entry keeps its intended priority and loses
    ties, as a later entry does), one of the prefix's targets holds such an address, so
    the target's uniform draws find it. Returns whether anything changed."""
    k = n + d
    if d == 0 or not 0 <= k <= width:
        return False
    value = addr & _pmask(n, width)
    near = (1 << min(width, width - n + MASK_SLIP)) - 1  # the block MASK_SLIP levels up
    rest = []
    for dm, a in others:
        m = min(width, max(0, n + dm))
        rest.append((m, (value ^ (a & near) if near_only else a) & _pmask(m, width), m))
    right = _winners([*rest, (n, value, n)], width)
    typed = _winners([*rest, (n, value & _pmask(k, width), k)], width)
    changed = {a for a in right if right[a] != typed[a]}
    targets = [
        _block(v, bin(m).count("1"), width)
        for v, m in _mask_targets(width, value, _pmask(n, width))
    ]
    if changed:
        assert any(t & changed for t in targets), (n, k, value, rest)
    if not rest:  # alone, a level-1 target lies wholly inside what changed
        assert any(t <= changed for t in targets[:2])
    return bool(changed)


def test_every_slip_beside_one_other_prefix_meets_a_target():
    """All of them in a 6-bit field: every prefix, every slip, beside every other prefix
    (one other prefix can hide the nearest target: a sibling or a half of the same
    priority or longer)."""
    visible = 0
    for n in range(7):
        for value in range(0, 64, 1 << (6 - n)):
            for d in range(-MASK_SLIP, MASK_SLIP + 1):
                for m in range(7):
                    for a in range(0, 64, 1 << (6 - m)):
                        visible += _check_slip(n, value, d, [(m - n, a)], False, 6)
    assert visible > 1000


def _mask_faults(net, rng, count):
    t1 = [e for e in net.entries if e.table == 1]
    for _ in range(count):
        e = rng.choice(t1)
        v, m = e.match.get("ipv4_dst")
        n = bin(m).count("1")
        k = max(8, min(32, n + rng.choice((-3, -2, -1, 1, 2))))
        if k == n:
            continue
        fields = {f: (val, mk) for f, val, mk in e.match.fields}
        fields["ipv4_dst"] = (v & mask(k), mask(k))
        bad = dataclasses.replace(e, match=Match.build(fields))
        wide = min(n, k)
        yield (
            FaultSpec("mask", e.dpid, f"/{n} as /{k}", add=[bad], delete=[e]),
            v & mask(wide),
            wide,
        )


def _visible(model, ref, ports, low, n, rng, tries=800):
    """Whether one of `tries` random headers to the wider of the two blocks, from random
    hosts, reveals the fault (the oracle of whether it can be seen at all)."""
    for _ in range(tries):
        h = {
            "eth_type": 0x0800,
            "ipv4_dst": low | rng.getrandbits(32 - n),
            "ipv4_src": rng.getrandbits(32),
            "ip_proto": rng.choice((6, 17)),
            "tp_dst": rng.getrandbits(16),
            "tp_src": rng.getrandbits(16),
            "eth_src": 0x02505A000000 | rng.getrandbits(16),
            "eth_dst": 0x020000000001,
            "vlan_vid": 0,
        }
        if detects(model, ref, rng.choice(ports), h):
            return True
    return False


def _network(seed):
    net = random_network(seed)
    model = Model(net.topo)
    model.add_entries(net.entries, net.groups)
    return net, model


def _targets(model, seed) -> list:
    """The header sets (in V) of every mask-edge target of the model's distinct matches."""
    sp = model.space
    matches = {f: sp.match_bdd(f) for f in {e.match.fields for e in model.entries()}}
    me = MaskEdges(sp, matches, valid_headers(sp), CountCache(sp), random.Random(seed))
    tfs = [tf for j in range(1, MASK_SLIP + 1) for tf in me.targets(j)]
    return [u for u in map(me._inside, tfs) if u is not None]


@pytest.mark.parametrize("seed", [30, 33])
def test_targets_reveal_every_visible_mask_fault(seed):
    net, model = _network(seed)
    sp = model.space
    ports = model.topo.edge_ports()
    cache = CountCache(sp)
    targets = _targets(model, seed)
    rng = random.Random(seed)
    visible = 0
    for f, low, wide in _mask_faults(net, rng, 4):
        ref = net.ref(f.apply(net.entries))
        if not _visible(model, ref, ports, low, wide, random.Random(seed)):
            continue  # other entries hide the slip everywhere
        visible += 1
        draw = random.Random(seed)
        found = any(
            detects(model, ref, ing, Sampler(sp, u, cache=cache).uniform(draw))
            for u in targets
            for ing in ports
            for _ in range(3)
        )
        assert found, f.title
    assert visible >= 2  # the networks do have faults to find


@pytest.mark.parametrize("seed", [21, 22])
def test_the_area_gets_its_turns_at_the_targets(seed):
    _, model = _network(seed)
    sp = model.space
    fz = Fuzzer(model, seed=seed, subscribe=False, shares=shares_with_delivered(0.2))
    probes = [pr for _ in range(20) for pr in fz.next_probes(100)]
    edges = [pr for pr in probes if pr.label == "delivered edges"]
    group = [pr for pr in probes if pr.area == "delivered"]
    assert 0.15 <= len(edges) / len(group) <= 0.45, (len(edges), len(group))
    targets = sp.false
    for u in _targets(model, seed):
        targets = targets | u
    for pr in edges:
        assert sp.contains(targets, pr.header), pr
