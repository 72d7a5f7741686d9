"""Confirm in the data plane that a switch installed each entry it accepted.

The model assumes the switch installs exactly what it accepted. When the proxy commits an
ADD or MODIFY the switch accepted, the entry is checked `delay` seconds later (the daemon
adds tester.settle, while reports of the changed headers are held): a few headers of
the region the entry decides, and one just outside its match on each field it matches
(cpc.entryprobes), go out through the fuzzer (a share of each probe batch, over random
fuzzing) and the tester reports what the exits saw of them (pazzd.probewatch).

  confirmed  every probe with an exit in the model was reported there with the tags the
             model allows, and no report of any probe came with other tags
  diverged   an inside probe came with other tags ("not-there": the switch forwards the
             entry's headers as if it were not there), an outside probe came with the
             entry's tags ("wider": its match is wider than accepted), or no inside probe
             with an exit in the model was seen at all ("unseen")

An entry is decided as soon as a report comes with other tags, or when every probe
has an exit in the model and was seen there; one with a probe the model drops, seen
as predicted, waits for the window (the copies' time, plus 10 s).
A diverged entry is a finding of kind "agent" (the fault store's findings table), with
the probes and their reports as witnesses; it resolves when the entry is confirmed after
a later change, or deleted. At most `max_pending` entries are probed at once; the rest
wait in order (at most QUEUE, older ones are dropped and counted).
"""

from __future__ import annotations

import logging
import statistics
import time
from collections import deque
from dataclasses import dataclass, field

from cpc.entryprobes import EntryProbe, entry_probes
from cpc.ofctl import format_match
from cpc.rules import ModelError
from cpc.topology import Topology
from tester.engine import WATCH_FIELDS

from .answers import delivery_json
from .findings import header_text
from .probewatch import ProbeWatch, Watch

__all__ = ["AGENT", "EntryConfirmations"]

log = logging.getLogger("pazzd.entries")
AGENT = "agent"
QUEUE = 4096
RECENT = 256  # confirmation times kept for the median


@dataclass
class _Check:
    dpid: int
    table: int
    priority: int
    match: object  # cpc Match
    rule_id: int
    committed: float
    due: float
    probes: list = field(default_factory=list)  # [(EntryProbe, Watch, expected exits)]
    deadline: float = 0.0
    evidence_at: float | None = None  # every probe with an exit seen allowed
    entry: object = None

    @property
    def key(self) -> tuple:
        return (self.dpid, self.table, self.priority, self.match)


