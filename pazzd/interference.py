"""Interference findings (cpc.interference) in the fault store: stored, then logged.

Each finding is a row of the findings table, kind "interference", keyed by the two entries;
its detail is the finding's JSON (the two entries with their owners, the relation, the
witness header and in_port, the entry the model picks for it), what the API serves and
`pazzctl interference` prints.
"""

from __future__ import annotations

import logging
import time

from cpc.interference import RELATIONS, Finding, InterferenceChecker
from pazzd.findings import header_text
from tester.store import OPEN, FaultStore

__all__ = ["INTERFERENCE", "InterferenceFindings"]

log = logging.getLogger("pazzd.interference")
INTERFERENCE = "interference"


def finding_json(topo, f: Finding) -> dict:
    out = f.to_json()
    out["switch"] = topo.switches[f.dpid].name if f.dpid in topo.switches else str(f.dpid)
    out["witness_text"] = header_text(f.witness)
    return out


class InterferenceFindings:
    """Keeps the findings table in step with an InterferenceChecker."""

    def __init__(self, store: FaultStore, topo, checker: InterferenceChecker) -> None:
        self.store = store
        self.topo = topo
        self.checker = checker
        # on_new(finding_id, Finding) after a new finding is stored (the daemon probes it)
        self.on_new = None

    def sync(self) -> int:
        """After a full scan: open what is open now, resolve what a previous run left open.
        Returns the number opened."""
        self.checker.drain()
        now = time.time()
        n = self._open(self.checker.findings.values(), now)
        for key, fid in self.store.open_finding_keys(INTERFERENCE).items():
            if key not in self.checker.findings:
                self.store.resolve_finding(INTERFERENCE, key, now)
                log.info("interference finding #%d resolved: %s", fid, key)
        return n

    def apply(self) -> int:
        """Store what the checker opened and resolved since the last call."""
        opened, resolved = self.checker.drain()
        now = time.time()
        n = self._open(opened, now)
        for key in resolved:
            fid = self.store.resolve_finding(INTERFERENCE, key, now)
            if fid is not None:
                log.info("interference finding #%d resolved: %s", fid, key)
        return n

    def _open(self, findings, now: float) -> int:
        n = 0
        for f in findings:
            fid, fresh = self.store.open_finding(
                INTERFERENCE,
                f.key,
                f.apps,
                f.severity,
                f.summary(),
                finding_json(self.topo, f),
                now,
            )
            if fresh:
                n += 1
                if self.on_new is not None:
                    self.on_new(fid, f)
                log.log(
                    logging.INFO if f.severity == "info" else logging.WARNING,
                    "interference finding #%d %s; witness %s",
                    fid,
                    f.summary(),
                    header_text(f.witness),
                )
        return n

    def open_counts(self) -> dict[tuple[str, str], int]:
        """Open findings per (apps, relation), every pair of owners and relation present (a
        bounded label set: the configured apps and unknown)."""
        names = sorted(self.checker.apps.names)
        out = {
            (",".join((a, b)), r): 0
            for i, a in enumerate(names)
            for b in names[i + 1 :]
            for r in RELATIONS
        }
        for row in self.store.findings(INTERFERENCE, OPEN):
            rel = (row.detail or {}).get("relation")
            if (row.name, rel) in out:
                out[(row.name, rel)] += 1
        return out
