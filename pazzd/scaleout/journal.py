"""The primary's model journal: every committed model update goes to PAZZ_MODEL in order
(`pazz.model.log`), a snapshot every `snapshot_every` updates (and at the start, and after
anything the log could not carry), and a tick 50 times a second on `pazz.model.tick`.

Versions count within an epoch, one run of the primary: a replica that sees a new epoch
loads that epoch's first snapshot. Trial updates (the intent guard's) are not journalled:
they are taken back before anything else runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import time
import uuid
from collections import deque
from collections.abc import Callable

from cpc import ofctl
from tester.remote import THRIFT

from .bus import MODEL_HEAD, MODEL_LOG, MODEL_PART, MODEL_STREAM, TICK
from .codec import changes_of_update, encode

__all__ = ["ModelJournal", "snapshot_records", "topology_fingerprint"]

log = logging.getLogger("pazzd.scaleout")
PART_CHANGES = 2000  # model changes per snapshot part (a part stays well under 1 MB)
MAX_PENDING = 100_000  # unpublished records beyond this are dropped for a snapshot
TICK_EVERY = 0.02  # a sample waits for the tick after it: at most this long


def topology_fingerprint(topo) -> str:
    """What primary and replicas must agree on: switches, ports and links."""
    text = repr(
        (
            sorted((d, sorted(s.ports)) for d, s in topo.switches.items()),
            sorted(topo.links.items()),
            sorted(topo.edges),
        )
    )
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def ifmap_entries(entries) -> list:
    return [THRIFT.IfEntry(a, s, i, p[0], p[1]) for (a, s, i), p in sorted(entries)]


def snapshot_records(model, epoch: str, version: int, now: float) -> list:
    """The model's whole state as ModelRecords of at most PART_CHANGES changes: groups,
    ports down, then the entries in the model's order (ties between overlapping entries
    of one priority go by that order)."""
    ch = THRIFT.ModelChange
    changes = [ch("group", g.dpid, ofctl.format_group(g)) for g in model.groups()]
    changes += [ch("port_down", d, "", p) for d, p in sorted(model.topo.down)]
    changes += [ch("add", e.dpid, ofctl.format_flow(e)) for e in model.entries()]
    return [
        THRIFT.ModelRecord(epoch, version, now, changes[i : i + PART_CHANGES])
        for i in range(0, max(len(changes), 1), PART_CHANGES)
    ]


class ModelJournal:
    """Subscribes to the model; `run(js, nc, stop)` publishes in order."""

    def __init__(
        self,
        model,
        ifmap: Callable[[], list],
        snapshot_every: int = 1000,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.model = model
        self.ifmap = ifmap  # () -> [((agent, sub, ifIndex), port)]
        self.snapshot_every = snapshot_every
        self.clock = clock
        self.epoch = uuid.uuid4().hex[:12]
        self.fingerprint = topology_fingerprint(model.topo)
        self.version = 0  # of the latest record made
        self.published = 0  # of the latest record JetStream acknowledged
        self.pending: deque[tuple[int, bytes]] = deque()
        self.need_snapshot = True
        self.since_snapshot = 0
        self.snapshots = 0
        self.dropped = 0  # records dropped for a snapshot (the engine was unreachable)
        self._model_version = model.version
        self._ifmap_seen: list | None = None
        self._wake: asyncio.Event | None = None  # set by an update: publish at once
        model.subscribe(self._on_update, weak=True)

    def _on_update(self, upd) -> None:
        self._model_version = upd.version
        if upd.trial:
            return
        self._record(changes_of_update(upd))

    def _record(self, changes: list, ifmap: list | None = None) -> None:
        self.version += 1
        rec = THRIFT.ModelRecord(
            self.epoch, self.version, self.clock(), changes, ifmap or [], ifmap is not None
        )
        self.pending.append((self.version, encode(rec)))
        self.since_snapshot += 1
        if self._wake is not None:
            self._wake.set()
        if len(self.pending) > MAX_PENDING:
            self.dropped += len(self.pending)
            self.pending.clear()
            self.need_snapshot = True

    def _check(self) -> None:
        """A model change no update announced (a bulk load) needs a snapshot; a new
        ifmap a record."""
        if self.model.version != self._model_version:
            self._model_version = self.model.version
            self.need_snapshot = True
        now = sorted(self.ifmap())
        if now != self._ifmap_seen:
            if self._ifmap_seen is not None:
                self._record([], ifmap_entries(now))
            self._ifmap_seen = now

    async def _snapshot(self, js) -> None:
        self.version += 1  # the snapshot's own version: records before it are in it
        self.pending.clear()
        version, now = self.version, self.clock()
        parts = snapshot_records(self.model, self.epoch, version, now)
        ifmap = ifmap_entries(self.ifmap())
        # What came before is in the snapshot: the log and the old parts go first, the
        # old heads after the new one (a replica between the two finds parts missing and
        # takes the newest head instead).
        await js.purge_stream(MODEL_STREAM, subject=MODEL_LOG)
        await js.purge_stream(MODEL_STREAM, subject=MODEL_PART)
        first = None
        for rec in parts:
            ack = await js.publish(MODEL_PART, encode(rec), stream=MODEL_STREAM)
            first = ack.seq if first is None else first
        head = THRIFT.SnapshotHead(
            self.epoch, version, now, first, len(parts), self.fingerprint, ifmap
        )
        await js.publish(MODEL_HEAD, encode(head), stream=MODEL_STREAM)
        self.need_snapshot = False
        self.since_snapshot = 0
        self.published = version
        self.snapshots += 1
        await js.purge_stream(MODEL_STREAM, subject=MODEL_HEAD, keep=1)
        log.info(
            "model snapshot %s/%d published: %d parts, %d entries",
            self.epoch,
            version,
            len(parts),
            self.model.rule_count(),
        )

    async def run(self, js, nc, stop: asyncio.Event) -> None:
        self._wake = asyncio.Event()
        while not stop.is_set():
            self._wake.clear()
            try:
                self._check()
                if self.need_snapshot or self.since_snapshot >= self.snapshot_every:
                    await self._snapshot(js)
                while self.pending:
                    version, data = self.pending[0]
                    await js.publish(MODEL_LOG, data, stream=MODEL_STREAM)
                    if self.pending and self.pending[0][0] == version:
                        self.pending.popleft()
                    self.published = version
                if not self.pending:  # every commit up to now is in the stream
                    now = self.clock()
                    tick = THRIFT.Tick(self.epoch, self.version, now)
                    await nc.publish(TICK, encode(tick))
            except Exception as e:  # the engine away: try again, keep the order
                log.warning("model journal: %s", e)
                await _sleep(stop, 1.0)
                continue
            await _sleep(self._wake, TICK_EVERY)


async def _sleep(event: asyncio.Event, seconds: float) -> None:
    """Up to `seconds`, or until the event is set."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(event.wait(), seconds)