class EntryConfirmations:
    """model: the intended state; probes: ProbeWatch; store: the fault store."""

    def __init__(
        self,
        model,
        probes: ProbeWatch,
        store,
        topo: Topology,
        *,
        probe_rate: float,
        share: float,
        delay: float,
        probes_per_entry: int,
        max_pending: int,
        clock=time.time,
    ) -> None:
        self.model = model
        self.probes = probes
        self.store = store
        self.topo = topo
        self.delay = delay
        self.n = probes_per_entry
        self.max_pending = max_pending
        self.clock = clock
        self.rate = max(probe_rate * share, 1.0)  # confirmation probes per second, at most
        self.queue: deque[_Check] = deque()
        self.probing: dict[tuple, _Check] = {}
        self.confirmed = self.diverged = self.unprobed = self.superseded = self.dropped = 0
        self.times: deque[float] = deque(maxlen=RECENT)

    # --- in -----------------------------------------------------------------------------------
    def committed(self, dpid: int, changes) -> None:
        """The proxy committed these changes of dpid's intended table (Proxy.on_commit)."""
        import ofwire as of

        for ch in changes:  # proxy.table.EntryChange
            kind, new = getattr(ch, "kind", None), getattr(ch, "entry", None)
            if new is None or (kind == "modify" and new is ch.old):  # the proxy's re-ID
                continue
            try:
                match = of.cpc_match(new.mkey)
            except (ModelError, of.ProtocolError):
                continue  # not in the model: nothing to confirm
            if kind == "delete":
                self.deleted(dpid, new.table, new.priority, match)
            else:
                self.schedule(dpid, new.table, new.priority, match, new.rule_id)

    def schedule(self, dpid: int, table: int, priority: int, match, rule_id: int) -> None:
        """Check this entry `delay` seconds from now."""
        now = self.clock()
        if len(self.queue) >= QUEUE:
            self.queue.popleft()
            self.dropped += 1
        self.queue.append(_Check(dpid, table, priority, match, rule_id, now, now + self.delay))

    def deleted(self, dpid: int, table: int, priority: int, match) -> None:
        self._gone(dpid, table, priority, match, self.clock())

    def _gone(self, dpid, table, priority, match, now) -> None:
        key = (dpid, table, priority, match)
        c = self.probing.pop(key, None)
        if c is not None:
            self._close(c)
            self.superseded += 1
        self.store.resolve_finding(AGENT, self._key(key), now)

    # --- running ------------------------------------------------------------------------------
    def tick(self) -> None:
        now = self.clock()
        for c in list(self.probing.values()):
            # Every probe has an exit in the model and was seen there as the model says:
            # nothing is left to learn. A probe the model drops waits for the window.
            done = c.evidence_at is not None and all(exits for _, _, exits in c.probes)
            bad = any(not r["allowed"] for _, w, _ in c.probes for r in w.reports)
            if done or bad or now >= c.deadline:
                self._finish(c, now)
        while self.queue and self.queue[0].due <= now and len(self.probing) < self.max_pending:
            self._start(self.queue.popleft(), now)

    def _start(self, c: _Check, now: float) -> None:
        e = self.model.find_entry(c.dpid, c.table, c.priority, c.match)
        if e is None or (c.rule_id and e.rule_id != c.rule_id):
            self.superseded += 1  # deleted or replaced since: a later check covers it
            return
        old = self.probing.pop(c.key, None)
        if old is not None:  # modified again before its check ended
            self._close(old)
            self.superseded += 1
        avoid = [dict(zip(WATCH_FIELDS, k, strict=True)) for k in self.probes.watched()]
        try:
            found = entry_probes(
                self.model, e, self.probes.ingresses(), self.n, avoid, WATCH_FIELDS
            )
        except ModelError as ex:
            log.warning("%s: no probes (%s)", self._name(c), ex)
            found = []
        c.entry = e
        log.debug("%s: probes %s", self._name(c), [(p.kind, p.ingress, p.header) for p in found])
        for p in found:
            exits = {d.egress for d in p.deliveries if d.kind == "egress"}
            w = self.probes.send(p.ingress, p.header, on_report=lambda w, r, c=c: self._seen(c))
            if w is not None:
                c.probes.append((p, w, exits))
        if not any(p.kind == "inside" for p, _, _ in c.probes):
            for _, w, _ in c.probes:
                self.probes.close(w)
            self.unprobed += 1
            return
        copies = self.probes.copies * len(c.probes)
        c.deadline = now + copies / self.rate + 10.0
        self.probing[c.key] = c

    def _seen(self, c: _Check) -> None:
        if c.evidence_at is None and all(
            any(r["allowed"] for r in w.reports) for _, w, exits in c.probes if exits
        ):
            c.evidence_at = self.clock()

    def _close(self, c: _Check) -> None:
        for _, w, _ in c.probes:
            self.probes.close(w)

    def _finish(self, c: _Check, now: float) -> None:
        del self.probing[c.key]
        self._close(c)
        verdict, reason = verdict_of(c.probes)
        log.debug(
            "%s: %s %s: %s", self._name(c), verdict, reason, [w.reports for _, w, _ in c.probes]
        )
        key = self._key(c.key)
        if verdict == "confirmed":
            self.confirmed += 1
            if c.evidence_at is not None:
                self.times.append(c.evidence_at - c.committed)
            if self.store.resolve_finding(AGENT, key, now) is not None:
                log.info("%s: confirmed in the data plane", self._name(c))
            return
        self.diverged += 1
        detail = self._detail(c, reason)
        fid, new = self.store.open_finding(
            AGENT,
            key,
            self.topo.switches[c.dpid].name,
            "warning" if reason == "unseen" else "critical",
            _summary(self._name(c), reason, detail),
            detail,
            now,
        )
        if new:
            log.warning("agent finding #%d: %s", fid, _summary(self._name(c), reason, detail))

    # --- out ----------------------------------------------------------------------------------
    def _name(self, c: _Check) -> str:
        return (
            f"{self.topo.switches[c.dpid].name} table={c.table} priority={c.priority} "
            f"{format_match(c.match)}"
        )

    def _key(self, key: tuple) -> str:
        dpid, table, priority, match = key
        return f"{dpid:#x}/{table}/{priority}/{format_match(match)}"

    def _detail(self, c: _Check, reason: str) -> dict:
        e = c.entry
        name = self.topo.port_name
        return {
            "reason": reason,
            "switch": self.topo.switches[c.dpid].name,
            "dpid": f"{c.dpid:#x}",
            "table": c.table,
            "priority": c.priority,
            "match": format_match(c.match),
            "cookie": f"0x{e.cookie:x}",
            "rule_id": e.rule_id,
            "committed_at": c.committed,
            "probes": [
                {
                    "kind": p.kind,
                    "field": p.field,
                    "ingress": name(p.ingress),
                    "header": header_text(p.header),
                    "expected_exits": sorted(name(x) for x in exits),
                    "paths": [delivery_json(self.topo, d) for d in p.deliveries],
                    "reports": w.reports,
                    "verdict": probe_verdict(p, w, exits),
                }
                for p, w, exits in c.probes
            ],
        }

    def state(self) -> dict:
        return {
            "confirmed": self.confirmed,
            "diverged": self.diverged,
            "pending": len(self.queue) + len(self.probing),
            "unprobed": self.unprobed,
            "superseded": self.superseded,
            "dropped": self.dropped,
            "confirm_seconds_median": statistics.median(self.times) if self.times else None,
        }


