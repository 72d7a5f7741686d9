"""Confirm in the data plane that a switch installed each entry it accepted.

The model assumes the switch installs exactly what it accepted. When the proxy commits an
ADD or MODIFY the switch accepted, the entry is checked `delay` seconds later: a few
headers of the region the entry decides, and one just outside its match on each field it
matches (cpc.entryprobes), go out through the probe service (pazzd.probes), which waits out
the tester's hold-back of the changed headers, and each probe gets a fate.

  confirmed  every probe's fate is expected: each one the model forwards was reported where
             it says with the tags it allows, each one it drops was not reported
  diverged   an inside probe went elsewhere or with other tags ("not-there": the switch
             forwards the entry's headers as if it were not there), an outside probe went
             elsewhere or never arrived although the model forwards it ("wider": its match
             is wider than accepted, a widened drop among them), or an inside probe the
             model forwards never arrived ("dropped")
  unjudged   nothing contradicted the model but something could not be judged (held back,
             or no report reached the tester): counted, never a finding

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
from dataclasses import dataclass

import ofwire as of
from cpc.entryprobes import entry_probes
from cpc.ofctl import format_match
from cpc.rules import ModelError
from cpc.topology import Topology
from tester.engine import WATCH_FIELDS

from .answers import delivery_json
from .findings import header_text
from .probes import DROPPED, ELSEWHERE, EXPECTED, Job, Probe, ProbeService, Watched
from .records import AgentFinding

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
    job: Job | None = None
    entry: object = None

    @property
    def key(self) -> tuple:
        return (self.dpid, self.table, self.priority, self.match)


class EntryConfirmations:
    """model: the intended state; probes: the probe service; sink: the finding sink
    (pazzd.services)."""

    def __init__(
        self,
        model,
        probes: ProbeService,
        sink,
        topo: Topology,
        *,
        delay: float,
        probes_per_entry: int,
        max_pending: int,
        clock=time.time,
    ) -> None:
        self.model = model
        self.probes = probes
        self.sink = sink
        self.topo = topo
        self.delay = delay
        self.n = probes_per_entry
        self.max_pending = max_pending
        self.clock = clock
        self.queue: deque[_Check] = deque()
        self.probing: dict[tuple, _Check] = {}
        self.confirmed = self.diverged = self.unprobed = self.superseded = self.dropped = 0
        self.unjudged = 0
        self.times: deque[float] = deque(maxlen=RECENT)

    # --- in -----------------------------------------------------------------------------------
    def committed(self, dpid: int, changes) -> None:
        """The proxy committed these changes of dpid's intended table (proxy hooks.commit)."""
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
        key = (dpid, table, priority, match)
        c = self.probing.pop(key, None)
        if c is not None:
            self._close(c)
            self.superseded += 1
        self.sink.resolve(AGENT, self._key(key))

    # --- running ------------------------------------------------------------------------------
    def tick(self) -> None:
        now = self.clock()
        while self.queue and self.queue[0].due <= now and len(self.probing) < self.max_pending:
            self._start(self.queue.popleft())

    def _start(self, c: _Check) -> None:
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
        if not any(p.kind == "inside" for p in found):
            self.unprobed += 1
            return
        probes = [
            Probe(
                p.kind,
                p.ingress,
                p.header,
                frozenset(d.egress for d in p.deliveries if d.kind == "egress"),
                about=p,
            )
            for p in found
        ]
        c.job = self.probes.start(probes, lambda job, c=c: self._finish(c, job))
        if c.job is None:
            self.unprobed += 1
            return
        self.probing[c.key] = c

    def _close(self, c: _Check) -> None:
        if c.job is not None:
            self.probes.cancel(c.job)

    def _finish(self, c: _Check, job: Job) -> None:
        if self.probing.get(c.key) is not c:
            return  # superseded meanwhile
        del self.probing[c.key]
        items = [(w.probe.about, w) for w in job.probes]
        verdict, reason = verdict_of(items)
        log.debug("%s: %s %s: %s", self._name(c), verdict, reason, [w.reports for w in job.probes])
        key = self._key(c.key)
        if verdict == "unjudged":
            self.unjudged += 1
            return
        if verdict == "confirmed":
            self.confirmed += 1
            if job.evidence_at is not None:
                self.times.append(job.evidence_at - c.committed)
            if self.sink.resolve(AGENT, key) is not None:
                log.info("%s: confirmed in the data plane", self._name(c))
            return
        self.diverged += 1
        rec = self._record(c, items, reason)
        rec.key = key
        rec.summary = _summary(self._name(c), reason, rec.probes)
        self.sink.open(rec)

    # --- out ----------------------------------------------------------------------------------
    def _name(self, c: _Check) -> str:
        return (
            f"{self.topo.switches[c.dpid].name} table={c.table} priority={c.priority} "
            f"{format_match(c.match)}"
        )

    def _key(self, key: tuple) -> str:
        dpid, table, priority, match = key
        return f"{dpid:#x}/{table}/{priority}/{format_match(match)}"

    def _record(self, c: _Check, items: list, reason: str) -> AgentFinding:
        e = c.entry
        name = self.topo.port_name
        sw = self.topo.switches[c.dpid].name
        return AgentFinding(
            name=sw,
            severity="critical",
            reason=reason,
            switch=sw,
            dpid=f"{c.dpid:#x}",
            table=c.table,
            priority=c.priority,
            match=format_match(c.match),
            cookie=f"0x{e.cookie:x}",
            rule_id=e.rule_id,
            committed_at=c.committed,
            probes=[
                {
                    "kind": p.kind,
                    "field": p.field,
                    "ingress": name(p.ingress),
                    "header": header_text(p.header),
                    "expected_exits": sorted(name(x) for x in w.probe.exits),
                    "paths": [delivery_json(self.topo, d) for d in p.deliveries],
                    "reports": w.reports,
                    "rounds": w.rounds,
                    "fate": w.fate,
                    "verdict": probe_verdict(w),
                }
                for p, w in items
            ],
        )

    def state(self) -> dict:
        return {
            "confirmed": self.confirmed,
            "diverged": self.diverged,
            "pending": len(self.queue) + len(self.probing),
            "unjudged": self.unjudged,
            "unprobed": self.unprobed,
            "superseded": self.superseded,
            "dropped": self.dropped,
            "confirm_seconds_median": statistics.median(self.times) if self.times else None,
        }


