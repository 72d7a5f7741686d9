"""cpc.selecthash against known answers read from the patched Open vSwitch 3.1.

tests/vectors/select_hash.json was written by `python -m tests.ovs.select_oracle` (needs
root and PAZZ_OVS_PREFIX), which reads each value from a running ovs-vswitchd: the full
32-bit dp_hash its datapath computed for real frames (copied into the source MAC by the
bucket), the bucket `ofproto/trace` names for given dp_hash values in weighted groups, and
the per-bucket scores it prints for the default method. tests/ovs/test_select_hash.py
checks that OVS still gives them. No OVS is needed here.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cpc import selecthash
from cpc.rules import Group

VECTORS = json.loads(
    (Path(__file__).resolve().parents[1] / "vectors" / "select_hash.json").read_text()
)


def group(n: int) -> Group:
    return Group(7, 1, "select", tuple((("output", p),) for p in range(1, n + 1)))


def test_vector_counts():
    assert len(VECTORS["dp_hash"]) >= 9
    assert {v["header"]["eth_type"] for v in VECTORS["dp_hash"]} >= {0x0800, 0x0806, 0x86DD}
    assert len(VECTORS["dp_hash_buckets"]) >= 2
    assert len(VECTORS["default_scores"]) >= 9


@pytest.mark.parametrize("vec", VECTORS["dp_hash"], ids=lambda v: hex(v["dp_hash"]))
def test_dp_hash(vec):
    assert selecthash.dp_hash(vec["header"]) == vec["dp_hash"]


@pytest.mark.parametrize("vec", VECTORS["dp_hash_buckets"], ids=lambda v: str(v["weights"]))
def test_dp_hash_table(vec):
    table = selecthash.dp_hash_table(vec["weights"])
    mask = len(table) - 1
    base = vec["dp_hash_base"]
    assert [table[(base + x) & mask] for x in range(len(vec["buckets"]))] == vec["buckets"]


@pytest.mark.parametrize("vec", VECTORS["default_scores"], ids=lambda v: str(v["scores"]))
def test_default_method(vec):
    w = vec["weights"]
    assert selecthash.dp_hash_table(w) is None  # too unequal for 256 hash values
    assert selecthash.default_scores(w, vec["header"]) == vec["scores"]
    assert selecthash.ovs_select_bucket(group(len(w)), vec["header"], w) == vec["bucket"]


def test_equal_weights_pick_the_low_four_bits_modulo_the_buckets():
    """Weight-1 groups of up to 16 buckets: 16 hash values dealt round-robin (Webster with
    equal weights), so the pick is (dp_hash & 15) % n, from the vectors' dp_hash."""
    for n in range(1, 6):
        for vec in VECTORS["dp_hash"]:
            pick = selecthash.ovs_select_bucket(group(n), vec["header"])
            assert pick == (vec["dp_hash"] & 15) % n


def test_no_positive_weight_or_wrong_count_is_refused():
    with pytest.raises(ValueError):
        selecthash.ovs_select_bucket(group(2), VECTORS["dp_hash"][0]["header"], [0, 0])
    with pytest.raises(ValueError):
        selecthash.ovs_select_bucket(group(2), VECTORS["dp_hash"][0]["header"], [1, 1, 1])
