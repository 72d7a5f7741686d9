"""NICE's invariants over the PACKET_INs the proxy relays (pazzd.packetins), stored as
intent findings. Config: `intents.packet_ins` (on by default, with the proxy)."""

from __future__ import annotations

import logging
import sqlite3
import time

import ofwire as of

from ..findings import IntentFindings
from ..packetins import PacketInWatch
from .base import Check

log = logging.getLogger("pazzd.packetins")

PACKET_IN_RATE = 200.0  # PACKET_INs judged per second at most (each is a model trace)


class PacketInCheck(Check):
    name = "packet_ins"

    @classmethod
    def enabled(cls, cfg, svc) -> bool:
        return svc.proxy is not None and cfg.intents.packet_ins

    def start(self, svc) -> None:
        self.svc = svc
        cfg = svc.cfg
        self.watch = PacketInWatch(
            svc.model,
            svc.topology,
            forgotten_after=cfg.intents.forgotten_after,
            resolve_after=cfg.intents.resolve_after,
        )
        self.findings = IntentFindings(svc.sink, svc.topology)
        self._second = [0.0, 0]  # [start of the current second, judged in it]
        svc.proxy.hooks.packet_in.append(self.packet_in)
        svc.proxy.hooks.release.append(self.watch.released)

    def packet_in(self, dpid: int, msg: bytes) -> None:
        sec, now = self._second, time.monotonic()
        if now - sec[0] >= 1.0:
            sec[0], sec[1] = now, 0
        if sec[1] >= PACKET_IN_RATE:
            return  # a storm: judge a sample, at most PACKET_IN_RATE a second
        sec[1] += 1
        try:
            buffer_id, in_port, frame = of.parse_packet_in(msg)
        except of.ProtocolError:
            self.watch.unparsed += 1
            return
        self.watch.packet_in(dpid, buffer_id, in_port, frame)

    def on_commit(self, dpid: int, changes: list) -> None:
        self.watch.committed(dpid)  # paths through dpid settle from now

    def tick(self, now: float) -> None:
        w = self.watch
        try:
            for o in w.tick():
                if o.stored:
                    self.findings.resolve_key(o.key)
            if not self.svc.startup.settled:
                return  # the install is half done: what the controller is asked says nothing
            for o in w.open.values():
                if not o.stored:
                    self.findings.occurrence(o)
                    o.stored = True
        except (sqlite3.Error, OSError) as e:
            log.error("packet-in findings not stored (%s); retrying", e)

    def reload(self, cfg, old) -> None:
        self.watch.forgotten_after = cfg.intents.forgotten_after
        self.watch.resolve_after = cfg.intents.resolve_after
