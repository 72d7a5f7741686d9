"""Conversion of wire matches, instructions, FlowMods and groups to the cpc model's.

Raises `cpc.rules.ModelError` for what the model does not represent (a match field or
action it has no bits for); actions that do not change the fields the model reads
(TTLs, queues, DSCP/ECN/PCP) are left out.
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING

from cpc.fields import OFPVID_PRESENT, WIDTH
from cpc.rules import FlowEntry, FlowMod, Group, Instructions, Match, ModelError, select_weights
from ofwire.actions import walk_buckets, walk_tlvs
from ofwire.consts import (
    GROUP_TYPE_NAMES,
    NX_VENDOR_ID,
    NXAST_SET_VERIFY_RULE_ID,
    OFPAT_COPY_TTL_IN,
    OFPAT_COPY_TTL_OUT,
    OFPAT_DEC_MPLS_TTL,
    OFPAT_DEC_NW_TTL,
    OFPAT_EXPERIMENTER,
    OFPAT_GROUP,
    OFPAT_OUTPUT,
    OFPAT_POP_VLAN,
    OFPAT_PUSH_VLAN,
    OFPAT_SET_FIELD,
    OFPAT_SET_MPLS_TTL,
    OFPAT_SET_NW_TTL,
    OFPAT_SET_QUEUE,
    OFPFF_CHECK_OVERLAP,
    OFPIT_APPLY_ACTIONS,
    OFPIT_CLEAR_ACTIONS,
    OFPIT_GOTO_TABLE,
    OFPIT_METER,
    OFPIT_WRITE_ACTIONS,
    OFPXMC_OPENFLOW_BASIC,
    OFPXMT_OFB_ETH_DST,
    OFPXMT_OFB_ETH_SRC,
    OFPXMT_OFB_ETH_TYPE,
    OFPXMT_OFB_IN_PORT,
    OFPXMT_OFB_IP_DSCP,
    OFPXMT_OFB_IP_ECN,
    OFPXMT_OFB_IP_PROTO,
    OFPXMT_OFB_IPV4_DST,
    OFPXMT_OFB_IPV4_SRC,
    OFPXMT_OFB_TCP_DST,
    OFPXMT_OFB_TCP_SRC,
    OFPXMT_OFB_UDP_DST,
    OFPXMT_OFB_UDP_SRC,
    OFPXMT_OFB_VLAN_PCP,
    OFPXMT_OFB_VLAN_VID,
    VERIFY_SUBTYPES,
)
from ofwire.match import oxm_fields

if TYPE_CHECKING:
    from ofwire.messages import RawFlowMod

__all__ = [
    "OXM_TO_MODEL",
    "OXM_PROTO",
    "NOOP_SET_FIELDS",
    "NOOP_ACTIONS",
    "cpc_match",
    "cpc_actions",
    "cpc_instructions",
    "raw_entry_to_cpc",
    "check_transport_sets",
    "flowmod_to_cpc",
    "group_to_cpc",
]

OXM_TO_MODEL = {
    OFPXMT_OFB_ETH_DST: "eth_dst",
    OFPXMT_OFB_ETH_SRC: "eth_src",
    OFPXMT_OFB_ETH_TYPE: "eth_type",
    OFPXMT_OFB_VLAN_VID: "vlan_vid",
    OFPXMT_OFB_IP_PROTO: "ip_proto",
    OFPXMT_OFB_IPV4_SRC: "ipv4_src",
    OFPXMT_OFB_IPV4_DST: "ipv4_dst",
    OFPXMT_OFB_TCP_SRC: "tp_src",
    OFPXMT_OFB_TCP_DST: "tp_dst",
    OFPXMT_OFB_UDP_SRC: "tp_src",
    OFPXMT_OFB_UDP_DST: "tp_dst",
}
# The IP protocol each transport field needs (TCP 6, UDP 17).
OXM_PROTO = {
    OFPXMT_OFB_TCP_SRC: 6,
    OFPXMT_OFB_TCP_DST: 6,
    OFPXMT_OFB_UDP_SRC: 17,
    OFPXMT_OFB_UDP_DST: 17,
}
NOOP_SET_FIELDS = {OFPXMT_OFB_IP_DSCP, OFPXMT_OFB_IP_ECN, OFPXMT_OFB_VLAN_PCP}
NOOP_ACTIONS = {
    OFPAT_COPY_TTL_OUT,
    OFPAT_COPY_TTL_IN,
    OFPAT_SET_MPLS_TTL,
    OFPAT_DEC_MPLS_TTL,
    OFPAT_SET_QUEUE,
    OFPAT_SET_NW_TTL,
    OFPAT_DEC_NW_TTL,
}


def cpc_match(mkey: bytes) -> Match:
    values: dict[str, tuple[int, int]] = {}
    in_port = None
    protos: set[int] = set()
    for cls, field, value, mask in oxm_fields(mkey):
        if cls != OFPXMC_OPENFLOW_BASIC:
            raise ModelError(f"match field class 0x{cls:x} is not modelled")
        if field == OFPXMT_OFB_IN_PORT:
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
            if cls == OFPXMC_OPENFLOW_BASIC and field in NOOP_SET_FIELDS:
                continue
            name = OXM_TO_MODEL.get(field) if cls == OFPXMC_OPENFLOW_BASIC else None
            if name is None:
                raise ModelError(f"set_field on OXM {field} is not modelled")
            if name == "vlan_vid":
                value |= OFPVID_PRESENT
            out.append(("set_field", name, value & ((1 << WIDTH[name]) - 1)))
        elif t == OFPAT_PUSH_VLAN:
            out.append(("push_vlan",))
        elif t == OFPAT_POP_VLAN:
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
            if fields and fields[0][0] == OFPXMC_OPENFLOW_BASIC and fields[0][1] in OXM_PROTO:
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


def group_to_cpc(dpid: int, gtype: int, gid: int, buckets: bytes) -> Group:
    name = GROUP_TYPE_NAMES.get(gtype)
    if name not in ("all", "select", "indirect"):
        raise ModelError(f"group type {name or gtype} is not modelled")
    parsed, weights = [], []
    for _, off, ln in walk_buckets(buckets):
        acts, _ = cpc_actions(buckets[off + 16 : off + ln])
        parsed.append(acts)
        weights.append(struct.unpack_from("!H", buckets, off + 2)[0])
    if name == "indirect" and len(parsed) != 1:
        raise ModelError("an indirect group has exactly one bucket")
    return Group(dpid, gid, name, tuple(parsed), weights=select_weights(name, weights))
