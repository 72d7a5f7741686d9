"""cpc._leqc, the partition's per-class tests in C, against the Python loop it replaces
(with dd's own operators as the oracle), as is the partition's Python fallback: the same
classes in the same order with the same flags, no reference leaked, and a clear error for
input that is not the partition's."""

from __future__ import annotations

import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cpc._leqc import classes_meeting
from cpc.partition import _classes_meeting_py
from tests.cpc.test_leq import SPACE, regions

LEQ = SPACE.leq_args


def DD_DISJOINT(u, v) -> bool:  # noqa: N802 - a constant of the test, as LEQ
    return u & v == SPACE.false


def py_classes_meeting(x, x_first, ys, pair, whole, inter, rest, ry_of):
    """The loop of cpc.partition.Partition.parts, tested with dd's operators."""
    out, false = [], SPACE.false
    for y in ys:
        w = whole
        if whole is None:
            ry = ry_of[y]
            if inter & ry == false:
                continue
            w = rest & ry == false
        for c in pair[(x, y) if x_first else (y, x)]:
            out.append((c, None, w))
    return out


@st.composite
def cases(draw):
    n = draw(st.integers(0, 6))
    ys = set(range(100, 100 + n))
    ry_of = {y: draw(regions()) for y in ys}
    x, x_first = draw(st.integers(0, 3)), draw(st.booleans())
    pair = {}
    for y in ys:
        key = (x, y) if x_first else (y, x)
        pair[key] = set(draw(st.lists(st.integers(0, 50), min_size=1, max_size=3)))
    whole = draw(st.sampled_from([None, True, False]))
    inter, rest = draw(regions()), draw(regions())
    return x, x_first, ys, pair, whole, inter, rest, ry_of


def test_the_shipped_dd_gives_the_native_arguments():
    assert LEQ is not None


@settings(max_examples=300, deadline=None)
@given(cases())
def test_classes_meeting_as_the_python_loop(case):
    x, x_first, ys, pair, whole, inter, rest, ry_of = case
    out = [("before", None, False)]
    classes_meeting(LEQ, x, x_first, ys, pair, out, whole, inter, rest, ry_of)
    want = py_classes_meeting(*case)
    assert out == [("before", None, False), *want]
    # The partition's Python fallback, for a dd without the native path, with dd's operators.
    fallback: list = []
    _classes_meeting_py(DD_DISJOINT, x, x_first, ys, pair, fallback, whole, inter, rest, ry_of)
    assert fallback == want


def test_no_reference_is_leaked():
    u, v = SPACE.field_bdd("ip_proto", 6, 0xFF), SPACE.field_bdd("tp_dst", 80, 0xFFFF)
    ys, ry_of, pair = {7, 8}, {7: u, 8: ~u}, {(1, 7): {10}, (1, 8): {11, 12}}
    objs = (u, v, ys, ry_of, pair, *ry_of.values(), *pair.values())
    before = [sys.getrefcount(o) for o in objs]
    for _ in range(1000):
        out = []
        classes_meeting(LEQ, 1, True, ys, pair, out, None, v, ~v, ry_of)
        classes_meeting(LEQ, 1, True, ys, pair, out, True, None, None, None)
        assert len(out) == 6
    assert [sys.getrefcount(o) for o in objs] == before


def test_input_that_is_not_the_partitions_is_an_error():
    u = SPACE.true
    with pytest.raises(ValueError, match="native"):
        classes_meeting((0, 0, 48, type(u)), 1, True, set(), {}, [], True, None, None, None)
    with pytest.raises(ValueError, match="native"):  # a node offset beyond the object
        classes_meeting((1, 1, 4096, type(u)), 1, True, set(), {}, [], True, None, None, None)
    with pytest.raises(TypeError, match="expected a BDD"):
        classes_meeting(LEQ, 1, True, {7}, {(1, 7): {3}}, [], None, "u", u, {7: u})
    with pytest.raises(TypeError, match="expected a BDD"):
        classes_meeting(LEQ, 1, True, {7}, {(1, 7): {3}}, [], None, u, u, {7: 7})
    with pytest.raises(KeyError):  # a projection without a region
        classes_meeting(LEQ, 1, True, {7}, {(1, 7): {3}}, [], None, u, u, {})
    with pytest.raises(KeyError):  # a pair without classes
        classes_meeting(LEQ, 1, True, {7}, {}, [], False, None, None, None)
