"""Findings about the intended state: stored first, then reported, then served.

The intent checks (cpc.intents) say where the controller's rules break an operator's
policy. Each violation becomes a row of the fault store's findings table (kind "intent",
keyed by policy and detail) through the finding sink (pazzd.services), which stores, logs
and probes its witness; it resolves when a later update removes the cause. The row's
detail is the JSON the API serves and pazzctl prints.
"""

from __future__ import annotations

import logging

from cpc.fields import FIELD_NAMES, format_value
from cpc.intents import Violation
from cpc.topology import Topology
from tester.store import OPEN

from .answers import delivery_json
from .probes import Probe
from .records import PACKET_IN_CHECKS, IntentFinding, PacketInFinding

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


def violation_record(topo: Topology, v: Violation, cause: dict | None) -> IntentFinding:
    p = v.policy
    rec = IntentFinding(
        key=v.key,
        name=p.name,
        severity=SEVERITY.get(p.kind, "critical"),
        summary=summary(topo, v),
        policy=p.name,
        check=p.kind,
        detail_text=v.detail,
        ingress=topo.port_name(v.ingress),
        egress=topo.port_name(p.dst) if p.dst else None,
        via=[topo.switches[d].name for d in sorted(p.via)],
        enforce=p.enforce,
        classes=v.classes,
        witness=header_text(v.witness),
        witness_header=v.witness,
        paths=[delivery_json(topo, d) for d in v.paths],
        cause=cause,
    )
    if v.reply is not None:
        rec.reply = header_text(v.reply)
        rec.reply_header = v.reply
        rec.reply_paths = [delivery_json(topo, d) for d in v.reply_paths]
    return rec


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


def exits(paths) -> frozenset:
    return frozenset(d.egress for d in paths if d.kind == "egress")


def witness_probes(v: Violation) -> list[Probe]:
    """The probes that confirm a violation: its witness, and the reply of a reply policy."""
    probes = [Probe("witness", v.ingress, v.witness, exits(v.paths))]
    if v.reply is not None and v.policy.dst is not None:
        probes.append(Probe("reply", v.policy.dst, v.reply, exits(v.reply_paths)))
    return probes


class IntentFindings:
    """Keeps the findings table in step with an IntentChecker's open violations, through
    the finding sink (pazzd.services.FindingSink)."""

    def __init__(self, sink, topo: Topology) -> None:
        self.sink = sink
        self.store = sink.store
        self.topo = topo
        self.ids: dict[str, int] = {}  # violation key -> finding id

    def sync(self, open_now: dict[str, Violation], cause: dict | None) -> None:
        """After a full check (the end of the start-up, reload): open what is open now,
        resolve the rows a previous run left open that are not."""
        self._open(open_now.values(), lambda key: cause)
        for key in self.store.open_finding_keys(INTENT):
            if key not in open_now and key.split("|", 1)[0] not in PACKET_IN_CHECKS:
                self.sink.resolve(INTENT, key)
                self.ids.pop(key, None)

    def reconcile(self, open_now: dict[str, Violation], causes: dict[str, dict]) -> None:
        """Bring the table in step with the checker's open violations: store the new ones
        (causes: key -> the batch that opened it), those whose witness was picked again,
        and resolve the ones gone. Violations that opened and closed since the last call
        are never stored."""
        fresh = [v for k, v in open_now.items() if k not in self.ids]
        again = [v for k, v in open_now.items() if k in self.ids and not v.picked]

        def cause_of(key: str):
            return causes.pop(key, None) or {"source": "model update"}

        self._open(fresh, cause_of)
        for v in again:  # another witness: the cause stays
            old = self.store.finding(self.ids[v.key])
            kept = old.cause if old is not None else None
            self._open([v], lambda key, c=kept: c)
        for key in [k for k in self.ids if k not in open_now]:
            self.sink.resolve(INTENT, key)
            del self.ids[key]
        causes.clear()

    def _open(self, violations, cause_of) -> None:
        for v in violations:
            fid, fresh = self.sink.open(
                violation_record(self.topo, v, cause_of(v.key)),
                probes=witness_probes(v),
                log_text=f"{summary(self.topo, v)}; witness {header_text(v.witness)} "
                f"from {self.topo.port_name(v.ingress)}",
            )
            self.ids[v.key] = fid

    def occurrence(self, occ) -> tuple[int, bool]:
        """Store a finding of the packet-in watch (pazzd.packetins), in the same form."""
        d = occ.detail
        hdr = d["header"]
        cause = {"source": "packet-in", "count": occ.count}
        if "buffer_id" in d:
            cause["buffer_id"] = d["buffer_id"]
        rec = PacketInFinding(
            key=occ.key,
            name=occ.name,
            severity="warning",
            summary=occ.summary,
            policy=occ.name,
            check=occ.name,
            detail_text=occ.key.split("|", 1)[1],
            ingress=f"{d['switch']}:{d['in_port']}",
            witness=header_text(hdr),
            witness_header=hdr,
            paths=[delivery_json(self.topo, o) for o in d["paths"]],
            cause=cause,
        )
        if "reply" in d:
            rec.reply = header_text(d["reply"])
            rec.reply_header = d["reply"]
            rec.reply_paths = [delivery_json(self.topo, o) for o in d["reply_paths"]]
        return self.sink.open(rec, log_text=f"{occ.summary}; packet {header_text(hdr)}")

    def resolve_key(self, key: str) -> None:
        self.sink.resolve(INTENT, key)

    def open_by_policy(self, policies) -> dict[str, int]:
        """Open findings per policy, every configured policy present (a bounded label set)."""
        out = dict.fromkeys((p.name for p in policies), 0)
        for f in self.store.findings(INTENT, OPEN):
            out[f.name] = out.get(f.name, 0) + 1  # the packet-in watch's names too
        return out
