"""The Nicira-extension Verify actions of ovs-patches/0003, and the rule ID the proxy puts
first in every entry it installs.

`set_verify_rule:ID` on the wire (NXAST_RAW_SET_VERIFY_RULE_ID, "NX1.0+(64): uint32_t"),
16 bytes, checked against the patched `ovs-ofctl ofp-print`:

    ff ff | 00 10 | 00 00 23 20 | 00 40 | 00 00 | ID (4 bytes, big-endian)
    type    len     NX vendor     subtype  pad
"""

from __future__ import annotations

import struct

from ofwire.actions import walk_buckets, walk_tlvs
from ofwire.consts import (
    NX_VENDOR_ID,
    NXAST_SET_VERIFY_RULE_ID,
    OFPAT_EXPERIMENTER,
    OFPIT_APPLY_ACTIONS,
    OFPIT_WRITE_ACTIONS,
    VERIFY_ACTION_LEN,
    VERIFY_SUBTYPES,
)

__all__ = [
    "verify_rule_action",
    "is_verify_rule_action",
    "add_rule_id",
    "strip_rule_id",
    "has_verify_action",
    "buckets_have_verify_action",
]

_VR = struct.Struct("!HHIHxxI")


def verify_rule_action(rule_id: int) -> bytes:
    return _VR.pack(
        OFPAT_EXPERIMENTER, VERIFY_ACTION_LEN, NX_VENDOR_ID, NXAST_SET_VERIFY_RULE_ID, rule_id
    )


def is_verify_rule_action(data: bytes, off: int = 0) -> int | None:
    """The ID if data[off:] starts with set_verify_rule:ID, else None."""
    if len(data) - off < VERIFY_ACTION_LEN:
        return None
    t, ln, vendor, sub, rid = _VR.unpack_from(data, off)
    if t == OFPAT_EXPERIMENTER and ln == 16 and vendor == NX_VENDOR_ID and sub == 64:
        return rid
    return None


def add_rule_id(instr: bytes, rule_id: int) -> bytes:
    """Instructions with set_verify_rule:ID as the first action of APPLY_ACTIONS (created
    first in the list when there is none). `instr` must have passed check_instructions."""
    act = verify_rule_action(rule_id)
    for t, off, ln in walk_tlvs(instr, "instruction"):
        if t == OFPIT_APPLY_ACTIONS:
            head = instr[off : off + 2] + struct.pack("!H", ln + VERIFY_ACTION_LEN)
            return instr[:off] + head + instr[off + 4 : off + 8] + act + instr[off + 8 :]
    return struct.pack("!HH4x", OFPIT_APPLY_ACTIONS, 8 + VERIFY_ACTION_LEN) + act + instr


def strip_rule_id(instr: bytes) -> tuple[bytes, int | None]:
    """(instructions without the first-action set_verify_rule:ID, ID or None).

    An APPLY_ACTIONS instruction left empty is removed (the switch never reports an empty
    one, so the controller's own bytes never had it)."""
    for t, off, ln in walk_tlvs(instr, "instruction"):
        if t == OFPIT_APPLY_ACTIONS:
            rid = is_verify_rule_action(instr, off + 8) if ln >= 24 else None
            if rid is None:
                return instr, None
            if ln == 8 + VERIFY_ACTION_LEN:
                return instr[:off] + instr[off + ln :], rid
            head = instr[off : off + 2] + struct.pack("!H", ln - VERIFY_ACTION_LEN)
            return instr[:off] + head + instr[off + 4 : off + 8] + instr[off + 24 :], rid
    return instr, None


def _verify_in_actions(acts: bytes) -> bool:
    for at, aoff, aln in walk_tlvs(acts, "action"):
        if at == OFPAT_EXPERIMENTER and aln >= 16:
            vendor, sub = struct.unpack_from("!IH", acts, aoff + 4)
            if vendor == NX_VENDOR_ID and sub in VERIFY_SUBTYPES:
                return True
    return False


def has_verify_action(instr: bytes) -> bool:
    """Do the instructions' action lists hold a Verify action (push_verify, pop_verify,
    set_verify_port, set_verify_rule[:ID])?"""
    for t, off, ln in walk_tlvs(instr, "instruction"):
        if t in (OFPIT_APPLY_ACTIONS, OFPIT_WRITE_ACTIONS) and _verify_in_actions(
            instr[off + 8 : off + ln]
        ):
            return True
    return False


def buckets_have_verify_action(buckets: bytes) -> bool:
    return any(
        _verify_in_actions(buckets[off + 16 : off + ln]) for _, off, ln in walk_buckets(buckets)
    )
