"""The Verify tag functions: the contract between patched Open vSwitch and the model.

Both functions are specified byte for byte in docs/verify-header.md.
`tests/vectors/verify.json` holds vectors generated from OVS's own C code; the
tests check this module against it.
"""

from __future__ import annotations

import binascii
import struct

VERIFY_ETHERTYPE = 0x0820
# The probe mark (docs/verify-header.md, "The probe mark"): the same header with this
# EtherType is a probe's; same layout, same tags.
VERIFY_ETHERTYPE_MARKED = 0x0821
VERIFY_ETHERTYPES = (VERIFY_ETHERTYPE, VERIFY_ETHERTYPE_MARKED)
VERIFY_HEADER_LEN = 8
VERIFY_PORT_INIT = 0
VERIFY_RULE_INIT = 1

_M32 = 0xFFFFFFFF


def _rot(x: int, k: int) -> int:
    return ((x << k) | (x >> (32 - k))) & _M32


def _mix(a: int, b: int, c: int) -> tuple[int, int, int]:
    a = (a - c) & _M32
    a ^= _rot(c, 4)
    c = (c + b) & _M32  # noqa: E702
    b = (b - a) & _M32
    b ^= _rot(a, 6)
    a = (a + c) & _M32  # noqa: E702
    c = (c - b) & _M32
    c ^= _rot(b, 8)
    b = (b + a) & _M32  # noqa: E702
    a = (a - c) & _M32
    a ^= _rot(c, 16)
    c = (c + b) & _M32  # noqa: E702
    b = (b - a) & _M32
    b ^= _rot(a, 19)
    a = (a + c) & _M32  # noqa: E702
    c = (c - b) & _M32
    c ^= _rot(b, 4)
    b = (b + a) & _M32  # noqa: E702
    return a, b, c


def _final(a: int, b: int, c: int) -> tuple[int, int, int]:
    c ^= b
    c = (c - _rot(b, 14)) & _M32  # noqa: E702
    a ^= c
    a = (a - _rot(c, 11)) & _M32  # noqa: E702
    b ^= a
    b = (b - _rot(a, 25)) & _M32  # noqa: E702
    c ^= b
    c = (c - _rot(b, 16)) & _M32  # noqa: E702
    a ^= c
    a = (a - _rot(c, 4)) & _M32  # noqa: E702
    b ^= a
    b = (b - _rot(a, 14)) & _M32  # noqa: E702
    c ^= b
    c = (c - _rot(b, 24)) & _M32  # noqa: E702
    return a, b, c


def jhash_bytes(data: bytes, basis: int = 0) -> int:
    """OVS 3.1 `jhash_bytes()` (lib/jhash.c): lookup3 over little-endian words."""
    n = len(data)
    a = b = c = (0xDEADBEEF + n + basis) & _M32
    off = 0
    while n - off >= 12:
        x, y, z = struct.unpack_from("<III", data, off)
        a, b, c = _mix((a + x) & _M32, (b + y) & _M32, (c + z) & _M32)
        off += 12
    if off < n:
        x, y, z = struct.unpack("<III", data[off:].ljust(12, b"\0"))
        a, b, c = _final((a + x) & _M32, (b + y) & _M32, (c + z) & _M32)
    return c


def port_bits(dpid: int, in_port: int) -> int:
    """The three Bloom-filter bits that set_verify_port ORs in for (dpid, in_port)."""
    h = jhash_bytes(struct.pack(">QI", dpid, in_port), 0)
    h1, h2 = h & 0xFFFF, h >> 16
    bits = 0
    for i in range(3):
        bits |= 1 << ((h1 + i * h2) % 32)
    return bits


def set_verify_port(verify_port: int, dpid: int, in_port: int) -> int:
    return verify_port | port_bits(dpid, in_port)


def rule_bytes(dpid: int, table_id: int, priority: int, cookie: int, rule_id: int = 0) -> bytes:
    """u_r: dpid(8) | table_id(1) | priority(2) | cookie(8) | rule_id(4), all big-endian."""
    return struct.pack(">QBHQI", dpid, table_id, priority, cookie, rule_id)


def set_verify_rule(
    verify_rule: int, dpid: int, table_id: int, priority: int, cookie: int, rule_id: int = 0
) -> int:
    """One CRC-16/CCITT chain step (poly 0x1021, no reflection, no final XOR)."""
    return binascii.crc_hqx(rule_bytes(dpid, table_id, priority, cookie, rule_id), verify_rule)


def pack_header(verify_port: int, verify_rule: int, marked: bool = False) -> bytes:
    """The 8 bytes of the shim: EtherType 0x0820 (0x0821 when marked), Verify_Port,
    Verify_Rule."""
    etype = VERIFY_ETHERTYPE_MARKED if marked else VERIFY_ETHERTYPE
    return struct.pack(">HIH", etype, verify_port, verify_rule)


def unpack_header(data: bytes) -> tuple[int, int]:
    """(Verify_Port, Verify_Rule) from the 8 shim bytes, marked or not; ValueError if they
    are not a shim."""
    if len(data) < VERIFY_HEADER_LEN:
        raise ValueError(f"Verify header needs {VERIFY_HEADER_LEN} bytes, got {len(data)}")
    etype, vport, vrule = struct.unpack_from(">HIH", data)
    if etype not in VERIFY_ETHERTYPES:
        raise ValueError(
            f"EtherType 0x{etype:04x} is not a Verify type (0x{VERIFY_ETHERTYPE:04x}, "
            f"0x{VERIFY_ETHERTYPE_MARKED:04x})"
        )
    return vport, vrule
