"""Intent checks (cpc.intents) with the guard that enforces them (pazzd.guard).

Config: the `intents` section. Every model update is checked; the findings table follows
on the next tick (violations that open and close within one tick are never stored). Until
the controller's first full install is done (services.Startup), nothing is stored: the
findings of that moment are then opened at once, with cause "start-up".
"""

from __future__ import annotations

import logging
import sqlite3
import time

import ofwire as of
from cpc.intents import IntentChecker
from cpc.ofctl import format_match
from cpc.rules import ModelError

from ..findings import IntentFindings
from ..guard import IntentGuard
from ..proxy.feed import Batch
from ..proxy.table import GroupChange
from .base import Check

log = logging.getLogger("pazzd.intents")


def cause_json(topo, cause) -> dict:
    """What made a model update, as a finding records it: the proxy's batch, an API call."""
    if isinstance(cause, dict):
        return cause
    if not isinstance(cause, Batch):
        return {"source": "model update"}
    entries = []
    for ch in cause.changes[:8]:
        if isinstance(ch, GroupChange):
            entries.append({"change": "group", "group_id": ch.group_id})
            continue
        try:
            match = format_match(of.cpc_match(ch.entry.mkey))
        except (ModelError, of.ProtocolError):
            match = "(not modelled)"
        e = ch.entry
        entries.append(
            {
                "change": ch.kind,
                "table": e.table,
                "priority": e.priority,
                "cookie": f"0x{e.cookie:x}",
                "match": match,
            }
        )
    return {
        "source": "controller",
        "switch": topo.switches[cause.dpid].name,
        "xids": list(cause.xids[:16]),
        "changes": len(cause.changes),
        "entries": entries,
    }


def enforced(cfg) -> set[str]:
    """The names of the policies in force with enforce: true."""
    return {p.name for p in cfg.intents.policies if p.enforce}


class IntentsCheck(Check):
    name = "intents"

    def start(self, svc) -> None:
        self.svc = svc
        cfg = svc.cfg
        self.checker = IntentChecker(svc.model, cfg.intents.policies)
        self.findings = IntentFindings(svc.sink, svc.topology)
        self.causes: dict[str, dict] = {}  # violation key -> what opened it
        self.synced = False  # the findings table follows the checker (after the start-up)
        self.unsynced = False  # the checker changed since the table was last brought in step
        t0 = time.monotonic()
        self.checker.check_all()
        log.info(
            "intents: %d policies checked in %.2f s, %d violations open",
            len(cfg.intents.policies),
            time.monotonic() - t0,
            len(self.checker.open),
        )
        pending = svc.proxy.pending_flowmods if svc.proxy is not None else list
        self.guard = IntentGuard(svc.model, lambda: enforced(svc.cfg), pending)
        if svc.proxy is not None:
            svc.proxy.hooks.guards.append(self.guard.for_proxy)
            svc.proxy.hooks.batches.append(self.guard.batch)
        self.tick(svc.clock())

    def on_update(self, upd) -> None:
        try:
            ch = self.checker.on_update(upd)
        except Exception:
            log.exception("intent checks failed on model version %d", upd.version)
            return
        if upd.trial:  # the guard's trial: judged, not stored
            self.guard.collect(ch)
            return
        if ch.opened or ch.resolved or ch.changed:
            if ch.opened:
                cause = cause_json(self.svc.topology, upd.cause)
                for v in ch.opened:
                    self.causes.setdefault(v.key, cause)
            self.unsynced = True

    def tick(self, now: float) -> None:
        try:
            if not self.synced:
                if self.svc.startup.settled:
                    self.findings.sync(self.checker.open, {"source": "start-up"})
                    self.synced, self.unsynced = True, False
                    self.causes.clear()
            elif self.unsynced:
                self.findings.reconcile(self.checker.open, self.causes)
                self.unsynced = False
        except (sqlite3.Error, OSError) as e:
            log.error("intent findings not stored (%s); retrying", e)

    def reload(self, cfg, old) -> None:
        if cfg.intents.policies == old.intents.policies:
            return
        self.checker.set_policies(cfg.intents.policies)
        self.checker.check_all()
        if self.synced:
            try:
                self.findings.sync(self.checker.open, {"source": "config reload"})
                self.unsynced = False
            except (sqlite3.Error, OSError) as e:
                self.unsynced = True
                log.error("intent findings not stored (%s); retrying", e)
        log.info("intents: %d policies in force", len(cfg.intents.policies))

    def state(self) -> dict:
        return {"intents": self.findings.open_by_policy(self.svc.cfg.intents.policies)}
