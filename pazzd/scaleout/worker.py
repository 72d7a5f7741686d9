"""`pazzd worker`: a model replica and a tester, judging the sample shards it holds.

- The replica (pazzd.scaleout.replica) follows PAZZ_MODEL: the newest snapshot, then
  the log, and the primary's ticks. A sample newer than what the replica is known to
  match (`as_of`) waits: a lagging replica defers, it does not misjudge.
- The shards it judges are leased (pazzd.scaleout.leases); each has its own durable
  consumer, pushing to a subject only the lease holder subscribes to. A batch is judged, the worker's report (fault evidence, critical-flow samples,
  re-probe requests, counters) is published to `pazz.faults` and acknowledged by
  JetStream, and only then are the samples acknowledged: a worker killed at any point
  loses nothing, its samples go to the worker that takes its shards.
- Faults are judged again and stored by the primary, against its own model: the key of a
  fault (kind, location, class) is the primary's, whichever worker saw it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time

import nats.errors
from nats.js.api import ConsumerConfig, DeliverPolicy
from nats.js.errors import NotFoundError

from cpc.tags import VERIFY_ETHERTYPE_MARKED
from tester.engine import Tester
from tester.remote import FlowRelay, Outbox
from tester.sflow import SflowError
from tester.sflow import decode as sflow_decode
from tester.store import FaultStore

from ..wiring import rules_at, tune_tester
from . import bus
from .codec import THRIFT, decode, encode, sample_to_wire
from .journal import topology_fingerprint
from .leases import RENEW, Leases, open_bucket
from .replica import Replica

__all__ = ["Worker", "run_worker"]

MARKED = VERIFY_ETHERTYPE_MARKED.to_bytes(2, "big")  # a probe's Verify header, after the MACs

log = logging.getLogger("pazzd.worker")
BATCH = 128
MAX_DEFER = 30.0  # seconds a sample waits for the replica before it is left to JetStream


class _PartsGone(Exception):
    """The snapshot read was replaced meanwhile: take the newest."""


class _Sampled(bytes):
    """A sample's raw header that remembers its sFlow sample and agent: the evidence the
    primary judges again tells distinct packets apart as this worker did."""


class ShardTester(Tester):
    """A Tester that also hands every fault sample it records to the worker's report."""

    __test__ = False

    def __init__(self, *a, evidence: list, **kw) -> None:
        super().__init__(*a, **kw)
        self.evidence = evidence
        self.probe_reports = 0  # marked reports handed to the primary unjudged

    @staticmethod
    def _sampled(raw: bytes, sample, agent) -> bytes:
        if sample is None or agent is None:
            return raw
        out = _Sampled(raw)
        out.sample, out.agent = sample, agent
        return out

    def handle_report(self, egress, raw, now, sampling_rate=1, sample=None, agent=None):
        if raw[12:14] == MARKED and sample is not None and agent is not None:
            # A probe's report: the primary judges it, where the probes' watches are.
            self.evidence.append(
                THRIFT.Evidence(
                    agent[0], agent[1], sample_to_wire(sample), *egress, False, now, True
                )
            )
            self.probe_reports += 1
            return None
        raw = self._sampled(raw, sample, agent)
        return super().handle_report(egress, raw, now, sampling_rate, sample, agent)

    def handle_hop_sample(self, port, raw, now, pf=None, sample=None, agent=None):
        raw = self._sampled(raw, sample, agent)
        return super().handle_hop_sample(port, raw, now, pf, sample, agent)

    def _record(self, v, key, cls, egress, hdr, raw, vp, vr, now, hop=False) -> None:
        if isinstance(raw, _Sampled):
            wire, agent = sample_to_wire(raw.sample), raw.agent
        else:
            wire, agent = THRIFT.WireFlowSample(header=bytes(raw)), ("", 0)
        self.evidence.append(
            THRIFT.Evidence(agent[0], agent[1], wire, egress[0], egress[1], hop, now)
        )
        super()._record(v, key, cls, egress, hdr, raw, vp, vr, now, hop)


