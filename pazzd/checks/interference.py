"""Interference between controller applications (pazzd.interference): entries of two
applications that meet, and one application's writes to another's entries. Config: the
`apps` section ([] leaves it off); `apps[].may_overwrite` allows overwrites per pair."""

from __future__ import annotations

import logging
import sqlite3
import time

from cpc.interference import Apps, InterferenceChecker

from ..interference import InterferenceFindings
from .base import Check

log = logging.getLogger("pazzd.interference")


class InterferenceCheck(Check):
    name = "interference"

    @classmethod
    def enabled(cls, cfg, svc) -> bool:
        return bool(cfg.apps)

    def start(self, svc) -> None:
        self.svc = svc
        cfg = svc.cfg
        checker = InterferenceChecker(svc.model, Apps(cfg.apps))
        self.findings = InterferenceFindings(svc.sink, svc.topology, checker, svc.model)
        self.findings.allowed = set(cfg.overwrite_allowed)
        self.synced = False
        self.unsynced = self.rescan = False
        t0 = time.monotonic()
        checker.scan()
        log.info(
            "interference: %d apps, %d findings open, scanned in %.2f s",
            len(cfg.apps),
            len(checker.findings),
            time.monotonic() - t0,
        )
        self.tick(svc.clock())

    def on_update(self, upd) -> None:
        try:
            self.findings.checker.on_update(upd)
        except Exception:
            self.rescan = True
            log.exception("interference check failed on model version %d", upd.version)
        self.unsynced = True  # stored on the tick: a trial's findings come and go before it

    def on_commit(self, dpid: int, changes: list) -> None:
        if not self.svc.startup.settled:
            return  # the controller's first install: writes over entries left from before
        try:
            self.findings.committed(dpid, changes)
        except (sqlite3.Error, OSError) as e:
            log.error("overwrite findings not stored: %s", e)

    def tick(self, now: float) -> None:
        if not self.svc.startup.settled or not (self.unsynced or not self.synced):
            return
        try:
            if self.rescan:  # the checker failed mid-update: start it afresh
                self.rescan = False
                self.findings.checker.scan()
                self.synced = False
            if self.synced:
                self.findings.apply()
            else:
                self.findings.sync()
                self.synced = True
            self.unsynced = False
        except (sqlite3.Error, OSError) as e:
            self.synced = False  # stored again from the checker's findings
            log.error("interference findings not stored (%s); retrying", e)

    def reload(self, cfg, old) -> None:
        """A changed apps section: every entry's owner is worked out again and every pair
        judged again (a full scan); findings between entries that are no longer of two
        owners resolve."""
        self.findings.allowed = set(cfg.overwrite_allowed)
        if cfg.apps == old.apps:
            return
        self.findings.checker.apps = Apps(cfg.apps)
        self.rescan = self.unsynced = True
        t0 = time.monotonic()
        self.tick(time.time())
        log.info(
            "interference: apps changed (%d apps): %d findings open, rescanned in %.2f s",
            len(cfg.apps),
            len(self.findings.checker.findings),
            time.monotonic() - t0,
        )

    def state(self) -> dict:
        return {"interference": self.findings.open_counts()}
