"""OpenFlow 1.3 messages the proxy parses or builds: FlowMod, flow-stats, PACKET_IN and
PACKET_OUT, GroupMod, PORT_STATUS, FLOW_REMOVED and FEATURES_REPLY.

The parsers check structure (lengths, match, instruction TLVs) and raise ProtocolError on a
message that is not well formed; they split a message into the parts the proxy needs and
keep the rest as bytes.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from cpc.rules import FlowEntry
from ofwire.actions import check_instructions, output_action, walk_buckets, walk_tlvs
from ofwire.consts import (
    FC_DELETE_STRICT,
    FC_NAMES,
    OFP13,
    OFP_NO_BUFFER,
    OFPG_ANY,
    OFPMP_FLOW,
    OFPMP_GROUP_DESC,
    OFPMT_OXM,
    OFPP_ANY,
    OFPP_TABLE,
    OFPPC_PORT_DOWN,
    OFPPR_DELETE,
    OFPPS_LINK_DOWN,
    OFPT_FLOW_MOD,
    OFPT_MULTIPART_REQUEST,
    OFPT_PACKET_OUT,
    OFPTT_ALL,
    OFPXMC_OPENFLOW_BASIC,
    OFPXMT_OFB_IN_PORT,
    PORT_STATUS_LEN,
)
from ofwire.framing import HDR, ProtocolError, message
from ofwire.match import canonical_match, match_span, oxm_fields
from ofwire.to_cpc import raw_entry_to_cpc
from ofwire.verify_action import strip_rule_id

__all__ = [
    "FLOW_MOD",
    "FLOW_STATS",
    "FLOW_REMOVED",
    "GROUP_MOD",
    "BUCKET",
    "RawFlowMod",
    "parse_flow_mod",
    "flow_mod_with_instructions",
    "flow_mod",
    "FlowStat",
    "parse_flow_stats_body",
    "flow_stats_request",
    "group_desc_request",
    "parse_group_desc_body",
    "parse_packet_in",
    "packet_out_buffer",
    "packet_out",
    "RawGroupMod",
    "parse_group_mod",
    "parse_port_status",
    "RawFlowRemoved",
    "parse_flow_removed",
    "features_dpid",
]

FLOW_MOD = struct.Struct("!QQBBHHHIIIH2x")  # after the header; 40 bytes
FLOW_STATS = struct.Struct("!HBxIIHHHH4xQQQ")  # 48 bytes
FLOW_REMOVED = struct.Struct("!QHBBIIHHQQ")  # after the header; 40 bytes
GROUP_MOD = struct.Struct("!HBxI")
BUCKET = struct.Struct("!HHII4x")


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


def flow_mod(
    xid, table, command, priority, oxm, instr, cookie=0, cookie_mask=0, flags=0, idle=0, hard=0
) -> bytes:
    """An OpenFlow 1.3 FlowMod from its parts (oxm: the OXM TLVs of the match)."""
    mlen = 4 + len(oxm)
    match = struct.pack("!HH", OFPMT_OXM, mlen) + oxm + b"\0" * ((mlen + 7) // 8 * 8 - mlen)
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
    body += struct.pack("!HH4x", OFPMT_OXM, 4)
    return message(OFP13, OFPT_MULTIPART_REQUEST, xid, body)


def group_desc_request(xid: int) -> bytes:
    """OFPMP_GROUP_DESC: every group of the switch with its buckets."""
    return message(OFP13, OFPT_MULTIPART_REQUEST, xid, struct.pack("!HH4x", OFPMP_GROUP_DESC, 0))


def parse_group_desc_body(body: bytes) -> list[tuple[int, int, bytes]]:
    """[(type, group id, buckets)] of a group-desc reply body (after the multipart header:
    each entry is length, type, pad, group_id, then its buckets)."""
    out, off = [], 0
    while off < len(body):
        if off + 8 > len(body):
            raise ProtocolError("truncated group description")
        ln, gtype, gid = struct.unpack_from("!HB1xI", body, off)
        if ln < 8 or off + ln > len(body):
            raise ProtocolError(f"group description with a bad length {ln}")
        buckets = body[off + 8 : off + ln]
        walk_buckets(buckets)  # checks the bucket lengths
        out.append((gtype, gid, buckets))
        off += ln
    return out


def parse_packet_in(msg: bytes) -> tuple[int, int | None, bytes]:
    """(buffer_id, in_port or None, frame) of an OpenFlow 1.3 PACKET_IN."""
    if len(msg) < 34:
        raise ProtocolError("PACKET_IN shorter than 34 bytes")
    (buffer_id,) = struct.unpack_from("!I", msg, 8)
    mtype, mlen = struct.unpack_from("!HH", msg, 24)
    if mtype != OFPMT_OXM or mlen < 4 or 24 + mlen > len(msg):
        raise ProtocolError("PACKET_IN with a bad match")
    in_port = None
    for cls, field, value, _mask in oxm_fields(msg[28 : 24 + mlen]):
        if cls == OFPXMC_OPENFLOW_BASIC and field == OFPXMT_OFB_IN_PORT:
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


def parse_port_status(data: bytes) -> tuple[int, int, bool]:
    """(reason, port, up) of an OpenFlow 1.3 PORT_STATUS."""
    if len(data) < PORT_STATUS_LEN:
        raise ProtocolError("PORT_STATUS shorter than 80 bytes")
    reason = data[8]
    port = struct.unpack_from("!I", data, 16)[0]
    config, state = struct.unpack_from("!II", data, 16 + 36)
    up = reason != OFPPR_DELETE and not (config & OFPPC_PORT_DOWN) and not (state & OFPPS_LINK_DOWN)
    return reason, port, up


@dataclass(slots=True)
class RawFlowRemoved:
    cookie: int
    priority: int
    reason: int
    table: int
    mkey: bytes


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
