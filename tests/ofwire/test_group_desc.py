"""Group-desc replies (OFPMP_GROUP_DESC): the groups as the switch holds them, read into
the model's Groups with their bucket weights; malformed bodies are refused."""

from __future__ import annotations

import struct

import pytest

import ofwire as of


def bucket(weight: int, *ports: int) -> bytes:
    acts = b"".join(of.output_action(p) for p in ports)
    return struct.pack("!HHII4x", 16 + len(acts), weight, of.OFPP_ANY, of.OFPG_ANY) + acts


def desc(gtype: int, gid: int, *buckets: bytes) -> bytes:
    body = b"".join(buckets)
    return struct.pack("!HB1xI", 8 + len(body), gtype, gid) + body


def test_group_desc_body_reads_back_into_groups() -> None:
    body = desc(1, 7, bucket(2, 3), bucket(1, 4)) + desc(0, 9, bucket(0, 1, 2))
    (t7, g7, b7), (t9, g9, b9) = of.parse_group_desc_body(body)
    assert (t7, g7, t9, g9) == (1, 7, 0, 9)
    sel = of.group_to_cpc(5, t7, g7, b7)
    assert (sel.type, sel.buckets, sel.weights) == (
        "select",
        ((("output", 3),), (("output", 4),)),
        (2, 1),
    )
    alls = of.group_to_cpc(5, t9, g9, b9)
    assert (alls.type, alls.buckets, alls.weights) == ("all", ((("output", 1), ("output", 2)),), ())
    # Equal weights, whatever their scale, pick as weight 1 does: kept as ().
    assert of.group_to_cpc(5, 1, 7, bucket(100, 3) + bucket(100, 4)).weights == ()


@pytest.mark.parametrize(
    "body",
    [
        desc(1, 7, bucket(1, 3))[:-4],  # cut inside the bucket
        struct.pack("!HB1xI", 4, 1, 7),  # a length shorter than the header
        b"\x00\x10\x01",  # a header cut short
        desc(1, 7)[:8] + struct.pack("!HHII4x", 40, 1, 0, 0),  # a bucket longer than its group
    ],
)
def test_malformed_group_desc_is_refused(body) -> None:
    with pytest.raises(of.ProtocolError):
        of.parse_group_desc_body(body)