def probe_verdict(p: EntryProbe, w: Watch, exits: set) -> str:
    """other-tags: a report the model does not allow; unseen: an exit expected, none seen."""
    if any(not r["allowed"] for r in w.reports):
        return "other-tags"
    if exits and not w.reports:
        return "unseen"
    return "agrees"


def verdict_of(probes) -> tuple[str, str]:
    """(confirmed|diverged, reason) of an entry's probes (see the module doc)."""
    vs = [(p.kind, probe_verdict(p, w, exits), exits) for p, w, exits in probes]
    if any(k == "inside" and v == "other-tags" for k, v, _ in vs):
        return "diverged", "not-there"
    if any(k == "outside" and v == "other-tags" for k, v, _ in vs):
        return "diverged", "wider"
    inside = [v for k, v, exits in vs if k == "inside" and exits]
    if inside and all(v == "unseen" for v in inside):
        return "diverged", "unseen"
    return "confirmed", ""


def _summary(name: str, reason: str, detail: dict) -> str:
    if reason == "wider":
        fields = sorted(
            {
                p["field"]
                for p in detail["probes"]
                if p["kind"] == "outside" and p["verdict"] == "other-tags"
            }
        )
        return (
            f"{name}: the switch accepted this entry but forwards headers outside its match "
            f"({', '.join(fields)}) as if it were wider"
        )
    if reason == "unseen":
        return (
            f"{name}: the switch accepted this entry but none of its probes reached an exit "
            "the model predicts"
        )
    return (
        f"{name}: the switch accepted this entry but forwards its headers as if it were not there"
    )
