"""cpc.leq (CUDD's Cudd_bddLeq through ctypes) against dd's own operators."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from cpc import leq as leq_module
from cpc.leq import Leq
from cpc.space import HeaderSpace

SPACE = HeaderSpace()
FIELDS = [("ipv4_dst", 32), ("ipv4_src", 32), ("ip_proto", 8), ("tp_dst", 16)]


@st.composite
def regions(draw, depth=3):
    """A header set: a field match, or a union, intersection or complement of regions."""
    if depth == 0 or draw(st.booleans()):
        field, width = draw(st.sampled_from(FIELDS))
        # Few distinct values, so that regions overlap and nest often.
        value = draw(st.integers(0, 7)) << (width - 3)
        mask = ((1 << draw(st.integers(0, 3))) - 1) << (width - 3)
        return SPACE.field_bdd(field, value & mask, mask)
    op = draw(st.sampled_from(["and", "or", "not"]))
    a = draw(regions(depth - 1))
    if op == "not":
        return ~a
    b = draw(regions(depth - 1))
    return a & b if op == "and" else a | b


def test_the_shipped_dd_takes_the_native_path():
    # The layout check must pass on the dd this project pins, or the speed is gone unseen.
    assert Leq(SPACE.bdd).native


@settings(max_examples=300, deadline=None)
@given(regions(), regions())
def test_within_and_disjoint_equal_dd(u, v):
    false = SPACE.false
    assert SPACE.within(u, v) == ((u & ~v) == false)
    assert SPACE.disjoint(u, v) == ((u & v) == false)
    assert SPACE.within(u, u) and SPACE.within(false, u) and SPACE.within(u, SPACE.true)
    assert SPACE.disjoint(u, ~u)


@settings(max_examples=100, deadline=None)
@given(regions(), regions())
def test_fallback_equals_native(u, v):
    saved = leq_module._LEQ
    leq_module._LEQ = None
    try:
        slow = Leq(SPACE.bdd)
    finally:
        leq_module._LEQ = saved
    assert not slow.native
    assert slow.within(u, v) == SPACE.within(u, v)
    assert slow.disjoint(u, v) == SPACE.disjoint(u, v)
