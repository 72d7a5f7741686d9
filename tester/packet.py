"""Sampled frames: the report predicate, Verify shim and header-field parsing, and a builder.

`parse_frame()` turns the raw header bytes of a sample into the model's header
dict (cpc.fields names, ints) plus the Verify tags, without scapy: it runs
once per sample on the hot path. `build_frame()` is its inverse for tests and
benchmarks (the reference emitter builds on it).
"""

from __future__ import annotations

import struct

from cpc.fields import ETH_TYPE_IPV4, OFPVID_PRESENT
from cpc.tags import VERIFY_ETHERTYPE, VERIFY_ETHERTYPE_MARKED

__all__ = [
    "is_report",
    "parse_frame",
    "build_frame",
    "ip_checksum",
    "ParsedFrame",
    "REPORT_MARK_ETHERTYPE",
]

REPORT_MARK_ETHERTYPE = VERIFY_ETHERTYPE
_VLAN_TPIDS = (0x8100, 0x88A8)
_VERIFY_TYPES = (VERIFY_ETHERTYPE, VERIFY_ETHERTYPE_MARKED)
_H = struct.Struct(">H")
_VERIFY = struct.Struct(">IH")
_IPV4 = struct.Struct(">BBHHHBBH4s4s")


OVS_REPORT_SOURCE_TYPE = 2  # ovs-patches/README.md: physical-entity data source
OVS_REPORT_INDEX_BASE = 0x820000  # report data-source index = 0x820000 + bridge sFlow sub-id


def is_report(sample) -> bool:
    """True when a flow sample is a Verify report rather than an ordinary ingress sample.

    Patched OVS (ovs-patches/README.md, "sFlow reports") marks reports exactly: data
    source class 2 with index 0x820000 + sub_id; its ordinary ingress samples keep class
    2 with index 1000 + sub_id and are never reports, even when the packet arrived on an
    inter-switch port already carrying the Verify header. For other agents (data source
    class 0, an ifIndex) the default rule applies: the sampled raw header carries the
    Verify EtherType 0x0820 (or the marked 0x0821) right after the source MAC, at bytes
    12-13.
    """
    if sample.source_type == OVS_REPORT_SOURCE_TYPE:
        return sample.source_index & 0xFF0000 == OVS_REPORT_INDEX_BASE
    h = sample.header
    return len(h) >= 14 and h[12] == 0x08 and h[13] in (0x20, 0x21)


class ParsedFrame:
    __slots__ = ("header", "verify_port", "verify_rule", "has_verify", "complete", "marked")

    def __init__(self, header, verify_port, verify_rule, has_verify, complete, marked=False):
        self.header = header
        self.verify_port = verify_port
        self.verify_rule = verify_rule
        self.has_verify = has_verify
        self.complete = complete  # False when the sampled bytes end inside a header we parse
        self.marked = marked  # the Verify header carries the probe mark (0x0821)


