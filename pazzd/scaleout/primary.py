"""The primary pazzd's side of the scale-out: it journals its model (ModelJournal) and
reads the workers' reports from `pazz.faults`.

Each fault sample a worker sends is judged again here, against the primary's model and
hold-back, and recorded by the primary's tester: the fault store, the fault keys, the
localization and the notifications are those of single-host mode, and a sample that two
workers judged (a redelivery) bumps one fault, it never opens a second. The probes'
reports (marked), which the workers pass on unjudged, are judged here whole, so the checks
that watch their probes (confirmations of findings and of entries) work as in single-host
mode. A report is acknowledged after what it carries is stored.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

import nats.errors

from ..workers import relay_flows_and_suspects
from . import bus
from .codec import THRIFT, decode, sample_from_wire
from .journal import ModelJournal

__all__ = ["PrimaryLink"]

log = logging.getLogger("pazzd.scaleout")


class PrimaryLink:
    def __init__(self, daemon, url: str, shards: int, snapshot_every: int) -> None:
        self.d = daemon
        self.url = url
        self.shards = shards
        self.journal = ModelJournal(
            daemon.model, lambda: daemon.tester.ifmap.entries(), snapshot_every
        )
        self.workers: dict[str, dict] = {}  # name -> its latest report's figures
        self.evidence = 0
        self.reports = 0
        self.bad_reports = 0
        self.connected = False

    def handle(self, rep) -> None:
        self.reports += 1
        t = self.d.tester
        # The reports the worker judged reached the tester, as they do in single-host mode:
        # the probe service tells a probe dropped (or dropped as the model says) from one
        # that could not be judged by reports arriving at all during its round.
        before = self.workers.get(rep.worker, {}).get("stats", {}).get("reports", 0)
        now = rep.stats.get("reports", 0)
        t.stats.reports += now - before if now >= before else now  # else: it restarted
        self.workers[rep.worker] = {
            "seen": time.time(),
            "lag": rep.lag,
            "version": rep.version,
            "shards": list(rep.shards),
            "stats": dict(rep.stats),
        }
        relay_flows_and_suspects(self.d, rep.flows or (), rep.suspects or ())
        # The worker asked for the re-probes of its fault samples already (its suspects):
        # not twice. A probe's report is the primary's to judge whole (its watches too).
        suspect, unexplained = t.on_suspect, t.on_unexplained
        try:
            for ev in rep.evidence or ():
                self.evidence += 1
                t.on_suspect, t.on_unexplained = (
                    (suspect, unexplained) if ev.probe else (None, None)
                )
                s = sample_from_wire(ev.sample)
                agent = (ev.agent, ev.sub_agent) if ev.agent else None
                sample = s if agent is not None else None
                where = (ev.dpid, ev.port)
                if ev.hop:
                    t.handle_hop_sample(where, s.header, ev.time, None, sample, agent)
                else:
                    t.handle_report(where, s.header, ev.time, s.sampling_rate, sample, agent)
        finally:
            t.on_suspect, t.on_unexplained = suspect, unexplained

    def lagging(self, now: float, max_age: float = 10.0) -> dict[str, float]:
        """Each worker heard from in the last max_age seconds: its replica's lag."""
        return {w: v["lag"] for w, v in self.workers.items() if now - v["seen"] <= max_age}

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            try:
                nc = await bus.connect(self.url, "pazzd-primary")
                break
            except Exception as e:
                log.warning("scale-out: NATS %s unreachable (%s); trying again", self.url, e)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), 2.0)
        else:
            return
        js = nc.jetstream()
        self.connected = True
        try:
            await bus.ensure_streams(js, self.shards)
            journal = asyncio.create_task(self.journal.run(js, nc, stop))
            try:
                await self._reports(nc, stop)
            finally:
                journal.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await journal
        finally:
            self.connected = False
            with contextlib.suppress(Exception):
                await nc.drain()

    async def _reports(self, nc, stop: asyncio.Event) -> None:
        sub = await nc.subscribe(bus.PRIMARY_DELIVER, pending_msgs_limit=-1)
        try:
            while not stop.is_set():
                try:
                    msg = await sub.next_msg(timeout=0.5)
                except nats.errors.TimeoutError:
                    continue
                try:
                    rep = decode(THRIFT.ScaleoutReport, msg.data)
                except ValueError as e:
                    self.bad_reports += 1
                    log.warning("scale-out: a report that does not parse dropped: %s", e)
                    await msg.term()
                    continue
                self.handle(rep)
                await msg.ack()
        finally:
            with contextlib.suppress(Exception):
                await sub.unsubscribe()
