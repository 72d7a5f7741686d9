"""Instructions, actions and group buckets on the wire: walking their TLVs, checking their
lengths, their canonical form, and the ports and groups they name.
"""

from __future__ import annotations

import struct

from ofwire.consts import (
    OFPAT_GROUP,
    OFPAT_OUTPUT,
    OFPCML_NO_BUFFER,
    OFPIT_APPLY_ACTIONS,
    OFPIT_CLEAR_ACTIONS,
    OFPIT_WRITE_ACTIONS,
)
from ofwire.framing import ProtocolError

__all__ = [
    "walk_tlvs",
    "walk_buckets",
    "check_instructions",
    "canonical_instructions",
    "action_targets",
    "groups_named_twice",
    "output_action",
]


def walk_tlvs(data: bytes, what: str, min_len: int = 8) -> list[tuple[int, int, int]]:
    """[(type, offset, length)] of the 8-byte aligned TLVs (instructions, actions, buckets)."""
    out = []
    off, n = 0, len(data)
    while off < n:
        if off + 4 > n:
            raise ProtocolError(f"truncated {what}")
        t, ln = struct.unpack_from("!HH", data, off)
        if ln < min_len or ln % 8 or off + ln > n:
            raise ProtocolError(f"{what} type {t} with a bad length {ln}")
        out.append((t, off, ln))
        off += ln
    return out


def walk_buckets(data: bytes) -> list[tuple[int, int, int]]:
    """[(0, offset, length)] of OpenFlow 1.3 group buckets. A bucket starts with its
    length (then weight, watch_port, watch_group, pad: 16 bytes), not with a type."""
    out = []
    off, n = 0, len(data)
    while off < n:
        if off + 2 > n:
            raise ProtocolError("truncated bucket")
        (ln,) = struct.unpack_from("!H", data, off)
        if ln < 16 or ln % 8 or off + ln > n:
            raise ProtocolError(f"bucket with a bad length {ln}")
        out.append((0, off, ln))
        off += ln
    return out


def check_instructions(instr: bytes) -> None:
    for t, off, ln in walk_tlvs(instr, "instruction"):
        if t in (OFPIT_WRITE_ACTIONS, OFPIT_APPLY_ACTIONS):
            walk_tlvs(instr[off + 8 : off + ln], "action")


def canonical_instructions(instr: bytes) -> bytes:
    """Instructions sorted by type with empty APPLY_ACTIONS removed and padding zeroed."""
    parts = []
    for t, off, ln in walk_tlvs(instr, "instruction"):
        if t == OFPIT_APPLY_ACTIONS and ln == 8:
            continue
        body = instr[off : off + ln]
        if t in (OFPIT_APPLY_ACTIONS, OFPIT_WRITE_ACTIONS, OFPIT_CLEAR_ACTIONS):
            body = body[:4] + b"\0\0\0\0" + body[8:]
        parts.append((t, body))
    parts.sort(key=lambda p: p[0])
    return b"".join(b for _, b in parts)


def action_targets(instr: bytes) -> tuple[set[int], set[int]]:
    """(output ports, group ids) named by the actions of the instructions."""
    ports, groups = set(), set()
    for t, off, ln in walk_tlvs(instr, "instruction"):
        if t not in (OFPIT_APPLY_ACTIONS, OFPIT_WRITE_ACTIONS):
            continue
        acts = instr[off + 8 : off + ln]
        for at, aoff, aln in walk_tlvs(acts, "action"):
            if at == OFPAT_OUTPUT and aln >= 8:
                ports.add(struct.unpack_from("!I", acts, aoff + 4)[0])
            elif at == OFPAT_GROUP and aln >= 8:
                groups.add(struct.unpack_from("!I", acts, aoff + 4)[0])
    return ports, groups


def groups_named_twice(instr: bytes) -> list[int]:
    """The group ids that the actions of the instructions (apply and write together) name
    more than once: Open vSwitch 3.1 lists the entry on the group once per reference and
    aborts when the group is deleted (docs/agents.md)."""
    seen, twice = set(), []
    for t, off, ln in walk_tlvs(instr, "instruction"):
        if t not in (OFPIT_APPLY_ACTIONS, OFPIT_WRITE_ACTIONS):
            continue
        acts = instr[off + 8 : off + ln]
        for at, aoff, aln in walk_tlvs(acts, "action"):
            if at == OFPAT_GROUP and aln >= 8:
                gid = struct.unpack_from("!I", acts, aoff + 4)[0]
                if gid in seen and gid not in twice:
                    twice.append(gid)
                seen.add(gid)
    return twice


def output_action(port: int, max_len: int = OFPCML_NO_BUFFER) -> bytes:
    return struct.pack("!HHIH6x", OFPAT_OUTPUT, 16, port, max_len)