def probe_verdict(w: Watched) -> str:
    """other-tags: a report the model does not allow; elsewhere: reported at an exit the
    model does not predict; else the probe's fate (agrees for expected)."""
    if any(not r["allowed"] for r in w.reports):
        return "other-tags"
    if w.fate == ELSEWHERE:
        return "elsewhere"
    return "agrees" if w.fate == EXPECTED else (w.fate or "unseen")


def verdict_of(items) -> tuple[str, str]:
    """(confirmed|diverged|unjudged, reason) of an entry's [(EntryProbe, Watched)] (see the
    module doc)."""
    fates = [(p.kind, w.fate) for p, w in items]
    if any(k == "inside" and f == ELSEWHERE for k, f in fates):
        return "diverged", "not-there"
    if any(k == "outside" and f in (ELSEWHERE, DROPPED) for k, f in fates):
        return "diverged", "wider"
    if any(k == "inside" and f == DROPPED for k, f in fates):
        return "diverged", "dropped"
    if fates and all(f == EXPECTED for _, f in fates):
        return "confirmed", ""
    return "unjudged", ""


def _summary(name: str, reason: str, probes: list[dict]) -> str:
    if reason == "wider":
        fields = sorted(
            {p["field"] for p in probes if p["kind"] == "outside" and p["fate"] != "expected"}
        )
        return (
            f"{name}: the switch accepted this entry but forwards headers outside its match "
            f"({', '.join(fields)}) as if it were wider"
        )
    if reason == "dropped":
        return (
            f"{name}: the switch accepted this entry but drops headers the model forwards "
            "through it"
        )
    return (
        f"{name}: the switch accepted this entry but forwards its headers as if it were not there"
    )
