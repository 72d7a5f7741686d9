"""A plan rebuilt for an unchanged covered set reuses the earlier plan's set operations
(CountCache.derive) and probes exactly what a plan built from nothing probes; the reused
pieces agree with their definitions, checked header by header with space.contains."""

from __future__ import annotations

import random

import pytest

from cpc.fields import WIDTH
from cpc.model import Model
from fuzzer.hspace import CountCache, Membership, Sampler, valid_headers
from fuzzer.plan import flip_set
from pazzdata.workloads import generate
from tests.fuzzer.plans import plan_for


@pytest.fixture(scope="module")
def net():
    wl = generate("grid", 2, 300, rule_ids=True, seed=3)
    model = Model(wl.topo)
    model.add_entries(wl.entries, wl.groups)
    return wl, model


def _sequence(plan, n):
    out = []
    for _ in range(n):
        pr = plan.next_probe()
        out.append(None if pr is None else (pr.area, tuple(sorted(pr.header.items()))))
    return out


def test_a_rebuilt_plan_probes_what_a_fresh_plan_probes(net):
    _, model = net
    for ingress in model.topo.edge_ports()[:3]:
        shared = CountCache(model.space)
        _sequence(
            plan_for(model, ingress, 1, cache=shared, warmup=4), 400
        )  # fills the shared cache
        assert shared.derived, "the first plan left nothing to reuse"
        again = _sequence(plan_for(model, ingress, 2, cache=shared, warmup=4), 400)
        fresh = _sequence(plan_for(model, ingress, 2, cache=CountCache(model.space), warmup=4), 400)
        assert again == fresh
        assert {a for a, _ in fresh} >= {"boundary", "class", "random"}


def test_flip_set_is_its_definition(net):
    """h is in the flip set of field f iff h is outside covered, valid, and flipping one
    bit of f in h gives a covered header (brute force over every bit)."""
    _, model = net
    sp = model.space
    rng = random.Random(5)
    ingress = model.topo.edge_ports()[0]
    edges = model.topo.edge_ports()
    covered = sp.false
    for e in edges:
        if e != ingress:
            covered = covered | model.corpus(ingress, e)[0]
    residual = valid_headers(sp) & ~covered
    near = Sampler(sp, covered)
    checked = 0
    for f in ("ipv4_dst", "ipv4_src", "ip_proto", "tp_dst", "eth_type", "eth_src"):
        u = flip_set(sp, covered, f, residual)
        smp_u = Sampler(sp, u)
        in_u = Membership(sp, u)
        cands = [smp_u.uniform(rng) for _ in range(40 if smp_u.total else 0)]
        # headers one flip of each bit away from covered headers, in or out of the set
        # (covered headers uniform, and uniform by cube: small prefixes too)
        for b in range(WIDTH[f]):
            for k in range(16):
                h = near.uniform(rng) if k % 2 else near.by_cube(rng)
                h[f] ^= 1 << b
                cands.append(h)
        for h in cands:
            flips = (dict(h, **{f: h[f] ^ (1 << b)}) for b in range(WIDTH[f]))
            want = (
                sp.contains(residual, h)
                and not sp.contains(covered, h)
                and any(sp.contains(covered, g) for g in flips)
            )
            assert sp.contains(u, h) == want, (f, h)
            assert in_u(h) == want
            checked += 1
    assert checked > 2000


def test_membership_agrees_with_contains(net):
    _, model = net
    sp = model.space
    rng = random.Random(9)
    smp = Sampler(sp, valid_headers(sp))
    edges = model.topo.edge_ports()
    for c, u in enumerate(model.corpus(edges[0], e)[0] for e in edges[1:]):
        member = Membership(sp, u)
        inner = Sampler(sp, u)
        hs = [smp.uniform(rng) for _ in range(100)] + [inner.uniform(rng) for _ in range(50)]
        for h in hs:
            assert member(h) == sp.contains(u, h), (c, h)
        assert any(member(h) for h in hs)
