"""OXM matches on the wire: where a match is in a message, its fields, and its canonical
form (the byte key under which the proxy files an entry: equal for equal matches).
"""

from __future__ import annotations

import struct

from ofwire.consts import OFPMT_OXM
from ofwire.framing import ProtocolError

__all__ = [
    "match_span",
    "oxm_fields",
    "canonical_match",
    "match_fields",
    "within",
]


def match_span(data: bytes, off: int) -> tuple[bytes, int]:
    """(OXM bytes, padded length) of the ofp_match at off. Raises ProtocolError."""
    if off + 4 > len(data):
        raise ProtocolError("truncated match")
    mtype, mlen = struct.unpack_from("!HH", data, off)
    if mtype != OFPMT_OXM or mlen < 4:
        raise ProtocolError(f"match type {mtype} length {mlen} (need an OXM match)")
    padded = (mlen + 7) // 8 * 8
    if off + padded > len(data):
        raise ProtocolError("match longer than the message")
    return bytes(data[off + 4 : off + mlen]), padded


def oxm_fields(oxm: bytes) -> list[tuple[int, int, int, int]]:
    """[(class, field, value, mask)], mask = all ones of the width when not masked."""
    out = []
    off = 0
    n = len(oxm)
    while off < n:
        if off + 4 > n:
            raise ProtocolError("truncated OXM header")
        (hdr,) = struct.unpack_from("!I", oxm, off)
        cls, field, hasmask, length = hdr >> 16, (hdr >> 9) & 0x7F, (hdr >> 8) & 1, hdr & 0xFF
        body = oxm[off + 4 : off + 4 + length]
        if len(body) != length or length == 0:
            raise ProtocolError("OXM field with a bad length")
        if cls == 0xFFFF:  # experimenter: the first 4 bytes are its id, part of the field
            if length < 4 + hasmask:
                raise ProtocolError("experimenter OXM field too short")
            field = (field << 32) | int.from_bytes(body[:4], "big")
            body = body[4:]
        if hasmask:
            if len(body) % 2:
                raise ProtocolError("masked OXM field with an odd length")
            half = len(body) // 2
            value, mask = int.from_bytes(body[:half], "big"), int.from_bytes(body[half:], "big")
            width = half
        else:
            value, width = int.from_bytes(body, "big"), len(body)
            mask = (1 << (8 * width)) - 1
        out.append((cls, field, value & mask, mask, width))
        off += 4 + length
    return [(c, f, v, m) for c, f, v, m, _ in out]


def canonical_match(oxm: bytes) -> bytes:
    """A byte key that is equal for matches that are equal (field order, all-ones masks,
    value bits outside the mask do not matter). Raises ProtocolError."""
    items = []
    off = 0
    n = len(oxm)
    while off < n:
        if off + 4 > n:
            raise ProtocolError("truncated OXM header")
        (hdr,) = struct.unpack_from("!I", oxm, off)
        length = hdr & 0xFF
        hasmask = (hdr >> 8) & 1
        body = oxm[off + 4 : off + 4 + length]
        if len(body) != length or length == 0:
            raise ProtocolError("OXM field with a bad length")
        off += 4 + length
        prefix = b""
        if hdr >> 16 == 0xFFFF:  # experimenter class
            prefix, body = body[:4], body[4:]
        if hasmask:
            if len(body) % 2 or not body:
                raise ProtocolError("masked OXM field with an odd length")
            half = len(body) // 2
            v = int.from_bytes(body[:half], "big")
            m = int.from_bytes(body[half:], "big")
            if m == 0:
                continue
            if m == (1 << (8 * half)) - 1:
                hasmask, body = 0, body[:half]
            else:
                body = (v & m).to_bytes(half, "big") + body[half:]
        h = (hdr & 0xFFFFFE00) | (hasmask << 8) | (len(prefix) + len(body))
        items.append(struct.pack("!I", h) + prefix + body)
    items.sort()
    return b"".join(items)


def match_fields(mkey: bytes) -> dict[tuple[int, int], tuple[int, int]]:
    """{(class, field): (value, mask)} of a canonical match."""
    return {(c, f): (v, m) for c, f, v, m in oxm_fields(mkey)}


def within(entry: dict, fm: dict) -> bool:
    """OpenFlow's non-strict relation: every packet of entry's match is in fm's match."""
    for k, (v, m) in fm.items():
        e = entry.get(k)
        if e is None or (e[1] & m) != m or (e[0] ^ v) & m:
            return False
    return True
