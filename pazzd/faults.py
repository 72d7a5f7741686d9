"""What the tester reports of data-plane faults, handled in the daemon: a new fault is
counted and logged (it is stored already), its switch is polled to localize it, and a
suspicious first sample is sent again by the fuzzer (corroboration). Tester workers in
other processes report the same events (pazzd.workers)."""

from __future__ import annotations

import asyncio
import logging
import time

from pazzapi import InputError
from tester.detect import in_filter
from tester.engine import MAX_REPLAY_INGRESSES, FaultEvent, LocalizationRequest
from tester.store import OPEN

from .audit import AUDIT, audit_answer

__all__ = ["MAX_REPLAY_INGRESSES", "FaultEvents"]

log = logging.getLogger("pazzd")


class FaultEvents:
    """store: the fault store; metrics: pazzd's; localizer: pazzd.localize.Localizer;
    spawn(coroutine): runs it on the daemon's loop. tester and fuzzer are set once they
    exist (the fuzzer may be None)."""

    def __init__(self, store, metrics, localizer, spawn, edge_ports=()) -> None:
        self.store = store
        self.edge_ports = list(edge_ports)  # where a replay of an unexplained sample may go
        self.metrics = metrics
        self.localizer = localizer
        self.spawn = spawn
        self.tester = None
        self.fuzzer = None
        self.sampling_rate = 1  # sflow.sampling_rate: the copies a corroboration sends
        self.last_datagram = 0.0
        self.replays = 0  # ingresses an unexplained sample was replayed from

    def worker_report(self, last_datagram: float, events) -> None:
        """What a tester worker reported (pazzd.workers): when it last had a datagram, and
        its fault events and localization requests, in order."""
        self.last_datagram = max(self.last_datagram, last_datagram)
        for ev in events:
            (self.localize_soon if isinstance(ev, LocalizationRequest) else self.fault)(ev)

    def fault(self, ev: FaultEvent) -> None:
        """A fault event of the tester: a new one is counted and logged."""
        if ev.resolved:
            log.info("fault #%d resolved: %s at %s", ev.fault_id, ev.kind, ev.location)
            return
        if not ev.new:
            return
        row = self.store.get(ev.fault_id)
        if self._folded(row):
            # Reopened by another sample of a fault merged into one still open: fold again.
            self.store.resolve(ev.fault_id, time.time())
            return
        self.metrics.faults_detected.labels(ev.kind).inc()
        latency = 0.0
        if row is not None:
            since = (row.localization or {}).get("silent_since") if ev.kind == "blackhole" else None
            # From the fault's first evidence: with corroboration that is its first sample,
            # earlier than the datagram that completed it.
            start = since if since else min(self.last_datagram or row.first_seen, row.first_seen)
            latency = max(0.0, time.time() - start)
        self.metrics.detection_latency.observe(latency)
        hdr = ev.header.get("text") if "text" in ev.header else None
        log.warning(
            "fault #%d %s at %s, candidates %s, header %s",
            ev.fault_id,
            ev.kind,
            ev.location,
            list(ev.candidates),
            hdr or ev.header_class,
        )

    def suspect(self, egress, header: dict, expected) -> None:
        """A fault's first sample (the in-process tester's on_suspect)."""
        self.corroborate(header, [e.ingress for e in expected])

    def unexplained(self, egress, header: dict, verify_port: int) -> None:
        """A fault's first sample that no ingress explains (Type-a), not a probe of ours:
        replay its header from the edge ports whose Bloom bits its Verify_Port carries
        (where it can have come in), at most MAX_REPLAY_INGRESSES of them, each with the
        copies of a corroboration; the replays confirm the fault or it stays unopened."""
        if self.fuzzer is None:
            return
        hdr = {k: v for k, v in header.items() if k != "text"}
        if self.fuzzer.sender(hdr) is not None:
            return  # a probe: suspect() sent it again from its own ingress
        came = [p for p in self.edge_ports if p != tuple(egress) and in_filter(verify_port, p)]
        for ing in came[:MAX_REPLAY_INGRESSES]:
            self.fuzzer.corroborate(ing, hdr, self.sampling_rate)
        self.replays += min(len(came), MAX_REPLAY_INGRESSES)

    def corroborate(self, header: dict, expected_from) -> None:
        """Have the fuzzer send a fault's first sample again, 3N times at sampling 1/N (so
        that a copy is sampled within a second or two), from the probe's own ingress when
        it was a probe, else from the ingresses the model expects it from (corroboration,
        tester.corroborate; tester workers send theirs with their reports)."""
        if self.fuzzer is None:
            return
        hdr = {k: v for k, v in header.items() if k != "text"}
        sender = self.fuzzer.sender(hdr)
        ings = [sender] if sender is not None else list(expected_from)
        n = self.sampling_rate
        for ing in list(dict.fromkeys(ings))[:MAX_REPLAY_INGRESSES]:
            self.fuzzer.corroborate(ing, hdr, n)

    def localize_soon(self, req: LocalizationRequest) -> None:
        self.spawn(self._auto_localize(req.fault_id))

    def _folded(self, row) -> bool:
        """Is row a fault merged into another (polled.merged_into) that is still open?"""
        into = row.polled.get("merged_into") if row and isinstance(row.polled, dict) else None
        host = self.store.get(into) if into is not None else None
        return host is not None and host.state == OPEN

    async def _auto_localize(self, fid: int) -> None:
        await asyncio.sleep(0.2)  # let OVS finish the change that caused it
        if self._folded(self.store.get(fid)):
            return  # its entry is the open fault's: no need to poll the switches again
        try:
            ans = await self.localize(fid)
            if ans.get("switch"):
                log.warning(
                    "fault #%d localized: %s %s entry %s",
                    fid,
                    ans["switch"],
                    ans["finding"],
                    ans["cause"],
                )
        except Exception as e:
            log.warning("fault #%d: localization failed: %s", fid, e)

    async def localize(self, fid: int) -> dict:
        row = self.store.get(fid)
        if row is None:
            raise InputError(f"no fault with id {fid}")
        if row.kind == AUDIT:  # the audit compared the whole table: nothing to poll
            return audit_answer(row)
        t0 = time.monotonic()
        ans = await self.localizer.localize(row)
        self.metrics.localize.observe(time.monotonic() - t0)
        into = self._same_cause(fid, ans)
        older = self.store.get(into) if into is not None else None
        if older is not None and _names_culprit(row) and not _names_culprit(older):
            # This fault names the switch that went wrong, the older one only candidates (a
            # misrouted packet judged further on): the older is folded into this one.
            self._fold(older, fid, older.polled)
            into = None
        if into is not None:
            return self._fold(row, into, ans)
        if self.tester is not None:
            self.tester.answer_localization(fid, ans)
        return ans

    def _fold(self, row, into: int, ans: dict) -> dict:
        """Fault `row`, localized as `ans`, is the same as open fault `into`: its answer is
        stored marked merged_into, and it is resolved. Returns the marked answer."""
        ans = {**ans, "merged_into": into}
        if self.tester is not None:
            self.tester.answer_localization(row.id, ans)
        if row.state == OPEN and self.store.resolve(row.id, time.time()):
            log.info(
                "fault #%d resolved: localized to the entry of fault #%d, merged", row.id, into
            )
        return ans

    def _same_cause(self, fid: int, ans: dict) -> int | None:
        """An older open fault localized to the same switch and entry as this answer: the
        same fault seen through other samples (a detour of a misroute, say). The younger is
        folded into the older, unless only the younger names the switch that went wrong."""
        key = _cause_key(ans)
        if key is None:
            return None
        for r in self.store.faults(OPEN):
            if r.id < fid and r.kind != AUDIT and _cause_key(r.polled) == key:
                return r.id
        return None


def _names_culprit(row) -> bool:
    """Does the fault's verdict name the switch that went wrong (not only candidates)?"""
    loc = row.localization if row is not None and isinstance(row.localization, dict) else {}
    return loc.get("culprit") is not None


def _cause_key(ans) -> tuple | None:
    """(switch, finding, entry) of a localization answer that names an entry, else None."""
    if not isinstance(ans, dict) or ans.get("dpid") is None or not ans.get("cause"):
        return None
    return ans["dpid"], ans.get("finding"), ans["cause"]
