"""The answers of `trace` and `reach` as JSON objects: one builder for the daemon's API
(the live model) and for pazzctl's offline mode (a model loaded from files), so that both
give the same answer to the same question. Faults too: `fault_json` is the API's answer,
`fault_text` and `fault_rows` what pazzctl prints of it.

A bad argument raises QueryError with the argument's name (`arg`: "ingress", "header",
"src" or "dst", as in the API request) and the reason; each front end names the argument
its own way (the API by the request's argument, pazzctl by its option).
"""

from __future__ import annotations

import json

from cpc.fields import FIELD_NAMES, format_header, format_value, parse_header
from cpc.model import Model
from cpc.ofctl import format_actions, format_match
from cpc.results import Port
from cpc.topology import Topology, TopologyError

from .records import AuditFault, when
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


def delivery_json(topo: Topology, d) -> dict:
    return {
        "ingress": topo.port_name(d.ingress),
        "kind": d.kind,
        "egress": topo.port_name(d.egress) if d.egress else None,
        "reason": d.reason,
        "alternative": d.alternative,
        "verify_port": f"0x{d.verify_port:08x}",
        "verify_rule": f"0x{d.verify_rule:04x}",
        "hops": [
            {
                "dpid": h.dpid,
                "switch": topo.switches[h.dpid].name,
                "in_port": h.in_port,
                "rules": [r._asdict() for r in h.rules],
                "out_port": h.out_port,
            }
            for h in d.hops
        ],
    }


def cube_text(cube: dict[str, tuple[int, int]]) -> str:
    parts = [f"{f}={format_value(f, *cube[f])}" for f in FIELD_NAMES if f in cube]
    return ",".join(parts) or "any"


def trace(topo: Topology, model: Model, ingress: str, header: str) -> dict:
    """{"header", "outcomes": [delivery_json, ...]} of one header sent in at ingress; each
    hop's rules also carry the matched entry's match and actions (as ovs-appctl
    ofproto/trace shows them)."""
    port = port_arg(topo, ingress, "ingress")
    hdr = header_arg(header)
    deliveries = model.trace(port, hdr)
    outcomes = [delivery_json(topo, d) for d in deliveries]
    for o in outcomes:
        for h in o["hops"]:
            for r in h["rules"]:
                e = matched_entry(model, h["dpid"], h["in_port"], r, hdr)
                r["match"] = None if e is None else format_match(e.match) or "any"
                r["actions"] = None if e is None else format_actions(e.instructions, e.rule_id)
    return {"header": header, "outcomes": outcomes}


def matched_entry(model: Model, dpid: int, in_port: int, ref: dict, header: dict):
    """The model's entry behind a hop's rule (table, priority, cookie, rule_id) that the
    header matches there; None if none does. When no entry with that identity matches the
    header as sent (a set_field earlier on the path rewrote it), the one entry with it."""
    same = [
        e
        for e in model.entries(dpid)
        if e.table == ref["table"]
        and e.priority == ref["priority"]
        and e.cookie == ref["cookie"]
        and e.rule_id == ref["rule_id"]
    ]
    hit = [e for e in same if e.match.contains(header, in_port)]
    if hit:
        return hit[0]
    return same[0] if len(same) == 1 else None


