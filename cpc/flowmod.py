"""OpenFlow 1.3 FlowMod semantics that need no header space: the flags (their values are
cpc.rules' OFPFF_* constants), the checks a FlowMod must pass before it touches a table,
and the entries a MODIFY or DELETE selects (OpenFlow 1.3.5, section 6.4). cpc.model
applies what these functions select.
"""

from __future__ import annotations

from collections.abc import Iterable

from .fields import ETH_TYPE_IPV4, IPV4_FIELDS, OFPVID_PRESENT, TP_FIELDS
from .rules import (
    OFPFF_CHECK_OVERLAP,
    OFPG_ANY,
    OFPP_ANY,
    OFPP_MAX,
    OFPTT_ALL,
    PORT_NAMES,
    FlowEntry,
    FlowMod,
    Group,
    ModelError,
)

__all__ = [
    "OFPFF_CHECK_OVERLAP",
    "UnknownSwitchError",
    "check_actions",
    "check_goto",
    "check_group",
    "check_overlap",
    "check_switch",
    "select",
]


class UnknownSwitchError(ModelError):
    """A message names a switch that is not in the topology."""


def check_switch(switches, dpid: int, source: str = "") -> None:
    """A FlowMod, GroupMod or rule names a switch of the topology (`switches`: by dpid)."""
    if dpid not in switches:
        where = f"{source}: " if source else ""
        raise UnknownSwitchError(f"{where}unknown switch dpid {dpid} (not in the topology)")


def check_goto(entry: FlowEntry | FlowMod) -> None:
    """goto_table only goes forward (OpenFlow 1.3, section 5.1). A MODIFY's new
    instructions are checked against its table, as the switch checks them."""
    if entry.instructions.goto is not None and entry.instructions.goto <= entry.table:
        raise ModelError(f"{entry.source or 'flow'}: goto_table must go to a later table")


def check_actions(fm: FlowEntry | FlowMod, has_group=None) -> None:
    """What a switch checks in the actions of an ADD or MODIFY (Open vSwitch's
    ofpacts_check, OpenFlow 1.3.5 section 7.2.5 and A.4.6): each set_field's
    prerequisites hold in the match as the earlier actions leave it
    (OFPBAC_MATCH_INCONSISTENT), pop_vlan has a tag to pop (the same error), each output
    names a port (OFPBAC_BAD_OUT_PORT), each
    group exists (OFPBAC_BAD_OUT_GROUP; has_group(gid) -> bool, None: not checked; OVS
    checks it for an ADD, and for a MODIFY that selects entries)."""
    where = f"{fm.source or 'flow'}: "
    ins = fm.instructions
    vlan = fm.match.get("vlan_vid")
    tags = 1 if vlan is not None and vlan[0] & vlan[1] & OFPVID_PRESENT else 0
    n_apply = len(ins.apply)
    for i, a in enumerate(ins.apply + ins.write):  # the action set sees what apply left
        if a[0] == "push_vlan":
            tags += 1
        elif a[0] == "pop_vlan":
            if not tags and i < n_apply:  # OVS lets the action set pop nothing
                raise ModelError(f"{where}pop_vlan without a VLAN tag in the match")
            tags = max(tags - 1, 0)
        elif a[0] == "set_field":
            missing = missing_prerequisite(fm.match, a[1], tags > 0)
            if missing:
                raise ModelError(f"{where}set_field {a[1]} without {missing} in the match")
        elif a[0] == "output" and not valid_output(a[1]):
            raise ModelError(f"{where}output to port {a[1]:#x}, which is no port")
        elif a[0] == "group" and has_group is not None and not has_group(a[1]):
            raise ModelError(f"{where}group {a[1]} does not exist on the switch")


def check_group(group: Group) -> None:
    """Each bucket's outputs name ports (OVS refuses the GroupMod: OFPBAC_BAD_OUT_PORT)."""
    for bucket in group.buckets:
        for a in bucket:
            if a[0] == "output" and not valid_output(a[1]):
                raise ModelError(
                    f"{group.source or 'group'}: group {group.group_id} outputs to port "
                    f"{a[1]:#x}, which is no port"
                )


def missing_prerequisite(match, field: str, tagged: bool) -> str:
    """The prerequisite of setting `field` that `match` lacks ('' if none)."""
    if field == "vlan_vid":
        return "" if tagged else "a VLAN tag"
    if field in IPV4_FIELDS or field == "ip_proto":
        return "" if match.get("eth_type") == (ETH_TYPE_IPV4, 0xFFFF) else "eth_type=0x0800"
    if field in TP_FIELDS:
        if match.get("eth_type") != (ETH_TYPE_IPV4, 0xFFFF):
            return "eth_type=0x0800"
        if match.get("ip_proto") not in ((6, 0xFF), (17, 0xFF)):
            return "ip_proto=6 or 17"
    return ""


def valid_output(port: int) -> bool:
    """A port number an output action may name (Open vSwitch: below OFPP_MAX, or a
    reserved port other than ANY)."""
    return port < OFPP_MAX or (port in PORT_NAMES and port != OFPP_ANY)


def check_overlap(entry: FlowEntry, targets) -> None:
    """OFPFF_CHECK_OVERLAP: refuse an ADD that overlaps an entry of the same priority in the
    elements it would enter (cpc.tables.Element)."""
    if any(o.priority == entry.priority for t in targets for o in t.ident.overlapping(entry)):
        raise ModelError("check_overlap: an entry with the same priority overlaps")


def select(elements: Iterable, fm: FlowMod, strict: bool) -> list[FlowEntry]:
    """The entries of `elements` (one switch's, cpc.tables.Element) that a MODIFY or DELETE
    applies to (OpenFlow 1.3, section 6.4): table (or all), match (within, or equal with
    the priority when strict), cookie under its mask, and for DELETE out_port and
    out_group."""
    out = []
    for el in elements:
        if fm.table != OFPTT_ALL and el.table != fm.table:
            continue
        if strict:
            if el.in_port != fm.match.in_port:
                continue
            e = el.entries.get((fm.match.fields, fm.priority))
            cands = [e] if e is not None else []
        else:
            cands = [e for e in el.entries.values() if e.match.within(fm.match)]
        for e in cands:
            if (e.cookie ^ fm.cookie) & fm.cookie_mask:
                continue
            if fm.command.startswith("delete"):
                if fm.out_port != OFPP_ANY and fm.out_port not in e.instructions.outputs():
                    continue
                if fm.out_group != OFPG_ANY and fm.out_group not in e.instructions.groups():
                    continue
            out.append(e)
    return out
