"""OpenFlow wire helpers for the proxy, and conversion to the model's FlowMod / Group.

Everything here works on raw bytes of OpenFlow 1.3 messages (the proxy relays bytes, so
it edits bytes): framing, the canonical form of a match (the key of a rule ID), the
Nicira-extension action `set_verify_rule:ID` of ovs-patches/0003 and its removal, and
the structural checks that decide whether a message is well formed.

`set_verify_rule:ID` on the wire (NXAST_RAW_SET_VERIFY_RULE_ID, "NX1.0+(64): uint32_t"),
16 bytes, checked against the patched `ovs-ofctl ofp-print`:

    ff ff | 00 10 | 00 00 23 20 | 00 40 | 00 00 | ID (4 bytes, big-endian)
    type    len     NX vendor     subtype  pad

Conversion to cpc (`flowmod_to_cpc`, `group_to_cpc`) uses os-ken's OpenFlow 1.3 parser
for the instructions and actions; it raises `cpc.rules.ModelError` for what the model
does not represent.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from cpc.fields import OFPVID_PRESENT, WIDTH
from cpc.rules import (
    OFPFF_CHECK_OVERLAP,
    OFPG_ANY,
    OFPP_ANY,
    FlowEntry,
    FlowMod,
    Group,
    Instructions,
    Match,
    ModelError,
)

# The constants below are OpenFlow's; pazzd imports this module at start-up, and os-ken's
# ofproto package (which has them all) takes about 0.4 s to import. The proxy checks
# messages with os-ken's constants (pazzd.proxy.wire).
OFP10 = 0x01
OFP13 = 0x04
SUPPORTED_VERSIONS = (OFP10, OFP13)

# Message types shared by 1.0 and 1.3.
OFPT_HELLO = 0
OFPT_ERROR = 1
OFPT_ECHO_REQUEST = 2
OFPT_ECHO_REPLY = 3
OFPT_EXPERIMENTER = 4
OFPT_FEATURES_REQUEST = 5
OFPT_FEATURES_REPLY = 6
# OpenFlow 1.3 message types.
OFPT_PACKET_IN = 10
OFPT_FLOW_REMOVED = 11
OFPT_PORT_STATUS = 12
OFPT_PACKET_OUT = 13
OFPT_FLOW_MOD = 14
OFPT_GROUP_MOD = 15
OFPT_MULTIPART_REQUEST = 18
OFPT_MULTIPART_REPLY = 19
OFPT_BARRIER_REQUEST = 20
OFPT_BARRIER_REPLY = 21

OFPMP_FLOW = 1
OFPMPF_REPLY_MORE = 1
OFPTT_ALL = 0xFF
OFPP_TABLE = 0xFFFFFFF9
OFPCML_NO_BUFFER = 0xFFFF
OFP_NO_BUFFER = 0xFFFFFFFF

FC_ADD, FC_MODIFY, FC_MODIFY_STRICT, FC_DELETE, FC_DELETE_STRICT = range(5)
FC_NAMES = ("add", "modify", "modify_strict", "delete", "delete_strict")
GC_ADD, GC_MODIFY, GC_DELETE = range(3)
OFPG_ALL = 0xFFFFFFFC
GROUP_TYPE_NAMES = {0: "all", 1: "select", 2: "indirect", 3: "ff"}

# Instruction and action types (1.3).
OFPIT_GOTO_TABLE, OFPIT_WRITE_METADATA, OFPIT_WRITE_ACTIONS = 1, 2, 3
OFPIT_APPLY_ACTIONS, OFPIT_CLEAR_ACTIONS, OFPIT_METER = 4, 5, 6
OFPAT_OUTPUT, OFPAT_GROUP, OFPAT_SET_FIELD, OFPAT_EXPERIMENTER = 0, 22, 25, 0xFFFF

NX_VENDOR_ID = 0x2320
NXAST_SET_VERIFY_RULE_ID = 64
VERIFY_SUBTYPES = (60, 61, 62, 63, 64)
_VR = struct.Struct("!HHIHxxI")
VERIFY_ACTION_LEN = 16

HDR = struct.Struct("!BBHI")
FLOW_MOD = struct.Struct("!QQBBHHHIIIH2x")  # after the header; 40 bytes
FLOW_STATS = struct.Struct("!HBxIIHHHH4xQQQ")  # 48 bytes
FLOW_REMOVED = struct.Struct("!QHBBIIHHQQ")  # after the header; 40 bytes
GROUP_MOD = struct.Struct("!HBxI")
BUCKET = struct.Struct("!HHII4x")
PORT_STATUS_LEN = 8 + 8 + 64
MAX_XID = 0xFFFFFFFF


class ProtocolError(ValueError):
    """A message that is not well formed; the peer that sent it is disconnected."""


def header(data: bytes) -> tuple[int, int, int, int]:
    """(version, type, length, xid) of a message."""
    return HDR.unpack_from(data)


def message(version: int, mtype: int, xid: int, body: bytes = b"") -> bytes:
    return HDR.pack(version, mtype, 8 + len(body), xid) + body


def set_xid(data: bytes, xid: int) -> bytes:
    return data[:4] + struct.pack("!I", xid) + data[8:]


def hello(versions=SUPPORTED_VERSIONS, xid: int = 0) -> bytes:
    """A HELLO with a version bitmap element (OpenFlow 1.3.1 section 7.5.1)."""
    bitmap = 0
    for v in versions:
        bitmap |= 1 << v
    return message(max(versions), OFPT_HELLO, xid, struct.pack("!HHI", 1, 8, bitmap))


def hello_versions(data: bytes) -> set[int]:
    """The versions a HELLO offers: its bitmap if it has one, else every version <= its own."""
    version = data[0]
    off = 8
    while off + 4 <= len(data):
        etype, elen = struct.unpack_from("!HH", data, off)
        if elen < 4 or off + elen > len(data):
            raise ProtocolError("HELLO element with a bad length")
        if etype == 1:
            out = set()
            for i in range((elen - 4) // 4):
                (word,) = struct.unpack_from("!I", data, off + 4 + 4 * i)
                out |= {32 * i + b for b in range(32) if word >> b & 1}
            return out
        off += (elen + 7) // 8 * 8
    return set(range(1, version + 1))


# --- matches ------------------------------------------------------------------------------
def match_span(data: bytes, off: int) -> tuple[bytes, int]:
    """(OXM bytes, padded length) of the ofp_match at off. Raises ProtocolError."""
    if off + 4 > len(data):
        raise ProtocolError("truncated match")
    mtype, mlen = struct.unpack_from("!HH", data, off)
    if mtype != 1 or mlen < 4:
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
        if hdr >> 16 == 0xFFFF:
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


# --- instructions and actions --------------------------------------------------------------
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


def verify_rule_action(rule_id: int) -> bytes:
    return _VR.pack(OFPAT_EXPERIMENTER, VERIFY_ACTION_LEN, NX_VENDOR_ID, 64, rule_id)


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


OFPET_BAD_REQUEST = 1
OFPET_BAD_ACTION = 2
OFPBRC_BAD_LEN = 6
OFPBAC_EPERM = 6
OFPET_FLOW_MOD_FAILED = 5
OFPFMFC_EPERM = 6  # permissions error


def error_msg(version: int, xid: int, etype: int, code: int, request: bytes) -> bytes:
    """An OFPT_ERROR answering request (its first 64 bytes as data, as the spec asks)."""
    return message(version, OFPT_ERROR, xid, struct.pack("!HH", etype, code) + request[:64])


# --- messages -----------------------------------------------------------------------------
@dataclass(slots=True)
class RawFlowMod:
    """An OpenFlow 1.3 FlowMod, split into the parts the proxy needs."""

    xid: int
    cookie: int
    cookie_mask: int
    table: int
    command: int
    idle: int
    hard: int
    priority: int
    buffer_id: int
    out_port: int
    out_group: int
    flags: int
    oxm: bytes
    mkey: bytes
    instr: bytes
    match_end: int  # offset of the instructions in the message

    @property
    def command_name(self) -> str:
        return FC_NAMES[self.command] if self.command < 5 else str(self.command)


def parse_flow_mod(data: bytes) -> RawFlowMod:
    if len(data) < 56:
        raise ProtocolError("FLOW_MOD shorter than 56 bytes")
    xid = HDR.unpack_from(data)[3]
    (cookie, cmask, table, cmd, idle, hard, prio, buf, oport, ogroup, flags) = FLOW_MOD.unpack_from(
        data, 8
    )
    if cmd > FC_DELETE_STRICT:
        raise ProtocolError(f"FLOW_MOD command {cmd}")
    oxm, mlen = match_span(data, 48)
    mkey = canonical_match(oxm)
    instr = bytes(data[48 + mlen :])
    check_instructions(instr)
    return RawFlowMod(
        xid,
        cookie,
        cmask,
        table,
        cmd,
        idle,
        hard,
        prio,
        buf,
        oport,
        ogroup,
        flags,
        oxm,
        mkey,
        instr,
        48 + mlen,
    )


def flow_mod_with_instructions(data: bytes, fm: RawFlowMod, instr: bytes) -> bytes:
    body = data[8 : fm.match_end] + instr
    return HDR.pack(data[0], data[1], 8 + len(body), fm.xid) + body


@dataclass(slots=True)
class FlowStat:
    """One entry of a flow-stats reply, with the proxy's ID taken out of its instructions."""

    table: int
    priority: int
    cookie: int
    mkey: bytes
    oxm: bytes
    instr: bytes  # as the controller sent them (ID action removed)
    rule_id: int | None
    idle: int
    hard: int
    flags: int
    packets: int
    bytes: int
    duration: float

    def entry(self, dpid: int) -> FlowEntry:
        """The entry as the model sees it. Raises ModelError if it cannot be modelled."""
        return raw_entry_to_cpc(
            dpid,
            self.table,
            self.priority,
            self.mkey,
            self.cookie,
            self.instr,
            self.rule_id or 0,
            self.idle,
            self.hard,
            self.flags,
        )


