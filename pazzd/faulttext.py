"""What pazzctl prints of a fault (the API's fault_json): `faults show`, the `faults`
table and the one-line events of `faults --follow`. Ports as `s1:5 (h1)`, paths as
`s1:5 (h1) -> s2:4 -> s2:5 (h2)`, times as dates with their zone, the header as an
ovs-ofctl match; `--json` prints the API's structure instead.
"""

from __future__ import annotations

from .portnames import PortNames
from .records import AuditFault, header_ofctl, when

__all__ = [
    "event_line",
    "fault_rows",
    "fault_text",
    "location_text",
    "no_finding_text",
    "path_lines",
]

MAX_EXPECTED = 10  # expected paths `faults show` prints; a large network has thousands


def location_text(f: dict, names: PortNames) -> str:
    p = f.get("polled") or (f.get("audit") if f["kind"] == "audit" else None) or {}
    if p.get("switch"):
        return f"{p['switch']} ({p['finding']})"
    return names.location(f["location"])


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


def _times(f: dict) -> list[str]:
    out = [f"{'first seen':12} {when(f['first_seen'])}", f"{'last seen':12} {when(f['last_seen'])}"]
    if f.get("resolved_at"):
        out.append(f"{'resolved':12} {when(f['resolved_at'])}")
    return out


def _tags(t: dict) -> str:
    return f"Verify_Port 0x{t['verify_port']:08x}  Verify_Rule 0x{t['verify_rule']:04x}"


def fault_text(f: dict, names: PortNames | None = None) -> list[str]:
    """The lines `pazzctl faults show` prints for a fault_json answer."""
    names = names or PortNames()
    out = [f"{'id':12} {f['id']}", f"{'kind':12} {f['kind']}", f"{'state':12} {f['state']}"]
    out.append(f"{'location':12} {names.location(f['location'])}")
    if f["kind"] == "audit":  # no header, tags or paths: the finding says it all
        out.append(f"{'count':12} {f['count']}   reopened {f['reopened']}")
        return out + _times(f) + audit_lines(f)
    out.append(f"{'header':12} {header_ofctl(f['header'])}")
    out.append(f"{'egress':12} {names.pair(f['egress'])}")
    out.append(f"{'count':12} {f['count']}   reopened {f['reopened']}")
    out += _times(f)
    out.append(f"{'actual':12} {_tags(f['actual']) if f.get('actual') else '-'}")
    expected = f["expected"] or []
    for e in expected[:MAX_EXPECTED]:
        out.append(f"{'expected':12} from {names.pair(e['ingress'])}: {names.path(e['path'])}")
        out.append(f"{'':12}   {_tags(e)}")
    if len(expected) > MAX_EXPECTED:
        out.append(f"{'':12} ... and {len(expected) - MAX_EXPECTED} more (--json lists all)")
    if not expected:
        out.append(f"{'expected':12} - (the model delivers this header nowhere here)")
    out += path_lines(f.get("path"))
    cands = (f["localization"] or {}).get("candidates")
    out.append(f"{'candidates':12} {names.switches(cands or ())}")
    if f["polled"] and not f["polled"].get("finding"):
        out.append(f"{'localized':12} - {no_finding_text(f['polled'])}")
    elif f["polled"]:
        p = f["polled"]
        out.append(
            f"{'localized':12} {p.get('switch', '-')} {p['finding']}"
            + (f" {p['cause']}" if p.get("cause") else "")
        )
        if p.get("header") and p["header"] != f["header"]:
            out.append(f"{'  header':12} {header_ofctl(p['header'])}")
        if p.get("entry"):
            out.append(f"{'  entry':12} {p['entry']}")
        if p.get("intended"):
            out.append(f"{'  intended':12} {p['intended']}")
        if p.get("merged_into"):
            out.append(f"{'  merged':12} into fault {p['merged_into']} (the same entry)")
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


def fault_rows(faults: list[dict], names: PortNames | None = None) -> list[tuple]:
    """The table `pazzctl faults` prints (a header row first) for fault_json answers."""
    names = names or PortNames()
    rows = [("id", "state", "class", "location", "first seen", "count", "header")]
    for f in faults:
        rows.append(
            (
                "-" if f["id"] is None else str(f["id"]),
                f["state"] if f.get("saved", True) else f"{f['state']}, unsaved",
                f["kind"],
                location_text(f, names),
                when(f["first_seen"]),
                str(f["count"]),
                header_ofctl(f["header"])[:60] if f["header"] else "",
            )
        )
    return rows


def event_line(event: str, f: dict, names: PortNames | None = None) -> str:
    """One line of `pazzctl faults --follow`: when, what happened, the fault."""
    names = names or PortNames()
    t = f.get("resolved_at") if event == "resolved" else f["first_seen"]
    if event == "reopened":
        t = f["last_seen"]
    line = f"{when(t)}  {event:8}  {f['id']}  {f['kind']} at {location_text(f, names)}"
    if f["header"]:
        line += f": {header_ofctl(f['header'])}"
    return line
