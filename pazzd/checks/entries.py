"""Each entry a switch accepted, confirmed in the data plane (pazzd.entries). Config: the
`agents` section (`agents.confirm`, on by default; needs the proxy and the fuzzer with an
in-process tester)."""

from __future__ import annotations

import logging
import sqlite3

from ..entries import EntryConfirmations
from .base import Check

log = logging.getLogger("pazzd.entries")


class EntryCheck(Check):
    name = "agents"

    @classmethod
    def enabled(cls, cfg, svc) -> bool:
        return cfg.agents.confirm and svc.probes is not None and svc.proxy is not None

    def start(self, svc) -> None:
        cfg = svc.cfg
        self.svc = svc
        self.entries = EntryConfirmations(
            svc.model,
            svc.probes,
            svc.sink,
            svc.topology,
            # After the tester's hold of the changed headers (tester.settle, the time the
            # switches take to apply a change to the packets in flight) and agents.delay more:
            # the probe service also waits for a hold a later update starts.
            delay=cfg.tester.settle + cfg.agents.delay,
            probes_per_entry=cfg.agents.probes_per_entry,
            max_pending=cfg.agents.max_pending,
        )

    def on_commit(self, dpid: int, changes: list) -> None:
        try:
            self.entries.committed(dpid, changes)
        except (sqlite3.Error, OSError) as e:
            log.error("entry confirmation: %s", e)

    def tick(self, now: float) -> None:
        self.entries.tick()

    def reload(self, cfg, old) -> None:
        ec = self.entries
        ec.delay = cfg.tester.settle + cfg.agents.delay
        ec.n, ec.max_pending = cfg.agents.probes_per_entry, cfg.agents.max_pending

    def state(self) -> dict:
        return {"agents": self.entries.state()}
