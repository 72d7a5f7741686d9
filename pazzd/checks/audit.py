"""The proxy's audit of each switch's table against the intended entries, as faults of kind
"audit" (pazzd.audit). Config: `controller.audit_interval` and `audit_delay` (the proxy)."""

from __future__ import annotations

import logging
import sqlite3
import time

from ..audit import AUDIT, AuditFaults
from .base import Check

log = logging.getLogger("pazzd")


class AuditCheck(Check):
    name = "audit"

    @classmethod
    def enabled(cls, cfg, svc) -> bool:
        return svc.proxy is not None

    def start(self, svc) -> None:
        self.svc = svc
        names = {d: s.name for d, s in svc.topology.switches.items()}
        self.faults = AuditFaults(svc.store, names)
        self.store_errors = 0
        svc.proxy.on_audit = self.round

    def round(self, dpid: int, findings) -> None:
        """One completed audit of a switch: store its findings as faults, then report.
        When the store fails, the next audit finds them again (nothing is reported now)."""
        try:
            events = self.faults.round(dpid, findings, time.time())
        except (sqlite3.Error, OSError) as e:
            self.store_errors += 1
            log.error(
                "audit of dpid:%d not stored (fault store: %s); the next audit retries", dpid, e
            )
            return
        for ev in events:
            f = ev.finding
            if ev.what == "new":
                self.svc.metrics.faults_detected.labels(AUDIT).inc()
                log.warning("fault #%d audit at dpid:%d: %s", ev.fault_id, dpid, f)
            elif ev.what == "merged":
                log.warning("fault #%d: the audit sees its entry too: %s", ev.fault_id, f)
            elif ev.what == "merged_away":
                log.info("fault #%d resolved: audit, merged into fault #%d", ev.fault_id, ev.into)
            else:
                log.info("fault #%d resolved: audit at dpid:%d", ev.fault_id, dpid)

    def reload(self, cfg, old) -> None:
        audit = (cfg.controller.audit_interval, cfg.controller.audit_delay)
        if audit != (old.controller.audit_interval, old.controller.audit_delay):
            self.svc.proxy.set_audit(*audit)  # the new period starts now

    def state(self) -> dict:
        return {"audit_store_errors": self.store_errors}
