"""The answers of `trace` and `reach` as JSON objects: one builder for the daemon's API
(the live model) and for pazzctl's offline mode (a model loaded from files), so that both
give the same answer to the same question. Faults too: `fault_json` is the API's answer
(pazzd.faulttext is what pazzctl prints of it).

A bad argument raises QueryError with the argument's name (`arg`: "ingress", "header",
"src" or "dst", as in the API request) and the reason; each front end names the argument
its own way (the API by the request's argument, pazzctl by its option).
"""

from __future__ import annotations

from cpc.fields import FIELD_NAMES, format_header, parse_header
from cpc.hopentries import hop_entries
from cpc.model import Model
from cpc.ofctl import format_actions, format_match
from cpc.ofctl import format_header as ofctl_header
from cpc.results import Port
from cpc.rules import Match
from cpc.spacesummary import summarize
from cpc.topology import Topology, TopologyError

from .ui.entrydiff import entry_difference


class QueryError(ValueError):
    """An argument of a trace or reach request is not a port or a header."""

    def __init__(self, arg: str, reason: str) -> None:
        super().__init__(f"{arg}: {reason}")
        self.arg = arg
        self.reason = reason


def port_arg(topo: Topology, text: str, arg: str) -> Port:
    try:
        return topo.resolve_port(str(text))
    except TopologyError as e:
        raise QueryError(arg, str(e)) from None


def header_arg(text: str, arg: str = "header") -> dict[str, int]:
    try:
        return parse_header(text)
    except ValueError as e:
        raise QueryError(arg, str(e)) from None


def _rule_json(ref, entry) -> dict:
    """A hop's entry: its RuleRef, and its match and actions in ovs-ofctl syntax (None
    when the entry behind the RuleRef is not found)."""
    return {
        **ref._asdict(),
        "match": None if entry is None else format_match(entry.match),
        "actions": None if entry is None else format_actions(entry.instructions, entry.rule_id),
    }


def _hops_json(topo: Topology, model: Model | None, d, header: dict | None) -> list[dict]:
    out = []
    for h in d.hops:
        if model is not None and header is not None:
            entries, header = hop_entries(model, h, header)
            rules = [_rule_json(r, e) for r, e in zip(h.rules, entries, strict=True)]
        else:
            rules = [r._asdict() for r in h.rules]
        out.append(
            {
                "dpid": h.dpid,
                "switch": topo.switches[h.dpid].name,
                "in_port": h.in_port,
                "rules": rules,
                "out_port": h.out_port,
            }
        )
    return out


def delivery_json(topo: Topology, d, model: Model | None = None, header=None) -> dict:
    """One outcome; with the model and the header sent, each hop's entries carry their
    match and actions."""
    return {
        "ingress": topo.port_name(d.ingress),
        "kind": d.kind,
        "egress": topo.port_name(d.egress) if d.egress else None,
        "reason": d.reason,
        "alternative": d.alternative,
        "verify_port": f"0x{d.verify_port:08x}",
        "verify_rule": f"0x{d.verify_rule:04x}",
        "hops": _hops_json(topo, model, d, header),
    }


def cube_text(cube: dict[str, tuple[int, int]]) -> str:
    """A cube of header space as an ovs-ofctl match ('tcp,nw_dst=10.0.1.0/24,tcp_dst=80')."""
    fields = tuple((f, *cube[f]) for f in FIELD_NAMES if f in cube)
    return format_match(Match(fields, None)) or "any"


def trace(topo: Topology, model: Model, ingress: str, header: str) -> dict:
    """{"header", "ingress", "outcomes": [delivery_json, ...]} of one header sent in at
    ingress; "header" as given, "flow" the header as an ovs-ofctl match."""
    port = port_arg(topo, ingress, "ingress")
    hdr = header_arg(header)
    deliveries = model.trace(port, hdr)
    return {
        "header": header,
        "flow": ofctl_header(hdr),
        "ingress": topo.port_name(port),
        "outcomes": [delivery_json(topo, d, model, hdr) for d in deliveries],
    }


def reach(topo: Topology, model: Model, src: str, dst: str, limit: int) -> dict:
    """The header set the model delivers from src to dst: its size, a summary (up to
    `limit` groups by destination, cpc.spacesummary) and up to `limit` of its cubes."""
    s, d = port_arg(topo, src, "src"), port_arg(topo, dst, "dst")
    u = model.reach(s, d)
    cubes = [cube_text(c) for c in model.space.cubes(u, limit=limit + 1)]
    return {
        "from": topo.port_name(s),
        "to": topo.port_name(d),
        "headers": model.space.count(u),
        "summary": summarize(model.space, u, limit=max(limit, 1)),
        "cubes": cubes[:limit],
        "truncated": len(cubes) > limit,
    }


# --- faults ------------------------------------------------------------------------------
def fault_json(row) -> dict:
    return {
        "id": row.id,
        "kind": row.kind,
        "location": row.location,
        "header_class": row.header_class,
        "state": row.state,
        "first_seen": row.first_seen,
        "last_seen": row.last_seen,
        "count": row.count,
        "reopened": row.reopened,
        "header": header_text(row.header),
        "egress": list(row.egress) if row.egress else None,
        "expected": row.expected,
        "actual": row.actual,
        "localization": row.localization,
        "polled": row.polled,
        "audit": row.audit,
        "difference": _difference(row),
        "resolved_at": row.resolved_at,
        "saved": True,  # pazzd.faultlist: False for faults waiting in memory for the store
    }


def _difference(row) -> dict | None:
    """What differs between the localized entry and the intended one (entrydiff)."""
    found = row.polled if row.polled and row.polled.get("finding") else None
    if found is None and row.kind == "audit" and row.audit:
        found = row.audit
    if not found:
        return None
    try:
        return entry_difference(found.get("entry"), found.get("intended"))
    except Exception:  # noqa: BLE001 - a text no parser expected: the entries still show
        return None


def header_text(header):
    """The fault's header as text; a blackhole's row has the critical flow's header (or
    its match fields) without a "text" field. None when there is none."""
    if not isinstance(header, dict):
        return header
    fields = {k: v for k, v in header.items() if k != "text" and isinstance(v, int)}
    return header.get("text") or format_header(fields) or None
