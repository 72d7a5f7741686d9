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
from cpc.intents import Violation
from cpc.topology import Topology
from pazzd.answers import delivery_json
from tester.store import OPEN, FaultStore

__all__ = ["INTENT", "IntentFindings", "header_text"]

log = logging.getLogger("pazzd.findings")
INTENT = "intent"
SEVERITY = {"loop_free": "critical", "blackhole_free": "warning"}  # the others: "critical"
# the packet-in watch's checks (pazzd.packetins): their findings are not the checker's
PACKET_IN_CHECKS = ("direct_paths", "strict_direct_paths", "no_forgotten_packets")


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
        new = self._open(open_now.values(), lambda key: cause, now)
        for key, fid in self.store.open_finding_keys(INTENT).items():
            if key not in open_now and key.split("|", 1)[0] not in PACKET_IN_CHECKS:
                self.store.resolve_finding(INTENT, key, now)
                self.ids.pop(key, None)
                log.info("intent finding #%d resolved: %s", fid, key)
        return new

    def reconcile(self, open_now: dict[str, Violation], causes: dict[str, dict]) -> list[tuple]:
        """Bring the table in step with the checker's open violations: store the new ones
        (causes: key -> the batch that opened it), those whose witness was picked again,
        and resolve the ones gone. Violations that opened and closed since the last call
        are never stored. Returns (id, violation) of those newly opened."""
        now = time.time()
        fresh = [v for k, v in open_now.items() if k not in self.ids]
        again = [v for k, v in open_now.items() if k in self.ids and not v.picked]

        def cause_of(key: str):
            return causes.pop(key, None) or {"source": "model update"}

        new = self._open(fresh, cause_of, now)
        for v in again:  # another witness: the cause stays
            old = self.store.finding(self.ids[v.key])
            kept = (old.detail or {}).get("cause") if old is not None else None
            self._open([v], lambda key, c=kept: c, now)
        for key in [k for k in self.ids if k not in open_now]:
            fid = self.store.resolve_finding(INTENT, key, now)
            del self.ids[key]
            if fid is not None:
                log.info("intent finding #%d resolved: %s", fid, key)
        causes.clear()
        return new

    def _open(self, violations, cause_of, now: float) -> list[tuple]:
        new = []
        for v in violations:
            fid, fresh = self.store.open_finding(
                INTENT,
                v.key,
                v.policy.name,
                SEVERITY.get(v.policy.kind, "critical"),
                summary(self.topo, v),
                violation_json(self.topo, v, cause_of(v.key)),
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

    def occurrence(self, occ) -> tuple[int, bool]:
        """Store a finding of the packet-in watch (pazzd.packetins), in the same form."""
        d = occ.detail
        hdr = d["header"]
        cause = {"source": "packet-in", "count": occ.count}
        if "buffer_id" in d:
            cause["buffer_id"] = d["buffer_id"]
        detail = {
            "policy": occ.name,
            "check": occ.name,
            "detail": occ.key.split("|", 1)[1],
            "ingress": f"{d['switch']}:{d['in_port']}",
            "egress": None,
            "via": [],
            "enforce": False,
            "classes": 0,
            "witness": header_text(hdr),
            "witness_header": hdr,
            "paths": [delivery_json(self.topo, o) for o in d["paths"]],
            "cause": cause,
        }
        if "reply" in d:
            detail["reply"] = header_text(d["reply"])
            detail["reply_header"] = d["reply"]
            detail["reply_paths"] = [delivery_json(self.topo, o) for o in d["reply_paths"]]
        fid, fresh = self.store.open_finding(
            INTENT, occ.key, occ.name, "warning", occ.summary, detail, time.time()
        )
        if fresh:
            self.opened_total += 1
            log.warning("intent finding #%d %s; packet %s", fid, occ.summary, header_text(hdr))
        return fid, fresh

    def resolve_key(self, key: str) -> None:
        fid = self.store.resolve_finding(INTENT, key, time.time())
        if fid is not None:
            log.info("intent finding #%d resolved: %s", fid, key)

    def open_by_policy(self, policies) -> dict[str, int]:
        """Open findings per policy, every configured policy present (a bounded label set)."""
        out = dict.fromkeys((p.name for p in policies), 0)
        for f in self.store.findings(INTENT, OPEN):
            out[f.name] = out.get(f.name, 0) + 1  # the packet-in watch's names too
        return out