class Worker:
    def __init__(self, cfg, name: str, url: str, shards: int) -> None:
        self.cfg = cfg
        self.name = name
        self.url = url
        self.shards = shards
        topo = cfg.topology
        self.replica = Replica(
            topo,
            topology_fingerprint(topo),
            select_hash=cfg.ovs.select_hash,
            host_macs=cfg.fuzz.host_macs,
            settle=cfg.tester.settle,
        )
        self.outbox = Outbox()
        self.evidence: list = []
        self.tester: ShardTester | None = None
        self.store = FaultStore(":memory:")  # the worker's own bookkeeping of open faults
        self.judged = 0  # datagrams judged
        self.deferred = 0  # datagrams that waited for the replica
        self.reports = 0
        self.bad_messages = 0
        self.judged_seqs: list[int] = []  # stream sequences (batches) judged since the last report
        self.leases: Leases | None = None
        self._tasks: dict[int, asyncio.Task] = {}
        self._ready = asyncio.Event()
        self._ticked = asyncio.Event()  # a tick came: deferred samples look again

    # --- the replica ------------------------------------------------------------------
    def _new_tester(self) -> None:
        r, cfg = self.replica, self.cfg
        flows = cfg.critical_flows
        t = ShardTester(
            r.model,
            self.store,
            r.ifmap,
            guard=r.guard,
            blackholes=FlowRelay(flows, self.outbox) if flows else None,
            rules_at=rules_at(r.model),
            links=cfg.topology.links,
            evidence=self.evidence,
        )
        tune_tester(t, cfg)
        t.on_suspect = self.outbox.suspect
        t.on_unexplained = self.outbox.unexplained
        self.tester = t

    async def _load(self, js, head, head_seq: int) -> None:
        parts = []
        seq = head.first_part
        while len(parts) < head.parts and seq < head_seq:
            msg = await js.get_msg(bus.MODEL_STREAM, seq)
            if msg.subject == bus.MODEL_PART:
                rec = decode(THRIFT.ModelRecord, msg.data)
                if rec.epoch == head.epoch and rec.version == head.version:
                    parts.append(rec)
            seq += 1
        if len(parts) != head.parts:
            raise _PartsGone(f"snapshot {head.epoch}/{head.version}: parts purged")
        t0 = time.monotonic()
        self.replica.load(head, parts)
        self._new_tester()
        log.info(
            "worker %s: model %s/%d loaded, %d entries in %.2f s",
            self.name,
            head.epoch,
            head.version,
            self.replica.model.rule_count(),
            time.monotonic() - t0,
        )

    async def _latest_head(self, js):
        while True:
            try:
                msg = await js.get_last_msg(bus.MODEL_STREAM, bus.MODEL_HEAD)
                return decode(THRIFT.SnapshotHead, msg.data), msg.seq
            except NotFoundError:
                await asyncio.sleep(0.5)  # no primary yet

    async def follow_model(self, js, nc, stop: asyncio.Event) -> None:
        await nc.subscribe(bus.TICK, cb=self._on_tick)
        while not stop.is_set():
            head, seq = await self._latest_head(js)
            try:
                await self._load(js, head, seq)
            except _PartsGone:
                continue
            self._ready.set()
            sub = await js.subscribe(
                "pazz.model.>",
                ordered_consumer=True,
                config=ConsumerConfig(
                    deliver_policy=DeliverPolicy.BY_START_SEQUENCE, opt_start_seq=seq + 1
                ),
            )
            try:
                async for msg in sub.messages:
                    if stop.is_set():
                        break
                    if msg.subject == bus.MODEL_LOG:
                        rec = decode(THRIFT.ModelRecord, msg.data)
                        if not self.replica.apply(rec) and self.replica.stale:
                            log.warning("worker %s: model record missing; waiting", self.name)
                    elif msg.subject == bus.MODEL_HEAD:
                        head = decode(THRIFT.SnapshotHead, msg.data)
                        if self.replica.needs_snapshot(head.epoch):
                            try:
                                await self._load(js, head, msg.metadata.sequence.stream)
                            except _PartsGone:
                                break  # a newer one is there: start from it
            finally:
                with contextlib.suppress(Exception):
                    await sub.unsubscribe()

    async def _on_tick(self, msg) -> None:
        with contextlib.suppress(ValueError):
            self.replica.tick(decode(THRIFT.Tick, msg.data))
            self._ticked.set()

    # --- the shards -------------------------------------------------------------------
    async def _judge(self, msg) -> None:
        try:
            b = decode(THRIFT.SampleBatch, msg.data)
        except ValueError as e:  # not a collector's: acknowledged, counted, never retried
            self.bad_messages += 1
            log.warning("worker %s: a sample message that does not parse: %s", self.name, e)
            return
        r = self.replica
        if r.as_of < b.received:
            self.deferred += 1
            deadline = time.monotonic() + MAX_DEFER
            while r.as_of < b.received and time.monotonic() < deadline:
                self._ticked.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._ticked.wait(), 0.5)
            if r.as_of < b.received:
                raise TimeoutError("the replica lags: the samples are left for later")
        t, agents = self.tester, self.cfg.sflow.agents
        for data in b.datagrams:
            t.stats.datagrams += 1
            try:
                dg = sflow_decode(data)
            except SflowError:  # the collector decoded it: not from a collector of ours
                t.stats.malformed += 1
                continue
            if agents is not None and not (dg.agent in agents and b.source in agents):
                t.stats.unknown_agent += 1
                continue
            t.handle_datagram(dg, b.received)
            self.judged += 1
        self.judged_seqs.append(msg.metadata.sequence.stream)

    async def _report(self, js) -> None:
        t = self.tester
        faults, flows, suspects = self.outbox.take()
        del faults  # the primary judges the evidence again and makes its own
        evidence, self.evidence[:] = list(self.evidence), []
        judged, self.judged_seqs = self.judged_seqs, []
        stats = {k: int(v) for k, v in t.stats.as_dict().items() if isinstance(v, int)}
        stats |= {"judged": self.judged, "deferred": self.deferred, "bad": self.bad_messages}
        stats["probe_reports"] = t.probe_reports
        rep = THRIFT.ScaleoutReport(
            self.name,
            stats,
            evidence,
            flows,
            suspects,
            self.replica.lag(time.time()),
            self.replica.version,
            sorted(self.leases.held) if self.leases else [],
            judged,
        )
        try:
            await js.publish(bus.FAULTS, encode(rep), stream=bus.FAULTS_STREAM)
        except Exception:
            self.evidence[:0] = evidence  # kept for the next report: nothing is lost
            self.judged_seqs[:0] = judged
            self.outbox.flows[:0], self.outbox.suspects[:0] = flows, suspects
            raise
        self.reports += 1

    async def _shard(self, js, nc, shard: int, stop: asyncio.Event) -> None:
        """Judge what the shard's consumer pushes, in batches of what has arrived, while
        this worker holds the shard."""
        sub = await nc.subscribe(bus.deliver_subject(shard), pending_msgs_limit=-1)
        try:
            while not stop.is_set() and self.leases and shard in self.leases.held:
                try:
                    batch = [await sub.next_msg(timeout=0.5)]
                except nats.errors.TimeoutError:
                    continue
                while sub.pending_msgs and len(batch) < BATCH:
                    batch.append(await sub.next_msg(timeout=0.1))
                done = []
                try:
                    for msg in batch:
                        await self._judge(msg)
                        done.append(msg)
                finally:
                    if done:  # acknowledged once what they showed is in JetStream
                        await self._report(js)
                        for msg in done:
                            await msg.ack()
        finally:
            with contextlib.suppress(Exception):
                await sub.unsubscribe()

    async def run(self, stop: asyncio.Event, on_ready=None) -> None:
        # Two connections: the model and its ticks never queue behind a backlog of samples.
        nc = await bus.connect(self.url, f"pazzd-worker-{self.name}")
        data = await bus.connect(self.url, f"pazzd-worker-{self.name}-samples")
        js = nc.jetstream()
        await bus.ensure_streams(js, self.shards)
        follow = asyncio.create_task(self.follow_model(js, nc, stop))
        await self._wait_ready(stop, follow)
        if stop.is_set():
            follow.cancel()
            await nc.drain()
            await data.drain()
            return
        self.leases = Leases(await open_bucket(js), self.name, self.shards)
        log.info("worker %s: judging; NATS %s", self.name, self.url)
        if on_ready is not None:
            on_ready(self)
        last_report = time.monotonic()
        try:
            while not stop.is_set():
                try:
                    held = await self.leases.renew()
                except Exception as e:
                    log.warning("worker %s: leases: %s", self.name, e)
                    held = set(self.leases.held)
                for s in held:
                    task = self._tasks.get(s)
                    if task is None or task.done():
                        self._tasks[s] = asyncio.create_task(self._shard(js, data, s, stop))
                if time.monotonic() - last_report >= 1.0:
                    self.tester.tick()
                    with contextlib.suppress(Exception):
                        await self._report(js)
                    last_report = time.monotonic()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), RENEW)
                if follow.done() and follow.exception() is not None:
                    raise follow.exception()
        finally:
            stop.set()
            for t in [*self._tasks.values(), follow]:
                t.cancel()
            await asyncio.gather(*self._tasks.values(), follow, return_exceptions=True)
            with contextlib.suppress(Exception):
                await self.leases.release()
            for conn in (data, nc):
                with contextlib.suppress(Exception):
                    await conn.drain()

    async def _wait_ready(self, stop: asyncio.Event, follow: asyncio.Task) -> None:
        while not self._ready.is_set() and not stop.is_set():
            if follow.done():
                follow.result()  # raises what stopped it
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._ready.wait(), 0.5)


def default_name() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"


async def run_worker(cfg, name: str, stop: asyncio.Event, on_ready=None) -> Worker:
    w = Worker(cfg, name, cfg.scaleout.nats, cfg.scaleout.shards)
    await w.run(stop, on_ready)
    return w