def parse_flow_stats_body(body: bytes, strip: bool) -> tuple[list[FlowStat], bytes]:
    """The entries of a flow-stats multipart body and the body with the IDs stripped."""
    out, parts = [], []
    off, n = 0, len(body)
    while off < n:
        if off + 56 > n:
            raise ProtocolError("truncated flow-stats entry")
        (ln, table, dsec, dnsec, prio, idle, hard, flags, cookie, pk, by) = FLOW_STATS.unpack_from(
            body, off
        )
        if ln < 56 or off + ln > n:
            raise ProtocolError(f"flow-stats entry with a bad length {ln}")
        entry = body[off : off + ln]
        oxm, mlen = match_span(entry, 48)
        instr = bytes(entry[48 + mlen :])
        check_instructions(instr)
        rid = None
        if strip:
            instr2, rid = strip_rule_id(instr)
            if rid is not None:
                head = struct.pack("!H", 48 + mlen + len(instr2)) + entry[2 : 48 + mlen]
                entry = head + instr2
                instr = instr2
        parts.append(entry)
        out.append(
            FlowStat(
                table,
                prio,
                cookie,
                canonical_match(oxm),
                oxm,
                instr,
                rid,
                idle,
                hard,
                flags,
                pk,
                by,
                dsec + dnsec / 1e9,
            )
        )
        off += ln
    return out, b"".join(parts)


