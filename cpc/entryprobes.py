"""Headers that show whether a switch installed an entry as the model has it.

For one entry: a few headers of the region the entry decides (its match minus what
higher-priority entries take, at every element it takes part in), each with an edge
ingress from which the model's trace of it reaches the switch and matches the entry
(so earlier tables, earlier switches and rewrites on the way are taken into account);
and, for each field the entry matches, one header just outside the match (the lowest
masked bit of that field flipped) sent from the same ingress, whose trace reaches the
entry's switch without matching it: a switch whose entry is wider than accepted tags it
with the entry. Each probe carries the model's trace, for the record.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from .fields import WIDTH
from .results import Delivery, Port, RuleRef
from .rules import FlowEntry
from .witness import representative

__all__ = ["EntryProbe", "entry_probes", "hits"]

MAX_CLASSES = 16  # classes of the entry's region tried for inside probes
MAX_TRACES = 48  # model traces per entry, at most
SKIP_OUTSIDE = {"eth_type"}  # a packet that is not IPv4 cannot be watched at the exits


@dataclass(frozen=True)
class EntryProbe:
    kind: str  # "inside" or "outside"
    field: str | None  # outside: the field moved just outside the match
    ingress: Port
    header: dict
    deliveries: tuple[Delivery, ...]  # the model's trace of the header from the ingress


def hits(entry: FlowEntry, deliveries: Iterable[Delivery]) -> bool:
    """Whether some path of the trace matches the entry."""
    ref = RuleRef(entry.table, entry.priority, entry.cookie, entry.rule_id)
    return any(h.dpid == entry.dpid and ref in h.rules for d in deliveries for h in d.hops)


def _earlier(entry: FlowEntry, deliveries: Iterable[Delivery], matched: bool = False) -> set:
    """The entry's switch's matches in tables before the entry's, per visit (with matched,
    only the visits that match the entry): a header with the same ones reaches the entry's
    table. A loop's last hop is not a visit: the packet is stopped on arrival, before any
    table (its rules are empty, as a table-miss's are)."""
    ref = RuleRef(entry.table, entry.priority, entry.cookie, entry.rule_id)
    return {
        tuple(r for r in h.rules if r.table < entry.table)
        for d in deliveries
        for h in (d.hops[:-1] if d.kind == "loop" else d.hops)
        if h.dpid == entry.dpid and (not matched or ref in h.rules)
    }


def _key_bdd(space, header: dict, key_fields: Sequence[str]):
    u = space.true
    for f in key_fields:
        u &= space.field_bdd(f, header.get(f, 0), (1 << WIDTH[f]) - 1)
    return u


def entry_probes(
    model,
    entry: FlowEntry,
    ingresses: Iterable[Port],
    n: int = 3,
    avoid: Iterable[dict] = (),
    key_fields: Sequence[str] = (),
) -> list[EntryProbe]:
    """Up to n inside probes and one outside probe per matched field (see the module
    doc). Probes differ in `key_fields` from each other and from every header of `avoid`
    (the exits recognize a probe's reports by those fields). [] when no fuzzed ingress
    reaches the entry, or the entry decides no header (shadowed)."""
    space = model.space
    macs = model.host_macs()
    ings = set(ingresses)
    allowed = space.true
    for h in avoid:
        allowed &= ~_key_bdd(space, h, key_fields)
    budget = [MAX_TRACES]

    def trace(ing, hdr):
        if budget[0] <= 0:
            return None
        budget[0] -= 1
        return tuple(model.trace(ing, hdr))

    # A class walk records no element for a hop that drops as the table-miss does (a
    # table-0 entry without actions): then the ingresses of the entry's switch, the rest
    # after, each checked by its trace.
    near = sorted(
        ings, key=lambda p: (p[0] != entry.dpid, p != (entry.dpid, entry.match.in_port), p)
    )
    inside: list[EntryProbe] = []
    for el, region in model.entry_regions(entry):
        for cls in model.part.candidates(region)[:MAX_CLASSES]:
            if len(inside) >= n:
                break
            walk = model.index.walks.get(cls)
            if walk is None:
                continue
            starts = dict.fromkeys(
                o.ingress
                for o in walk.expanded_from(ings, cls)
                if any(el.idx in h.rules for h in o.hops)
            )
            u = region & model.part.bdd_of[cls]
            if not starts and entry.instructions.drops():
                starts = dict.fromkeys(near)
            for ing in starts:
                hdr = representative(space, u & allowed, src_mac=macs.get(ing))
                if hdr is None:
                    break
                ds = trace(ing, hdr)
                if ds is None:
                    break
                if hits(entry, ds):
                    inside.append(EntryProbe("inside", None, ing, hdr, ds))
                    allowed &= ~_key_bdd(space, hdr, key_fields)
                    break
    out = list(inside)
    if not inside:
        return out
    # Fewer classes than probes wanted: more headers of the classes found, other keys.
    region = space.union([r for _, r in model.entry_regions(entry)])
    for p in list(inside):
        if len(out) >= n:
            break
        cls = model.part.classify(p.header)
        hdr = representative(
            space, region & model.part.bdd_of[cls] & allowed, src_mac=macs.get(p.ingress)
        )
        ds = trace(p.ingress, hdr) if hdr is not None else None
        if ds is not None and hits(entry, ds):
            extra = EntryProbe("inside", None, p.ingress, hdr, ds)
            out.append(extra)
            inside.append(extra)
            allowed &= ~_key_bdd(space, hdr, key_fields)
    # Outside probes start from an inside probe that leaves the network: one the model
    # drops further on (an ACL) would be dropped there however wide the entry is.
    bases = sorted(inside, key=lambda p: not _exits(p.deliveries))
    for f, value, mask in entry.match.fields:
        if f in SKIP_OUTSIDE:
            continue
        found = None
        for base in bases:
            probe = _outside(model, entry, base, f, value, mask, allowed, key_fields, trace)
            if probe is not None and (found is None or _exits(probe.deliveries)):
                found = probe
            if found is not None and _exits(found.deliveries):
                break
        if found is not None:
            out.append(found)
            allowed &= ~_key_bdd(space, found.header, key_fields)
    return out


def _exits(deliveries) -> bool:
    return any(d.kind == "egress" for d in deliveries)


def _outside(model, entry, base, f, value, mask, allowed, key_fields, trace):
    """The header just outside the entry's match on field f, near base, sent from base's
    ingress: None when it is not decided at the entry's table as base is."""
    space = model.space
    # Headers an entry of higher priority takes at the entry's table (on base's port): a
    # wider entry would not decide them, so an outside probe there shows nothing. One of
    # the same priority ties with a wider entry (the switch's choice): avoided if possible.
    higher = tie = space.false
    el = model.element_for(entry.dpid, entry.table, _port_at(entry, base.deliveries))
    for o in el.ident.entries() if el is not None else ():
        if o.priority > entry.priority:
            higher |= space.match_bdd(o.match.fields)
        elif o.priority == entry.priority and o is not entry:
            tie |= space.match_bdd(o.match.fields)
    low = mask & -mask
    u = space.field_bdd(f, (value ^ low) & mask, mask) & allowed & ~higher
    for g, v, m in entry.match.fields:
        if g != f:
            u &= space.field_bdd(g, v, m)
    if u & ~tie != space.false:
        u &= ~tie
    moved = {**base.header, f: base.header.get(f, 0) ^ low}
    if not space.contains(u, moved):
        # keep base's other fields where the set allows, let representative pick the
        # rest (a key field, to tell its reports apart)
        near = u
        for g, v in base.header.items():
            if g not in key_fields and g != f:
                near &= space.field_bdd(g, v, (1 << WIDTH[g]) - 1)
        moved = representative(space, near) or representative(space, u)
        if moved is None:
            return None
    ds = trace(base.ingress, moved)
    if ds is None or hits(entry, ds):
        return None
    if not (_earlier(entry, ds) & _earlier(entry, base.deliveries, matched=True)):
        return None  # it does not reach the entry's table as base does
    return EntryProbe("outside", f, base.ingress, moved, ds)


def _port_at(entry: FlowEntry, deliveries) -> int:
    """The port a probe enters the entry's switch by."""
    for d in deliveries:
        for h in d.hops:
            if h.dpid == entry.dpid:
                return h.in_port
    return entry.match.in_port or 0
