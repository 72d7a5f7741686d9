"""The flow entries behind a traced hop: what `pazzctl trace` prints per table, as
`ovs-appctl ofproto/trace` does.

The model's walk names each entry a packet matched by its RuleRef (table, priority,
cookie, rule ID: what the Verify_Rule chain tells apart), not by the entry itself, and
several entries can share one RuleRef. The entry is the one with that RuleRef in its
table whose match holds the header as it reaches the table: the trace's header with the
set_field actions of the entries (and the group bucket) before it applied.
"""

from __future__ import annotations

from .results import Hop
from .rules import FlowEntry

__all__ = ["hop_entries"]


def _rewrite(header: dict, actions) -> None:
    for a in actions:
        if a[0] == "set_field":
            header[a[1]] = a[2]


def hop_entries(model, hop: Hop, header: dict) -> tuple[list[FlowEntry | None], dict]:
    """(the entry of each of hop.rules, None where none is found; the header as it leaves
    the hop). header is the packet's header as it arrives."""
    hdr = dict(header)
    elements = model.elements
    found: list[FlowEntry | None] = []
    writes: list = []
    for ref in hop.rules:
        cands = []
        for key in ((hop.dpid, ref.table, hop.in_port), (hop.dpid, ref.table, None)):
            el = elements.get(key)
            for e in el.entries.values() if el is not None else ():
                if (e.priority, e.cookie, e.rule_id) == (ref.priority, ref.cookie, ref.rule_id):
                    cands.append(e)
        hits = [e for e in cands if e.match.contains(hdr, hop.in_port)]
        e = hits[0] if hits else (cands[0] if len(cands) == 1 else None)
        found.append(e)
        if e is None:
            continue
        ins = e.instructions
        if ins.clear:
            writes = []
        _rewrite(hdr, ins.apply)
        writes += ins.write
    _rewrite(hdr, writes)
    # A group's bucket rewrites too: the one that sends the packet out where it left.
    for e in found:
        for gid in e.instructions.groups() if e is not None else ():
            g = model.group(hop.dpid, gid)
            out = [b for b in g.buckets if ("output", hop.out_port) in b] if g else []
            if len(out) == 1:
                _rewrite(hdr, out[0])
    return found, hdr
