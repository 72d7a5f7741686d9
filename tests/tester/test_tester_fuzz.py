"""Hypothesis fuzzing of the sFlow decoder and the tester: 120k mutated datagrams.

Four tests of 6,000 examples each; every example draws five mutations of valid
datagrams (truncation, bit flips, lengths and counts overwritten, junk spliced
in), so 4 x 6,000 x 5 = 120,000 inputs. Every input must either decode or raise
SflowError, and the Tester must count it and go on; nothing else may escape.
"""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_tester_sflow import sample_datagrams
from tester_helpers import ALL_PORTS, GOOD, HDR, FakeModel, expected

from tester.emit import synthetic_ifmap
from tester.engine import Tester
from tester.sflow import SflowError, decode
from tester.store import FaultStore

BASES = sample_datagrams() + sample_datagrams("2001:db8::7")
EXAMPLES = 6_000
PER_EXAMPLE = 5
FAST = settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
)
base = st.integers(0, len(BASES) - 1)


def _decode_or_error(data: bytes) -> None:
    with contextlib.suppress(SflowError):
        decode(data)


@pytest.mark.slow
@FAST
@given(st.lists(st.tuples(base, st.integers(0, 2000)), min_size=PER_EXAMPLE, max_size=PER_EXAMPLE))
def test_truncated(cases) -> None:
    for i, cut in cases:
        b = BASES[i]
        _decode_or_error(b[: cut % (len(b) + 1)])


@pytest.mark.slow
@FAST
@given(
    st.lists(
        st.tuples(base, st.integers(0, 1 << 16), st.integers(0, 255), st.integers(0, 7)),
        min_size=PER_EXAMPLE,
        max_size=PER_EXAMPLE,
    )
)
def test_bit_flips(cases) -> None:
    for i, pos, stride, bit in cases:
        b = bytearray(BASES[i])
        b[pos % len(b)] ^= 1 << bit
        b[(pos + stride) % len(b)] ^= 1 << (7 - bit)
        _decode_or_error(bytes(b))


@pytest.mark.slow
@FAST
@given(
    st.lists(
        st.tuples(
            base,
            st.integers(0, 400),
            st.sampled_from([0, 1, 3, 4, 7, 0x7FFFFFFF, 0xFFFFFFFF, 1 << 20]),
        ),
        min_size=PER_EXAMPLE,
        max_size=PER_EXAMPLE,
    )
)
def test_random_lengths(cases) -> None:
    # Overwrite one aligned 32-bit word: counts and lengths live on word boundaries.
    for i, word, value in cases:
        b = bytearray(BASES[i])
        off = (word * 4) % max(4, len(b) - 3)
        b[off : off + 4] = value.to_bytes(4, "big")
        _decode_or_error(bytes(b))


_tester = Tester(
    FakeModel({((3, 2), HDR["ipv4_dst"]): [expected(GOOD)]}),
    FaultStore(":memory:"),
    synthetic_ifmap(ALL_PORTS),
)


@pytest.mark.slow
@FAST
@given(
    st.lists(
        st.tuples(base, st.binary(max_size=16), st.integers(0, 1500)),
        min_size=PER_EXAMPLE,
        max_size=PER_EXAMPLE,
    )
)
def test_tester_never_raises(cases) -> None:
    for i, junk, at in cases:
        b = BASES[i]
        at %= len(b) + 1
        _tester.process_datagram(b[:at] + junk + b[at + len(junk) :], 0.0)