def flow_stats_request(xid: int, table: int = OFPTT_ALL) -> bytes:
    body = struct.pack("!HH4x", OFPMP_FLOW, 0)
    body += struct.pack("!B3xII4xQQ", table, OFPP_ANY, OFPG_ANY, 0, 0)
    body += struct.pack("!HH4x", 1, 4)
    return message(OFP13, OFPT_MULTIPART_REQUEST, xid, body)


def flow_mod(
    xid, table, command, priority, oxm, instr, cookie=0, cookie_mask=0, flags=0, idle=0, hard=0
) -> bytes:
    """An OpenFlow 1.3 FlowMod from its parts (oxm: the OXM TLVs of the match)."""
    mlen = 4 + len(oxm)
    match = struct.pack("!HH", 1, mlen) + oxm + b"\0" * ((mlen + 7) // 8 * 8 - mlen)
    body = FLOW_MOD.pack(
        cookie,
        cookie_mask,
        table,
        command,
        idle,
        hard,
        priority,
        OFP_NO_BUFFER,
        OFPP_ANY,
        OFPG_ANY,
        flags,
    )
    return message(OFP13, OFPT_FLOW_MOD, xid, body + match + instr)


def output_action(port: int, max_len: int = OFPCML_NO_BUFFER) -> bytes:
    return struct.pack("!HHIH6x", OFPAT_OUTPUT, 16, port, max_len)


def parse_packet_in(msg: bytes) -> tuple[int, int | None, bytes]:
    """(buffer_id, in_port or None, frame) of an OpenFlow 1.3 PACKET_IN."""
    if len(msg) < 34:
        raise ProtocolError("PACKET_IN shorter than 34 bytes")
    (buffer_id,) = struct.unpack_from("!I", msg, 8)
    mtype, mlen = struct.unpack_from("!HH", msg, 24)
    if mtype != 1 or mlen < 4 or 24 + mlen > len(msg):
        raise ProtocolError("PACKET_IN with a bad match")
    in_port = None
    for cls, field, value, _mask in oxm_fields(msg[28 : 24 + mlen]):
        if cls == 0x8000 and field == OXM_IN_PORT:
            in_port = value
    data_at = 24 + (mlen + 7) // 8 * 8 + 2
    return buffer_id, in_port, msg[data_at:]


def packet_out_buffer(msg: bytes) -> int:
    """The buffer_id of an OpenFlow 1.3 PACKET_OUT."""
    return struct.unpack_from("!I", msg, 8)[0]


def packet_out(xid: int, in_port: int, data: bytes, actions: bytes | None = None) -> bytes:
    acts = output_action(OFPP_TABLE, 0) if actions is None else actions
    body = struct.pack("!IIH6x", OFP_NO_BUFFER, in_port, len(acts)) + acts + data
    return message(OFP13, OFPT_PACKET_OUT, xid, body)


# --- conversion to cpc ---------------------------------------------------------------------
OXM_TO_MODEL = {
    3: "eth_dst",
    4: "eth_src",
    5: "eth_type",
    6: "vlan_vid",
    10: "ip_proto",
    11: "ipv4_src",
    12: "ipv4_dst",
    13: "tp_src",
    14: "tp_dst",
    15: "tp_src",
    16: "tp_dst",
}
OXM_IN_PORT = 0
OXM_PROTO = {13: 6, 14: 6, 15: 17, 16: 17}  # tcp_src, tcp_dst, udp_src, udp_dst
NOOP_SET_FIELDS = {8, 9, 7}  # ip_dscp, ip_ecn, vlan_pcp
NOOP_ACTIONS = {11, 12, 15, 16, 21, 23, 24}  # copy ttl, mpls ttl, set_queue, nw ttl
PUSH_VLAN, POP_VLAN = 17, 18


def cpc_match(mkey: bytes) -> Match:
    values: dict[str, tuple[int, int]] = {}
    in_port = None
    protos: set[int] = set()
    for cls, field, value, mask in oxm_fields(mkey):
        if cls != 0x8000:
            raise ModelError(f"match field class 0x{cls:x} is not modelled")
        if field == OXM_IN_PORT:
            in_port = value
            continue
        name = OXM_TO_MODEL.get(field)
        if name is None:
            raise ModelError(f"match field OXM {field} is not modelled")
        full = (1 << WIDTH[name]) - 1
        values[name] = (value & full, mask & full)
        proto = OXM_PROTO.get(field)
        if proto is not None:
            protos.add(proto)
    # tcp_* and udp_* share the model's tp_* bits: each needs its own ip_proto.
    if protos and {values.get("ip_proto")} != {(p, 0xFF) for p in protos}:
        raise ModelError("tcp_* fields need ip_proto=6 and udp_* fields ip_proto=17")
    return Match.build(values, in_port)


def cpc_actions(acts: bytes) -> tuple[tuple[tuple, ...], int]:
    """(model actions, rule id) of an action list."""
    out: list[tuple] = []
    rule_id = 0
    for t, off, ln in walk_tlvs(acts, "action"):
        if t == OFPAT_OUTPUT:
            out.append(("output", struct.unpack_from("!I", acts, off + 4)[0]))
        elif t == OFPAT_GROUP:
            out.append(("group", struct.unpack_from("!I", acts, off + 4)[0]))
        elif t == OFPAT_SET_FIELD:
            fields = oxm_fields(_set_field_oxm(acts[off + 4 : off + ln]))
            if len(fields) != 1:
                raise ModelError("set_field with more than one field")
            cls, field, value, _ = fields[0]
            if cls == 0x8000 and field in NOOP_SET_FIELDS:
                continue
            name = OXM_TO_MODEL.get(field) if cls == 0x8000 else None
            if name is None:
                raise ModelError(f"set_field on OXM {field} is not modelled")
            if name == "vlan_vid":
                value |= OFPVID_PRESENT
            out.append(("set_field", name, value & ((1 << WIDTH[name]) - 1)))
        elif t == PUSH_VLAN:
            out.append(("push_vlan",))
        elif t == POP_VLAN:
            out.append(("pop_vlan",))
        elif t in NOOP_ACTIONS:
            continue
        elif t == OFPAT_EXPERIMENTER and ln >= 16:
            vendor, sub = struct.unpack_from("!IH", acts, off + 4)
            if vendor == NX_VENDOR_ID and sub in VERIFY_SUBTYPES:
                if sub == NXAST_SET_VERIFY_RULE_ID:
                    rule_id = struct.unpack_from("!I", acts, off + 12)[0]
                continue
            raise ModelError(f"experimenter action 0x{vendor:x}/{sub} is not modelled")
        else:
            raise ModelError(f"action type {t} is not modelled")
    return tuple(out), rule_id


def _set_field_oxm(body: bytes) -> bytes:
    (hdr,) = struct.unpack_from("!I", body)
    return body[: 4 + (hdr & 0xFF)]


def cpc_instructions(instr: bytes) -> tuple[Instructions, int]:
    apply: tuple = ()
    write: tuple = ()
    clear = False
    goto = None
    rule_id = 0
    for t, off, ln in walk_tlvs(instr, "instruction"):
        if t == OFPIT_APPLY_ACTIONS:
            apply, rid = cpc_actions(instr[off + 8 : off + ln])
            rule_id = rid or rule_id
        elif t == OFPIT_WRITE_ACTIONS:
            write, _ = cpc_actions(instr[off + 8 : off + ln])
        elif t == OFPIT_CLEAR_ACTIONS:
            clear = True
        elif t == OFPIT_GOTO_TABLE:
            goto = instr[off + 4]
        elif t == OFPIT_METER:
            continue
        else:
            raise ModelError(f"instruction type {t} is not modelled")
    return Instructions(apply, write, clear, goto), rule_id


def raw_entry_to_cpc(
    dpid, table, priority, mkey, cookie, instr, rule_id, idle=0, hard=0, flags=0
) -> FlowEntry:
    ins, rid = cpc_instructions(instr)
    return FlowEntry(
        dpid=dpid,
        table=table,
        priority=priority,
        match=cpc_match(mkey),
        instructions=ins,
        cookie=cookie,
        rule_id=rule_id or rid,
        idle_timeout=idle,
        hard_timeout=hard,
        flags=flags & ~OFPFF_CHECK_OVERLAP,  # checked by the switch, which accepted it
    )


def check_transport_sets(instr: bytes, match: Match) -> None:
    """set_field on tcp_* needs ip_proto=6 in the match, on udp_* 17 (the model's tp_*
    fields stand for both; the switch refuses the other protocol)."""
    proto = match.get("ip_proto")
    for t, off, ln in walk_tlvs(instr, "instruction"):
        if t not in (OFPIT_APPLY_ACTIONS, OFPIT_WRITE_ACTIONS):
            continue
        acts = instr[off + 8 : off + ln]
        for at, aoff, aln in walk_tlvs(acts, "action"):
            if at != OFPAT_SET_FIELD:
                continue
            fields = oxm_fields(_set_field_oxm(acts[aoff + 4 : aoff + aln]))
            if fields and fields[0][0] == 0x8000 and fields[0][1] in OXM_PROTO:
                want = OXM_PROTO[fields[0][1]]
                if proto != (want, 0xFF):
                    raise ModelError(f"set_field on a transport port needs ip_proto={want}")


def flowmod_to_cpc(dpid: int, fm: RawFlowMod, rule_id: int = 0) -> FlowMod:
    """The model's FlowMod for a raw one (instructions as the controller sent them)."""
    cmd = fm.command_name
    ins, rid = (
        cpc_instructions(fm.instr)
        if cmd in ("add", "modify", "modify_strict")
        else (Instructions(), 0)
    )
    match = cpc_match(fm.mkey)
    if cmd in ("add", "modify", "modify_strict"):
        check_transport_sets(fm.instr, match)
    return FlowMod(
        command=cmd,
        dpid=dpid,
        table=fm.table,
        priority=fm.priority,
        match=match,
        instructions=ins,
        cookie=fm.cookie,
        cookie_mask=fm.cookie_mask,
        out_port=fm.out_port,
        out_group=fm.out_group,
        rule_id=rule_id or rid,
        idle_timeout=fm.idle,
        hard_timeout=fm.hard,
        flags=fm.flags & ~OFPFF_CHECK_OVERLAP,  # checked by the switch
    )


@dataclass(slots=True)
class RawGroupMod:
    command: int
    type: int
    group_id: int
    buckets: bytes


def parse_group_mod(data: bytes) -> RawGroupMod:
    if len(data) < 16:
        raise ProtocolError("GROUP_MOD shorter than 16 bytes")
    cmd, gtype, gid = GROUP_MOD.unpack_from(data, 8)
    buckets = bytes(data[16:])
    for _, off, ln in walk_buckets(buckets):
        walk_tlvs(buckets[off + 16 : off + ln], "action")
    return RawGroupMod(cmd, gtype, gid, buckets)


def group_to_cpc(dpid: int, gtype: int, gid: int, buckets: bytes) -> Group:
    name = GROUP_TYPE_NAMES.get(gtype)
    if name not in ("all", "select", "indirect"):
        raise ModelError(f"group type {name or gtype} is not modelled")
    parsed = []
    for _, off, ln in walk_buckets(buckets):
        acts, _ = cpc_actions(buckets[off + 16 : off + ln])
        parsed.append(acts)
    if name == "indirect" and len(parsed) != 1:
        raise ModelError("an indirect group has exactly one bucket")
    return Group(dpid, gid, name, tuple(parsed))


def parse_port_status(data: bytes) -> tuple[int, int, bool]:
    """(reason, port, up) of an OpenFlow 1.3 PORT_STATUS."""
    if len(data) < PORT_STATUS_LEN:
        raise ProtocolError("PORT_STATUS shorter than 80 bytes")
    reason = data[8]
    port = struct.unpack_from("!I", data, 16)[0]
    config, state = struct.unpack_from("!II", data, 16 + 36)
    up = reason != 1 and not (config & 1) and not (state & 1)
    return reason, port, up


@dataclass(slots=True)
class RawFlowRemoved:
    cookie: int
    priority: int
    reason: int
    table: int
    mkey: bytes


OFPRR_IDLE_TIMEOUT, OFPRR_HARD_TIMEOUT, OFPRR_DELETE, OFPRR_GROUP_DELETE = 0, 1, 2, 3


def parse_flow_removed(data: bytes) -> RawFlowRemoved:
    if len(data) < 56:
        raise ProtocolError("FLOW_REMOVED shorter than 56 bytes")
    cookie, prio, reason, table = struct.unpack_from("!QHBB", data, 8)
    oxm, _ = match_span(data, 48)
    return RawFlowRemoved(cookie, prio, reason, table, canonical_match(oxm))


def features_dpid(data: bytes) -> int:
    if len(data) < 32:
        raise ProtocolError("FEATURES_REPLY shorter than 32 bytes")
    return struct.unpack_from("!Q", data, 8)[0]
