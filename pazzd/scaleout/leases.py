"""Which worker judges which shard: leases in a JetStream key-value bucket.

A shard's samples must stay on one worker (per-agent sequence numbers; a fault opens on
two samples of distinct packets, held by the worker that saw the first), which a plain
queue group does not give. Each worker renews `w.<id>` and the `s.<shard>` keys it holds
every RENEW seconds; keys expire after TTL seconds without renewal, so the shards of a
worker that died (kill -9) are free again after TTL and are claimed by the others, and
JetStream redelivers what it had not acknowledged. Each worker holds about shards/workers:
it releases the excess and claims free shards up to its share, from its second renewal
on (workers started together then split the shards from the start).
"""

from __future__ import annotations

import contextlib
import logging
import math
import zlib

from nats.js.api import KeyValueConfig, StorageType
from nats.js.errors import KeyNotFoundError, KeyWrongLastSequenceError, NoKeysError

from .bus import LEASES

__all__ = ["RENEW", "TTL", "Leases", "open_bucket"]

log = logging.getLogger("pazzd.worker")
TTL = 5.0
RENEW = 1.0


async def open_bucket(js):
    try:
        return await js.key_value(LEASES)
    except Exception:  # not there yet: the first worker makes it
        return await js.create_key_value(
            KeyValueConfig(bucket=LEASES, ttl=TTL, history=1, storage=StorageType.FILE)
        )


class Leases:
    def __init__(self, kv, worker: str, shards: int) -> None:
        self.kv = kv
        self.worker = worker
        self.shards = shards
        self.held: dict[int, int] = {}  # shard -> revision of our lease
        # Each worker prefers its own order of shards (rendezvous hashing): claims spread.
        self.order = sorted(range(shards), key=lambda s: zlib.crc32(f"{worker}/{s}".encode()))
        self.workers = 1
        self.renewals = 0

    async def renew(self) -> set[int]:
        kv, me = self.kv, self.worker.encode()
        await kv.put(f"w.{self.worker}", me)
        self.renewals += 1
        if self.renewals == 1:  # claims from the next: workers started together see each other
            return set()
        try:
            keys = await kv.keys()
        except NoKeysError:
            keys = []
        self.workers = max(1, sum(1 for k in keys if k.startswith("w.")))
        target = math.ceil(self.shards / self.workers)
        for s, rev in list(self.held.items()):
            try:
                self.held[s] = await kv.update(f"s.{s}", me, last=rev)
            except (KeyWrongLastSequenceError, KeyNotFoundError):
                log.warning("worker %s lost shard %d (its lease expired)", self.worker, s)
                del self.held[s]
        for s in sorted(self.held, key=self.order.index, reverse=True):
            if len(self.held) <= target:
                break
            rev = self.held.pop(s)
            with contextlib.suppress(KeyWrongLastSequenceError, KeyNotFoundError):
                await kv.delete(f"s.{s}", last=rev)
        for s in self.order:
            if len(self.held) >= target:
                break
            if s in self.held:
                continue
            try:
                self.held[s] = await kv.create(f"s.{s}", me)
            except KeyWrongLastSequenceError:
                continue  # another worker's
        return set(self.held)

    async def release(self) -> None:
        for s, rev in list(self.held.items()):
            with contextlib.suppress(Exception):
                await self.kv.delete(f"s.{s}", last=rev)
        self.held.clear()
        with contextlib.suppress(Exception):
            await self.kv.delete(f"w.{self.worker}")
