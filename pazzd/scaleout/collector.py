"""`pazzd collector`: sFlow datagrams in over UDP, decoded and checked (malformed ones and
agents outside sflow.agents dropped and counted), published to JetStream as received
(`pazz.samples.<shard>`, the shard by agent). Stateless: run one per sFlow host group.

An agent's datagrams go out together, up to `batch_max` or `linger` seconds after the
first (one message, one acknowledgement, one decode in the worker for many). It never
blocks on the engine: a datagram is dropped, and counted, when the connection is down or
`max_inflight` datagrams wait for their acknowledgement; a datagram counts as accepted
only once JetStream acknowledged it (stored it).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass

from tester.sflow import SflowError, decode

from . import bus
from .codec import THRIFT, encode

__all__ = ["Collector", "CollectorStats"]

log = logging.getLogger("pazzd.collector")


@dataclass
class CollectorStats:
    datagrams: int = 0
    malformed: int = 0
    unknown_agent: int = 0
    accepted: int = 0  # acknowledged by JetStream
    dropped_unreachable: int = 0  # not sent: no connection, or too many unacknowledged
    publish_failed: int = 0  # sent, but JetStream refused or did not answer in time


class Collector(asyncio.DatagramProtocol):
    def __init__(
        self,
        js,
        nc,
        shards: int,
        agents: frozenset[str] | None = None,
        max_inflight: int = 16384,
        timeout: float = 5.0,
        linger: float = 0.005,
        batch_max: int = 64,
    ) -> None:
        self.js, self.nc = js, nc
        self.shards = shards
        self.agents = agents
        self.max_inflight = max_inflight
        self.timeout = timeout
        self.stats = CollectorStats()
        self.inflight = 0  # datagrams sent and not acknowledged yet
        self.linger = linger  # seconds an agent's first datagram waits for others
        self.batch_max = batch_max
        self._batches: dict[tuple[str, str], list[bytes]] = {}
        self._tasks: set[asyncio.Task] = set()

    def datagram_received(self, data: bytes, addr) -> None:
        st = self.stats
        st.datagrams += 1
        try:
            dg = decode(data)
        except SflowError:
            st.malformed += 1
            return
        source = addr[0] if isinstance(addr, tuple) else ""
        if self.agents is not None and not (dg.agent in self.agents and source in self.agents):
            st.unknown_agent += 1
            return
        if not self.nc.is_connected or self.inflight >= self.max_inflight:
            st.dropped_unreachable += 1
            return
        key = (dg.agent, source)
        batch = self._batches.get(key)
        if batch is None:
            batch = self._batches[key] = []
            asyncio.get_running_loop().call_later(self.linger, self._flush, key)
        batch.append(data)
        if len(batch) >= self.batch_max:
            self._flush(key)

    def _flush(self, key: tuple[str, str]) -> None:
        batch = self._batches.pop(key, None)
        if not batch:
            return
        payload = encode(THRIFT.SampleBatch(time.time(), key[1], batch))
        subject = bus.shard_subject(bus.shard_of(key[0], self.shards))
        self.inflight += len(batch)
        t = asyncio.get_running_loop().create_task(self._publish(subject, payload, len(batch)))
        self._tasks.add(t)
        t.add_done_callback(self._tasks.discard)

    async def _publish(self, subject: str, payload: bytes, n: int) -> None:
        try:
            await self.js.publish(subject, payload, timeout=self.timeout)
            self.stats.accepted += n
        except Exception as e:
            self.stats.publish_failed += n
            log.debug("publish failed: %s", e)
        finally:
            self.inflight -= n

    async def drain(self, timeout: float = 5.0) -> None:
        for key in list(self._batches):
            self._flush(key)
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=timeout)


async def run_collector(
    url: str,
    host: str,
    port: int,
    shards: int,
    stop: asyncio.Event,
    agents: frozenset[str] | None = None,
    on_ready=None,
    stats_every: float = 10.0,
) -> CollectorStats:
    nc = await bus.connect(url, "pazzd-collector")
    js = nc.jetstream()
    await bus.ensure_streams(js, shards)
    loop = asyncio.get_running_loop()
    col = Collector(js, nc, shards, agents)
    transport, _ = await loop.create_datagram_endpoint(lambda: col, local_addr=(host, port))
    bound = transport.get_extra_info("sockname")
    log.info("collector: sFlow on %s:%d, %d shards, NATS %s", bound[0], bound[1], shards, url)
    if on_ready is not None:
        on_ready(col, bound)
    try:
        while not stop.is_set():
            try:
                await asyncio.wait_for(stop.wait(), stats_every)
            except TimeoutError:
                log.info("collector: %s", col.stats)
    finally:
        transport.close()
        await col.drain()
        with contextlib.suppress(Exception):
            await nc.drain()
        log.info("collector stopped: %s", col.stats)
    return col.stats