def parse_frame(data: bytes) -> ParsedFrame:
    """Parse Ethernet [+ Verify] [+ 802.1Q] [+ IPv4 [+ TCP/UDP ports]] into model fields.

    Fields the frame does not have are 0, as in cpc.fields.parse_header. Never raises
    on short input: `complete` is False instead. A marked Verify header (0x0821) is a
    Verify header with `marked` set; its tags read the same.
    """
    n = len(data)
    hdr = {
        "ipv4_dst": 0,
        "ipv4_src": 0,
        "ip_proto": 0,
        "tp_dst": 0,
        "tp_src": 0,
        "eth_type": 0,
        "vlan_vid": 0,
        "eth_dst": 0,
        "eth_src": 0,
    }
    if n < 14:
        return ParsedFrame(hdr, 0, 0, False, False)
    hdr["eth_dst"] = int.from_bytes(data[0:6], "big")
    hdr["eth_src"] = int.from_bytes(data[6:12], "big")
    off = 12
    etype = (data[12] << 8) | data[13]
    vport = vrule = 0
    has_verify = marked = False
    if etype in _VERIFY_TYPES:
        if n < 22:
            return ParsedFrame(hdr, 0, 0, False, False)
        vport, vrule = _VERIFY.unpack_from(data, 14)
        has_verify = True
        marked = etype == VERIFY_ETHERTYPE_MARKED
        off = 20
        etype = (data[20] << 8) | data[21]
    if etype in _VLAN_TPIDS:
        if n < off + 6:
            return ParsedFrame(hdr, vport, vrule, has_verify, False, marked)
        tci = (data[off + 2] << 8) | data[off + 3]
        hdr["vlan_vid"] = OFPVID_PRESENT | (tci & 0x0FFF)
        off += 4
        etype = (data[off] << 8) | data[off + 1]
    hdr["eth_type"] = etype
    off += 2
    if etype != ETH_TYPE_IPV4:
        return ParsedFrame(hdr, vport, vrule, has_verify, True, marked)
    if n < off + 20:
        return ParsedFrame(hdr, vport, vrule, has_verify, False, marked)
    vihl, _tos, _tlen, _id, frag, _ttl, proto, _ck, src, dst = _IPV4.unpack_from(data, off)
    hdr["ipv4_src"] = int.from_bytes(src, "big")
    hdr["ipv4_dst"] = int.from_bytes(dst, "big")
    hdr["ip_proto"] = proto
    if proto in (6, 17) and frag & 0x1FFF == 0:
        off += (vihl & 0x0F) * 4
        if n < off + 4:
            return ParsedFrame(hdr, vport, vrule, has_verify, False, marked)
        hdr["tp_src"] = (data[off] << 8) | data[off + 1]
        hdr["tp_dst"] = (data[off + 2] << 8) | data[off + 3]
    return ParsedFrame(hdr, vport, vrule, has_verify, True, marked)


def ip_checksum(b: bytes) -> int:
    """The Internet checksum of b (0 over a header whose checksum field is right)."""
    s = sum(struct.unpack(f">{len(b) // 2}H", b))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def build_frame(
    header: dict[str, int],
    verify: tuple[int, int] | None = None,
    payload_len: int = 18,
    marked: bool = False,
) -> bytes:
    """Ethernet [+ Verify shim] [+ 802.1Q] + IPv4 [+ TCP/UDP] for a model header dict.

    verify is (Verify_Port, Verify_Rule) or None for an untagged frame; marked gives the
    shim the probe mark. Non-IPv4 eth_types get `payload_len` zero bytes after the EtherType.
    """
    out = bytearray(header.get("eth_dst", 0).to_bytes(6, "big"))
    out += header.get("eth_src", 0).to_bytes(6, "big")
    if verify is not None:
        vtype = VERIFY_ETHERTYPE_MARKED if marked else VERIFY_ETHERTYPE
        out += struct.pack(">HIH", vtype, verify[0], verify[1])
    vid = header.get("vlan_vid", 0)
    if vid & OFPVID_PRESENT:
        out += struct.pack(">HH", 0x8100, vid & 0x0FFF)
    etype = header.get("eth_type", 0)
    out += _H.pack(etype)
    if etype != ETH_TYPE_IPV4:
        return bytes(out) + bytes(payload_len)
    proto = header.get("ip_proto", 0)
    if proto == 6:
        l4 = struct.pack(
            ">HHIIBBHHH",
            header.get("tp_src", 0),
            header.get("tp_dst", 0),
            0,
            0,
            0x50,
            0x02,
            8192,
            0,
            0,
        )
    elif proto == 17:
        l4 = struct.pack(
            ">HHHH", header.get("tp_src", 0), header.get("tp_dst", 0), 8 + payload_len, 0
        )
    else:
        l4 = b""
    body = l4 + bytes(payload_len)
    ip = bytearray(
        _IPV4.pack(
            0x45,
            0,
            20 + len(body),
            1,
            0,
            64,
            proto,
            0,
            header.get("ipv4_src", 0).to_bytes(4, "big"),
            header.get("ipv4_dst", 0).to_bytes(4, "big"),
        )
    )
    ip[10:12] = _H.pack(ip_checksum(bytes(ip)))
    return bytes(out) + bytes(ip) + body
