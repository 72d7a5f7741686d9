"""Probe frames for model headers, fast.

scapy builds one template frame per kind (TCP, UDP, other IPv4 protocol,
non-IP; with or without an 802.1Q tag; with or without a leading Verify shim, marked
or not);
`Crafter.frame()` copies the template and patches the header fields with
struct, then fixes the IPv4 header checksum and the TCP/UDP checksum from the
template's precomputed partial sum plus the patched words (RFC 1071 ones'
complement arithmetic). tests/fuzzer/test_craft.py checks every kind against
scapy byte for byte.

The payload starts with b"PZ" and a 32-bit probe sequence number, so a report's
sampled header bytes name the probe that caused it (`probe_seq`).
"""

from __future__ import annotations

import struct
from collections.abc import Mapping

from scapy.layers.inet import IP, TCP, UDP
from scapy.layers.l2 import Dot1Q, Ether
from scapy.packet import Raw

from cpc.fields import ETH_TYPE_IPV4, OFPVID_PRESENT
from cpc.tags import VERIFY_ETHERTYPE_MARKED, VERIFY_ETHERTYPES, VERIFY_PORT_INIT, VERIFY_RULE_INIT
from cpc.verify_layer import Verify

__all__ = ["Crafter", "PROBE_MAGIC", "probe_seq"]

PROBE_MAGIC = b"PZ"
MIN_FRAME = 60  # Ethernet minimum without FCS
_H = struct.Struct(">H")
_I = struct.Struct(">I")
_HH = struct.Struct(">HH")


def _sum16(b: bytes) -> int:
    if len(b) % 2:
        b += b"\0"
    return sum(struct.unpack(f">{len(b) // 2}H", b))


def _fold(s: int) -> int:
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return s


class _Template:
    __slots__ = ("buf", "l3", "l4", "kind", "ip_base", "l4_base", "seq_off", "tp_csum", "vlan")

    def __init__(self, buf, l3, l4, kind, ip_base, l4_base, seq_off, tp_csum, vlan):
        self.buf, self.l3, self.l4, self.kind = buf, l3, l4, kind
        self.ip_base, self.l4_base, self.seq_off = ip_base, l4_base, seq_off
        self.tp_csum, self.vlan = tp_csum, vlan


