"""The NATS side of the scale-out: subjects, JetStream streams, and how every component
connects (reconnecting for ever: a restarted nats-server is found again).

Streams (file storage: what JetStream acknowledged survives a server restart):

- PAZZ_SAMPLES, `pazz.samples.<shard>`: the collectors' datagrams, a shard per sFlow
  agent; work-queue retention (a message is gone once a worker acknowledged it) and one
  durable push consumer per shard, `shard-<n>`, delivering to `pazz.deliver.shard.<n>`,
  which only the worker holding the shard's lease subscribes to.
- PAZZ_MODEL, `pazz.model.log` and `pazz.model.snapshot.{part,head}`: the primary's
  committed model updates and its snapshots; replicas catch up from the newest head.
- PAZZ_FAULTS, `pazz.faults`: the workers' reports (fault evidence, critical-flow samples,
  re-probe requests, counters, the sample sequences judged); the primary's durable
  consumer `primary` reads them; they are kept an hour, for audits.

Core NATS (nothing kept): `pazz.model.tick`, the primary's clock and model version.
"""

from __future__ import annotations

import logging
import zlib

import nats
from nats.js.api import (
    AckPolicy,
    ConsumerConfig,
    DiscardPolicy,
    RetentionPolicy,
    StorageType,
    StreamConfig,
)

__all__ = [
    "FAULTS",
    "LEASES",
    "MODEL_HEAD",
    "MODEL_LOG",
    "MODEL_PART",
    "MODEL_STREAM",
    "SAMPLES_STREAM",
    "TICK",
    "connect",
    "ensure_streams",
    "shard_of",
    "shard_subject",
]

log = logging.getLogger("pazzd.scaleout")

SAMPLES_STREAM = "PAZZ_SAMPLES"
MODEL_STREAM = "PAZZ_MODEL"
FAULTS_STREAM = "PAZZ_FAULTS"
MODEL_LOG = "pazz.model.log"
MODEL_PART = "pazz.model.snapshot.part"
MODEL_HEAD = "pazz.model.snapshot.head"
TICK = "pazz.model.tick"
FAULTS = "pazz.faults"
PRIMARY_DELIVER = "pazz.deliver.primary"  # the primary's consumer of pazz.faults pushes here
LEASES = "pazz_leases"  # the KV bucket of worker and shard leases
ACK_WAIT = 10.0  # seconds before an unacknowledged sample goes to another worker
# Messages (an agent's datagrams of a few ms each) of a shard delivered and not acknowledged
# yet: enough to keep a worker busy, few enough that a backlog never floods its connection.
MAX_IN_FLIGHT = 64
SAMPLES_MAX_BYTES = 1 << 30  # beyond this the collectors' publishes fail: they drop


def shard_subject(shard: int) -> str:
    return f"pazz.samples.{shard}"


def deliver_subject(shard: int) -> str:
    return f"pazz.deliver.shard.{shard}"


def shard_of(agent: str, shards: int) -> int:
    """An agent's shard: its datagrams stay in order on one worker (sequence numbers,
    corroboration by distinct packets)."""
    return zlib.crc32(agent.encode()) % shards


async def connect(url: str, name: str, **callbacks):
    """A connection that reconnects for ever (2 s apart) and logs what happens."""

    async def error(e):
        log.warning("%s: NATS: %s", name, e)

    async def disconnected():
        log.warning("%s: NATS connection lost; reconnecting", name)

    async def reconnected():
        log.info("%s: NATS connection back", name)

    return await nats.connect(
        url,
        name=name,
        max_reconnect_attempts=-1,
        reconnect_time_wait=2,
        allow_reconnect=True,
        error_cb=callbacks.get("error_cb", error),
        disconnected_cb=callbacks.get("disconnected_cb", disconnected),
        reconnected_cb=callbacks.get("reconnected_cb", reconnected),
        connect_timeout=2,
    )


async def ensure_streams(js, shards: int) -> None:
    """Create (or update to) the streams and the per-shard consumers. Idempotent: every
    component calls it at its start, so any may come up first."""
    await _stream(
        js,
        StreamConfig(
            name=SAMPLES_STREAM,
            subjects=["pazz.samples.*"],
            retention=RetentionPolicy.WORK_QUEUE,
            storage=StorageType.FILE,
            max_bytes=SAMPLES_MAX_BYTES,
            discard=DiscardPolicy.NEW,
        ),
    )
    await _stream(
        js,
        StreamConfig(
            name=MODEL_STREAM,
            subjects=[MODEL_LOG, MODEL_PART, MODEL_HEAD],
            retention=RetentionPolicy.LIMITS,
            storage=StorageType.FILE,
            max_bytes=4 << 30,
            discard=DiscardPolicy.OLD,
        ),
    )
    await _stream(
        js,
        StreamConfig(
            name=FAULTS_STREAM,
            subjects=[FAULTS],
            # kept an hour whoever read them: the primary's consumer, and audits
            retention=RetentionPolicy.LIMITS,
            storage=StorageType.FILE,
            max_bytes=1 << 30,
            max_age=3600.0,
        ),
    )
    for n in range(shards):
        await _consumer(
            js,
            SAMPLES_STREAM,
            ConsumerConfig(
                durable_name=f"shard-{n}",
                filter_subject=shard_subject(n),
                # pushed to a subject only the shard's lease holder subscribes to
                deliver_subject=deliver_subject(n),
                ack_policy=AckPolicy.EXPLICIT,  # a work queue's: each message its own
                ack_wait=ACK_WAIT,
                max_ack_pending=MAX_IN_FLIGHT,
            ),
        )
    await _consumer(
        js,
        FAULTS_STREAM,
        ConsumerConfig(
            durable_name="primary",
            deliver_subject=PRIMARY_DELIVER,
            ack_policy=AckPolicy.EXPLICIT,
            ack_wait=30.0,
            max_ack_pending=1024,
        ),
    )


async def _consumer(js, stream: str, cfg: ConsumerConfig) -> None:
    try:
        await js.add_consumer(stream, cfg)
    except nats.js.errors.BadRequestError:  # exists with other settings: make it ours
        await js.delete_consumer(stream, cfg.durable_name)
        await js.add_consumer(stream, cfg)


async def _stream(js, cfg: StreamConfig) -> None:
    try:
        await js.add_stream(cfg)
    except nats.js.errors.BadRequestError:  # exists with other settings: take ours
        await js.update_stream(cfg)
