"""The proxy's audit as a detector: audit findings become faults of kind "audit".

After every completed audit of a switch the proxy hands over all its current findings
(`Proxy.on_audit`); `AuditFaults.round()` turns them into fault-store rows:

- One fault per entry: location ``dpid:N``, header class ``audit:TABLE:PRIORITY:MATCH``
  (MATCH: the canonical OXM bytes in hex). A finding seen again updates the open fault
  (count, last_seen, the finding); one that went away and comes back reopens it.
- An open audit fault of the switch that the audit no longer sees is resolved.
- Merge rule: when an open fault of the tester is localized (its stored `polled` answer)
  to the same switch and the same entry (table, priority and match equal to one the
  localization names: its cause, the entry on the switch or the intended entry), the
  finding is recorded on that fault (its `audit` column) instead of opening an audit
  fault; an audit fault opened for the entry before the tester localized it is resolved,
  marked ``merged_into``. A merged fault resolves by the tester's rules; if the audit
  still sees the difference after that, the next round opens an audit fault.

The store is written before `round()` returns; the caller reports (logs, counts) after.
"""

from __future__ import annotations

from dataclasses import dataclass

from cpc.ofctl import parse_flow
from cpc.rules import ModelError
from tester.store import OPEN, FaultStore

__all__ = ["AUDIT", "AuditEvent", "AuditFaults", "audit_answer", "header_class"]

AUDIT = "audit"


@dataclass(frozen=True)
class AuditEvent:
    """What one audit round changed. what: "new" (opened or reopened), "merged" (recorded
    on tester fault `fault_id` for the first time), "resolved", or "merged_away" (audit
    fault `fault_id` closed in favour of tester fault `into`)."""

    what: str
    fault_id: int
    finding: object = None  # the AuditFinding (None for "resolved")
    into: int | None = None


def header_class(f) -> str:
    return f"{AUDIT}:{f.table}:{f.priority}:{f.match.hex()}"


def _key(text: str | None, dpid: int):
    """(table, priority, match) of an entry given in ovs-ofctl syntax, or None."""
    if not text:
        return None
    try:
        e = parse_flow(text, dpid).entry()
    except (ModelError, ValueError):
        return None
    return e.table, e.priority, e.match


class AuditFaults:
    def __init__(self, store: FaultStore, names: dict[int, str] | None = None) -> None:
        self.store = store
        self.names = names or {}

    def finding_json(self, f, now: float) -> dict:
        return {
            "finding": f.kind,
            "dpid": f.dpid,
            "switch": self.names.get(f.dpid, str(f.dpid)),
            "entry": f.text if f.kind != "missing" else None,
            "intended": f.intended_text or None,
            "header_class": header_class(f),
            "last_seen": now,
        }

    def owner(self, rows, f):
        """The open tester fault localized to the finding's switch and entry, or None."""
        want = _key(f.text, f.dpid)
        if want is None:
            return None
        for r in rows:
            p = r.polled if isinstance(r.polled, dict) else {}
            for item in p.get("findings") or [p]:
                if not isinstance(item, dict) or item.get("dpid") != f.dpid:
                    continue
                named = (item.get(k) for k in ("cause", "entry", "intended"))
                if any(_key(t, f.dpid) == want for t in named):
                    return r
        return None

    def round(self, dpid: int, findings, now: float) -> list[AuditEvent]:
        """Record one completed audit of switch dpid (all its current findings)."""
        rows = self.store.faults(OPEN)
        location = f"dpid:{dpid}"
        mine = {r.header_class: r for r in rows if r.kind == AUDIT and r.location == location}
        tester = [r for r in rows if r.kind != AUDIT and r.polled]
        events, seen = [], set()
        for f in findings:
            hc = header_class(f)
            seen.add(hc)
            info = self.finding_json(f, now)
            owner = self.owner(tester, f)
            if owner is not None:
                prev = owner.audit if isinstance(owner.audit, dict) else {}
                again = prev.get("header_class") == hc
                info["first_seen"] = prev.get("first_seen", now) if again else now
                self.store.set_audit(owner.id, info)
                if not again:
                    events.append(AuditEvent("merged", owner.id, f))
                old = mine.pop(hc, None)
                if old is not None:  # opened before the tester's fault was localized
                    self.store.set_audit(old.id, {**(old.audit or {}), "merged_into": owner.id})
                    self.store.resolve(old.id, now)
                    events.append(AuditEvent("merged_away", old.id, f, owner.id))
                continue
            header = {"text": f.text}
            # An audit fault has no sample: no evidence, egress, expected or actual tags.
            fid, fresh = self.store.record(
                AUDIT,
                location,
                hc,
                now,
                evidence=b"",
                header=header,
                egress=None,
                expected=[],
                actual=None,
                localization={"candidates": [dpid]},
                audit=info,
            )
            if fresh:
                events.append(AuditEvent("new", fid, f))
        for hc, r in mine.items():
            if hc not in seen and self.store.resolve(r.id, now):
                events.append(AuditEvent("resolved", r.id))
        return events


def audit_answer(row) -> dict:
    """A localization answer for an audit fault: the audit already names switch and entry."""
    a = row.audit or {}
    item = {k: a.get(k) for k in ("dpid", "switch", "finding", "entry", "intended")}
    item.update(in_port=None, header=None, cause=a.get("entry") or a.get("intended"))
    answer = {
        "fault": row.id,
        "kind": row.kind,
        "polled": [a["dpid"]] if a else [],
        "errors": {},
        "findings": [item] if a else [],
        "seconds": 0.0,
        "source": "audit",
    }
    if a:
        answer.update(item)
    return answer
