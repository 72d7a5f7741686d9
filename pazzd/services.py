"""What the daemon hands every check: its parts (Services), the start-up gate and the one
path by which findings are stored, logged, confirmed and counted (FindingSink)."""

from __future__ import annotations

import collections
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["FindingSink", "Services", "Startup"]

log = logging.getLogger("pazzd.findings")


@dataclass
class Startup:
    """The controller's first full install: until it is done, the intended state is half
    installed and findings about it say nothing (a reach policy broken because the routes
    are not all there yet). It is done at once without a controller (rules from a file);
    with one, once the controller is connected and `quiet` seconds passed without a
    committed change, or `limit` seconds after the start, whichever comes first."""

    started: float
    needs_controller: bool
    quiet: float = 2.0
    limit: float = 30.0  # a controller with steady churn from the start: open findings anyway
    last_change: float | None = None
    connected_at: float | None = None
    settled_at: float | None = None

    def __post_init__(self) -> None:
        if not self.needs_controller:
            self.settled_at = self.started

    @property
    def settled(self) -> bool:
        return self.settled_at is not None

    def committed(self, now: float) -> None:
        self.last_change = now

    def check(self, now: float, controller_connected: bool) -> bool:
        """True once, when the start-up ends now."""
        if self.settled:
            return False
        if controller_connected and self.connected_at is None:
            self.connected_at = now
        quiet_since = max(x for x in (self.connected_at, self.last_change, -1.0) if x is not None)
        if (self.connected_at is not None and now - quiet_since >= self.quiet) or (
            now - self.started >= self.limit
        ):
            self.settled_at = now
            log.info("start-up done: findings are opened from now on")
            return True
        return False


class FindingSink:
    """Every check's findings go through here: stored first (store: pazzd.findstore's
    FindingStore), then logged, then confirmed in the data plane (the finding's probes,
    through pazzd.confirm), then counted (pazz_findings_opened_total)."""

    def __init__(self, store, clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self.clock = clock
        self.confirmations = None  # pazzd.confirm.Confirmations, when probes can be sent
        self.opened: collections.Counter[str] = collections.Counter()

    def open(
        self,
        record,
        *,
        probes: list | None = None,
        extra: dict | None = None,
        log_text: str | None = None,
        level: int = logging.WARNING,
    ) -> tuple[int, bool]:
        """Store a finding (a pazzd.records record; or refresh an open one): (id, whether
        it is new). A new one is logged and its probes (pazzd.probes.Probe) are sent."""
        fid, new = self.store.open_finding(record, self.clock())
        if new:
            log.log(level, "%s finding #%d %s", record.kind, fid, log_text or record.summary)
            if probes and self.confirmations is not None:
                self.confirmations.start_probes(fid, probes, extra)
            self.opened[record.kind] += 1
        return fid, new

    def resolve(self, kind: str, key: str) -> int | None:
        """Resolve the open finding (kind, key); its id, or None when none was open."""
        fid = self.store.resolve_finding(kind, key, self.clock())
        if fid is not None:
            log.info("%s finding #%d resolved: %s", kind, fid, key)
            if self.confirmations is not None:
                self.confirmations.cancel(fid)
        return fid


@dataclass
class Services:
    """The daemon's parts, as the checks see them. fuzzer, proxy and probes are None when
    off (no fuzzing, rules from a file, tester workers in other processes)."""

    cfg: object  # pazzd.config.Config in force (replaced on reload)
    model: object
    store: object  # the tester's fault store (tester.store)
    findings: object  # the findings store (pazzd.findstore)
    tester: object
    topology: object
    sink: FindingSink
    startup: Startup
    changes: object  # pazzd.localize.ChangeLog
    metrics: object  # pazzd.metrics.Metrics
    fuzzer: object = None
    proxy: object = None
    probes: object = None  # pazzd.probes.ProbeService
    clock: Callable[[], float] = time.time
