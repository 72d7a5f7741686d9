"""OpenFlow 1.3 FlowMod semantics that need no header space: the flags (their values are
cpc.rules' OFPFF_* constants), the checks a FlowMod must pass before it touches a table,
and the entries a MODIFY or DELETE selects (OpenFlow 1.3.5, section 6.4). cpc.model
applies what these functions select.
"""

from __future__ import annotations

from collections.abc import Iterable

from .rules import (
    OFPFF_CHECK_OVERLAP,
    OFPG_ANY,
    OFPP_ANY,
    OFPTT_ALL,
    FlowEntry,
    FlowMod,
    ModelError,
)

__all__ = [
    "OFPFF_CHECK_OVERLAP",
    "UnknownSwitchError",
    "check_goto",
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


def check_goto(entry: FlowEntry) -> None:
    """goto_table only goes forward (OpenFlow 1.3, section 5.1)."""
    if entry.instructions.goto is not None and entry.instructions.goto <= entry.table:
        raise ModelError(f"{entry.source or 'flow'}: goto_table must go to a later table")


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
