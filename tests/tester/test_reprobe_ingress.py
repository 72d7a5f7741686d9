"""A fault's first sample asks for its header again from where the packet came in: the
alternatives whose ingress's Bloom bits the sample's Verify_Port holds come first (the
consumers take the first few ingresses), checked against the bits computed one by one."""

from __future__ import annotations

import random

from cpc.results import Expected
from cpc.tags import port_bits
from tester.engine import came_from_first


def test_the_ingresses_the_verify_port_holds_come_first():
    rng = random.Random(7)
    for _ in range(500):
        ports = [(rng.randrange(1, 40), rng.randrange(1, 9)) for _ in range(rng.randrange(1, 12))]
        alts = [Expected(p, (), 0, 0) for p in ports]
        came = rng.choice(ports)
        vp = port_bits(*came)
        for _ in range(rng.randrange(0, 4)):  # the switches after it add their bits
            vp |= port_bits(rng.randrange(1, 40), rng.randrange(1, 9))
        out = came_from_first(alts, vp)
        assert sorted(map(id, out)) == sorted(map(id, alts))  # a reordering, nothing lost
        held = [all(vp >> b & 1 for b in range(32) if port_bits(*e.ingress) >> b & 1) for e in out]
        assert held == sorted(held, reverse=True)  # every held one before every other
        assert any(e.ingress == came for e, h in zip(out, held, strict=True) if h)
