"""Findings about the intended state: stored first, then reported, then served.

The intent checks (cpc.intents) say where the controller's rules break an operator's
policy. Each violation becomes a row of the fault store's findings table (kind "intent",
keyed by policy and detail) before it is logged; it resolves when a later update removes
the cause. The row's detail is the JSON the API serves and pazzctl prints.
"""

from __future__ import annotations

import logging
import time

from cpc.fields import FIELD_NAMES, format_value
from cpc.intents import Changes, Violation
from cpc.topology import Topology
from pazzd.answers import delivery_json
from tester.store import OPEN, FaultStore

__all__ = ["INTENT", "IntentFindings", "header_text"]

log = logging.getLogger("pazzd.findings")
INTENT = "intent"
SEVERITY = {"loop_free": "critical", "blackhole_free": "warning"}  # the others: "critical"


def header_text(h: dict[str, int]) -> str:
    """A witness header in `pazzctl trace --header` syntax (zero fields left out, except
    ones that make the packet what it is)."""
    keep = {"eth_type", "ip_proto"}
    return ",".join(
        f"{f}={format_value(f, h[f])}" for f in FIELD_NAMES if f in h and (h[f] or f in keep)
    )


def violation_json(topo: Topology, v: Violation, cause: dict | None) -> dict:
    p = v.policy
    out = {
        "policy": p.name,
        "check": p.kind,
        "detail": v.detail,
        "ingress": topo.port_name(v.ingress),
        "egress": topo.port_name(p.dst) if p.dst else None,
        "via": [topo.switches[d].name for d in sorted(p.via)],
        "enforce": p.enforce,
        "classes": v.classes,
        "witness": header_text(v.witness),
        "witness_header": v.witness,
        "paths": [delivery_json(topo, d) for d in v.paths],
        "cause": cause,
    }
    if v.reply is not None:
        out["reply"] = header_text(v.reply)
        out["reply_header"] = v.reply
        out["reply_paths"] = [delivery_json(topo, d) for d in v.reply_paths]
    return out


def summary(topo: Topology, v: Violation) -> str:
    p = v.policy
    what = {
        "loop_free": f"forwarding {v.detail}",
        "blackhole_free": f"blackhole at {v.detail}",
        "reach": f"headers from {v.detail} do not reach {topo.port_name(p.dst) if p.dst else ''}",
        "isolate": f"headers from {v.detail} reach {topo.port_name(p.dst) if p.dst else ''}",
        "waypoint": f"paths from {v.detail} avoid the waypoint",
        "reply": f"replies to {v.detail} do not come back",
    }[p.kind]
    return f"{p.name}: {what} ({v.classes} class{'es' if v.classes != 1 else ''})"


class IntentFindings:
    """Keeps the findings table in step with an IntentChecker's open violations."""

    def __init__(self, store: FaultStore, topo: Topology) -> None:
        self.store = store
        self.topo = topo
        self.ids: dict[str, int] = {}  # violation key -> finding id
        self.opened_total = 0

    def sync(self, open_now: dict[str, Violation], cause: dict | None) -> list[tuple]:
        """After a full check (start-up, reload): open what is open now, resolve the rows a
        previous run left open that are not. Returns (id, violation) of those newly opened."""
        now = time.time()
        new = self._open(open_now.values(), cause, now)
        for key, fid in self.store.open_finding_keys(INTENT).items():
            if key not in open_now:
                self.store.resolve_finding(INTENT, key, now)
                log.info("intent finding #%d resolved: %s", fid, key)
        return new

    def apply(self, changes: Changes, cause: dict | None) -> list[tuple]:
        now = time.time()
        new = self._open(changes.opened, cause, now)
        for v in changes.changed:  # another witness or class count: the cause stays
            old = self.store.finding(self.ids[v.key]) if v.key in self.ids else None
            self._open([v], (old.detail or {}).get("cause") if old else cause, now)
        for v in changes.resolved:
            fid = self.store.resolve_finding(INTENT, v.key, now)
            self.ids.pop(v.key, None)
            if fid is not None:
                log.info("intent finding #%d resolved: %s", fid, v.key)
        return new

    def _open(self, violations, cause, now: float) -> list[tuple]:
        new = []
        for v in violations:
            fid, fresh = self.store.open_finding(
                INTENT,
                v.key,
                v.policy.name,
                SEVERITY.get(v.policy.kind, "critical"),
                summary(self.topo, v),
                violation_json(self.topo, v, cause),
                now,
            )
            self.ids[v.key] = fid
            if fresh:
                new.append((fid, v))
                self.opened_total += 1
                log.warning(
                    "intent finding #%d %s; witness %s from %s",
                    fid,
                    summary(self.topo, v),
                    header_text(v.witness),
                    self.topo.port_name(v.ingress),
                )
        return new

    def open_by_policy(self, policies) -> dict[str, int]:
        """Open findings per policy, every configured policy present (a bounded label set)."""
        out = dict.fromkeys((p.name for p in policies), 0)
        for f in self.store.findings(INTENT, OPEN):
            if f.name in out:
                out[f.name] += 1
        return out