def reach(topo: Topology, model: Model, src: str, dst: str, limit: int) -> dict:
    """The header set the model delivers from src to dst: its size and up to `limit` cubes."""
    s, d = port_arg(topo, src, "src"), port_arg(topo, dst, "dst")
    u = model.reach(s, d)
    cubes = [cube_text(c) for c in model.space.cubes(u, limit=limit + 1)]
    return {
        "from": topo.port_name(s),
        "to": topo.port_name(d),
        "headers": model.space.count(u),
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
        "header": _header_text(row.header),
        "egress": list(row.egress) if row.egress else None,
        "expected": row.expected,
        "actual": row.actual,
        "localization": row.localization,
        "polled": row.polled,
        "audit": row.audit,
        "difference": _difference(row),
        "resolved_at": row.resolved_at,
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


def _header_text(header):
    """The fault's header as text; a blackhole's row has the critical flow's header (or
    its match fields) without a "text" field. None when there is none."""
    if not isinstance(header, dict):
        return header
    fields = {k: v for k, v in header.items() if k != "text" and isinstance(v, int)}
    return header.get("text") or format_header(fields) or None


def location_text(f: dict) -> str:
    p = f.get("polled") or (f.get("audit") if f["kind"] == "audit" else None) or {}
    if p.get("switch"):
        return f"{p['switch']} ({p['finding']})"
    return f["location"]


def audit_lines(f: dict) -> list[str]:
    """What the proxy's audit sees: an audit fault's finding, or one merged into a fault."""
    a = f.get("audit")
    return AuditFault.from_json(a).lines() if a else []


def no_finding_text(a: dict) -> str:
    """Why a localization names no entry: nothing differs, or the polls failed."""
    errors = a.get("errors") or {}
    failed = ", ".join(f"dpid {d} ({e})" for d, e in errors.items())
    if errors and len(errors) >= len(a.get("polled") or ()):
        return f"localization could not poll any switch: {failed}"
    if errors:
        return (
            f"no difference on the switches polled, but the poll failed on {failed}: "
            "the entry may be there"
        )
    return "no flow table differs from the intended entries for this header"


def fault_text(f: dict) -> list[str]:
    """The lines `pazzctl faults show` prints for a fault_json answer."""
    out: list[str] = []
    if f["kind"] == "audit":  # no header, tags or paths: the finding says it all
        for k in ("id", "kind", "state", "location", "count", "reopened"):
            out.append(f"{k:12} {f[k]}")
        out.append(f"{'first seen':12} {when(f['first_seen'])}   last seen {when(f['last_seen'])}")
        return out + audit_lines(f)
    for k in ("id", "kind", "state", "location", "header", "egress", "count", "reopened"):
        v = f[k]
        if k == "header" and not v:  # a critical flow configured without a header
            v = "(none)"
        out.append(f"{k:12} {v}")
    out.append(f"{'first seen':12} {when(f['first_seen'])}   last seen {when(f['last_seen'])}")
    out.append(f"{'actual':12} {json.dumps(f['actual'])}")
    for e in f["expected"] or []:
        out.append(
            f"{'expected':12} ingress {e['ingress']} vp=0x{e['verify_port']:08x} "
            f"vr=0x{e['verify_rule']:04x} path {e['path']}"
        )
    out.extend(path_lines(f.get("path")))
    out.append(f"{'candidates':12} {(f['localization'] or {}).get('candidates')}")
    if f["polled"] and not f["polled"].get("finding"):
        out.append(f"{'localized':12} - {no_finding_text(f['polled'])}")
    elif f["polled"]:
        p = f["polled"]
        out.append(
            f"{'localized':12} {p.get('switch', '-')} {p['finding']}"
            + (f" {p['cause']}" if p.get("cause") else "")
        )
        if p.get("header") and p["header"] != f["header"]:
            out.append(f"{'  header':12} {p['header']}")
        if p.get("entry"):
            out.append(f"{'  entry':12} {p['entry']}")
        if p.get("intended"):
            out.append(f"{'  intended':12} {p['intended']}")
    if f.get("difference"):
        out.append(f"{'  differs':12} {f['difference']['text']}")
    return out + audit_lines(f)


def path_lines(p: dict | None) -> list[str]:
    """The actual path that the report's Verify_Port gives (pazzd.ui.paths)."""
    if not p:
        return []
    if p["status"] == "none":
        return [f"{'actual path':12} none fits Verify_Port {p['verify_port']}"]
    if p["status"] == "unique":
        return [f"{'actual path':12} {p['chains'][0]['text']}"]
    n = f"more than {p['chain_count']}" if p["more"] else str(p["chain_count"])
    out = [f"{'actual path':12} ambiguous: {n} paths fit Verify_Port {p['verify_port']}"]
    out += [f"{'':12} {c['text']}" for c in p["chains"]]
    return out


def fault_rows(faults: list[dict]) -> list[tuple]:
    """The table `pazzctl faults` prints (a header row first) for fault_json answers."""
    rows = [("id", "state", "class", "location", "first seen", "count", "header")]
    for f in faults:
        rows.append(
            (
                str(f["id"]),
                f["state"],
                f["kind"],
                location_text(f),
                when(f["first_seen"]),
                str(f["count"]),
                (f["header"] or "")[:60],
            )
        )
    return rows