class Crafter:
    """Ethernet frames for model header dicts (cpc.fields names).

    payload_len: bytes after the transport header (at least 6: magic + sequence number).
    pretag: put a Verify shim (VERIFY_PORT_INIT, VERIFY_RULE_INIT) after the source MAC,
    as an edge port's push_verify would; for packet-out injection, where the switch does
    not see the frame arrive on the edge port (push_verify leaves a present header alone).
    mark: the same shim with the probe mark (EtherType 0x0821, docs/verify-header.md "The
    probe mark"), so that the exit switch reports the probe always; implies pretag. The
    fuzzer's probes are marked.
    """

    def __init__(self, payload_len: int = 18, pretag: bool = False, mark: bool = False) -> None:
        if payload_len < 6:
            raise ValueError("payload_len must be at least 6 (magic + sequence number)")
        self.payload_len = payload_len
        self.pretag = pretag or mark
        self.mark = mark
        self._templates: dict[tuple, _Template] = {}

    # --- templates -----------------------------------------------------------------------
    def _template(self, kind: str, vlan: bool) -> _Template:
        key = (kind, vlan)
        t = self._templates.get(key)
        if t is None:
            t = self._templates[key] = self._build(kind, vlan)
        return t

    def scapy_packet(self, h: Mapping[str, int], seq: int = 0):
        """The same frame as frame(h, seq), built by scapy (slow; templates and tests)."""
        payload = PROBE_MAGIC + _I.pack(seq & 0xFFFFFFFF) + bytes(self.payload_len - 6)
        mac = lambda v: ":".join(f"{(v >> s) & 0xFF:02x}" for s in range(40, -8, -8))  # noqa: E731
        et = h.get("eth_type", 0)
        vid = h.get("vlan_vid", 0)
        pkt = Ether(dst=mac(h.get("eth_dst", 0)), src=mac(h.get("eth_src", 0)))
        if self.mark:
            pkt.type = VERIFY_ETHERTYPE_MARKED
        if self.pretag:  # a fresh header, as an edge port's push_verify writes it
            pkt = pkt / Verify(port=VERIFY_PORT_INIT, rule=VERIFY_RULE_INIT)
        if vid & OFPVID_PRESENT:
            pkt = pkt / Dot1Q(vlan=vid & 0x0FFF, type=et)
        else:
            pkt.lastlayer().type = et  # Ether's, or the Verify header's
        return self._finish_scapy(pkt, h, et, payload)

    @staticmethod
    def _finish_scapy(pkt, h, et, payload):
        import ipaddress

        if et != ETH_TYPE_IPV4:
            pkt = pkt / Raw(payload)
        else:
            proto = h.get("ip_proto", 0)
            ip = IP(
                src=str(ipaddress.IPv4Address(h.get("ipv4_src", 0))),
                dst=str(ipaddress.IPv4Address(h.get("ipv4_dst", 0))),
                proto=proto,
                ttl=64,
                id=1,
                flags=0,
            )
            if proto == 6:
                l4 = TCP(
                    sport=h.get("tp_src", 0),
                    dport=h.get("tp_dst", 0),
                    flags="S",
                    seq=0,
                    window=8192,
                )
                pkt = pkt / ip / l4 / Raw(payload)
            elif proto == 17:
                pkt = (
                    pkt
                    / ip
                    / UDP(sport=h.get("tp_src", 0), dport=h.get("tp_dst", 0))
                    / Raw(payload)
                )
            else:
                pkt = pkt / ip / Raw(payload)
        data = bytes(pkt)
        return data + bytes(max(0, MIN_FRAME - len(data)))

    def _build(self, kind: str, vlan: bool) -> _Template:
        h = {
            "eth_type": ETH_TYPE_IPV4 if kind != "nonip" else 0x0806,
            "ip_proto": {"tcp": 6, "udp": 17, "ip": 0}.get(kind, 0),
            "vlan_vid": OFPVID_PRESENT if vlan else 0,
        }
        buf = bytearray(self.scapy_packet(h, 0))
        l2 = 12 + (8 if self.pretag else 0) + (4 if vlan else 0)
        l3 = l2 + 2
        if kind == "nonip":
            return _Template(buf, l3, l3, kind, 0, 0, l3 + 2, None, vlan)
        l4 = l3 + 20
        # Partial IPv4 header sum with checksum, proto, src and dst zeroed.
        ip = bytearray(buf[l3:l4])
        ip[10:12] = b"\0\0"
        ip[9] = 0
        ip[12:20] = bytes(8)
        ip_base = _sum16(bytes(ip))
        if kind == "tcp":
            hl, csum_off = 20, 16
        elif kind == "udp":
            hl, csum_off = 8, 6
        else:
            return _Template(buf, l3, l4, kind, ip_base, 0, l4 + 2, None, vlan)
        seg = bytearray(buf[l4 : l4 + hl + self.payload_len])
        seg[0:4] = bytes(4)  # ports
        seg[csum_off : csum_off + 2] = b"\0\0"
        seg[hl + 2 : hl + 6] = bytes(4)  # sequence number
        proto = 6 if kind == "tcp" else 17
        l4_base = _sum16(bytes(seg)) + proto + len(seg)  # pseudo header: zero, proto, length
        return _Template(buf, l3, l4, kind, ip_base, l4_base, l4 + hl + 2, l4 + csum_off, vlan)

    # --- the hot path ----------------------------------------------------------------------
    def frame(self, h: Mapping[str, int], seq: int = 0) -> bytes:
        """The probe frame of header h (a canonical header: see fuzzer.hspace.canonicalize)."""
        et = h.get("eth_type", 0)
        vid = h.get("vlan_vid", 0)
        vlan = bool(vid & OFPVID_PRESENT)
        if et != ETH_TYPE_IPV4:
            kind = "nonip"
        else:
            proto = h.get("ip_proto", 0)
            kind = "tcp" if proto == 6 else "udp" if proto == 17 else "ip"
        t = self._templates.get((kind, vlan)) or self._template(kind, vlan)
        b = bytearray(t.buf)
        b[0:6] = h.get("eth_dst", 0).to_bytes(6, "big")
        b[6:12] = h.get("eth_src", 0).to_bytes(6, "big")
        if vlan:
            _H.pack_into(b, t.l3 - 4, vid & 0x0FFF)
        seq &= 0xFFFFFFFF
        _I.pack_into(b, t.seq_off, seq)
        if kind == "nonip":
            _H.pack_into(b, t.l3 - 2, et)
            return bytes(b)
        l3 = t.l3
        src = h.get("ipv4_src", 0)
        dst = h.get("ipv4_dst", 0)
        proto = h.get("ip_proto", 0)
        b[l3 + 9] = proto
        _I.pack_into(b, l3 + 12, src)
        _I.pack_into(b, l3 + 16, dst)
        addr = (src >> 16) + (src & 0xFFFF) + (dst >> 16) + (dst & 0xFFFF)
        _H.pack_into(b, l3 + 10, ~_fold(t.ip_base + addr + proto) & 0xFFFF)
        if t.tp_csum is None:
            return bytes(b)
        sp, dp = h.get("tp_src", 0), h.get("tp_dst", 0)
        _HH.pack_into(b, t.l4, sp, dp)
        c = ~_fold(t.l4_base + addr + sp + dp + (seq >> 16) + (seq & 0xFFFF)) & 0xFFFF
        if c == 0 and t.kind == "udp":
            c = 0xFFFF
        _H.pack_into(b, t.tp_csum, c)
        return bytes(b)


def probe_seq(frame: bytes) -> int | None:
    """The probe sequence number of a (possibly truncated, possibly Verify-tagged) probe frame,
    or None when the frame is not a probe."""
    n = len(frame)
    off = 12
    if n < 14:
        return None
    et = _H.unpack_from(frame, off)[0]
    if et in VERIFY_ETHERTYPES:
        off += 8
        et = _H.unpack_from(frame, off)[0] if n >= off + 2 else -1
    if et in (0x8100, 0x88A8):
        off += 4
        et = _H.unpack_from(frame, off)[0] if n >= off + 2 else -1
    off += 2
    if et == ETH_TYPE_IPV4:
        if n < off + 20:
            return None
        proto = frame[off + 9]
        off += (frame[off] & 0x0F) * 4
        if proto == 6:
            if n < off + 13:
                return None
            off += (frame[off + 12] >> 4) * 4
        elif proto == 17:
            off += 8
    if n < off + 6 or frame[off : off + 2] != PROBE_MAGIC:
        return None
    return _I.unpack_from(frame, off + 2)[0]
