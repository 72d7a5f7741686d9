"""Confirm a finding in the data plane: probe its witness and record the verdict.

A finding about the intended state (an intent violation, an interference between two
applications' entries) is a claim about what the rules do. Its witness header goes out from
its ingress (and, for a reply policy, the reply from the egress) through the probe service
(pazzd.probes), which waits out the tester's hold-back of the header, watches every report
of it and gives the one verdict rule of every check: agrees, differs or unseen. The
finding's confirmation records the verdict with each probe's reports and fate.
"""

from __future__ import annotations

import logging

from .probes import AGREES, DIFFERS, Job, Probe, ProbeService, probes_json

__all__ = ["Confirmations"]

log = logging.getLogger("pazzd.confirm")


class Confirmations:
    """store: the findings store (set_confirmation); probes: the probe service."""

    def __init__(self, store, probes: ProbeService) -> None:
        self.store = store
        self.probes = probes
        self.pending: dict[int, Job] = {}

    def start_probes(self, finding_id: int, probes: list[Probe], extra: dict | None = None) -> bool:
        """Probe headers for a finding; extra goes into the verdict. False when no ingress
        is fuzzed."""
        old = self.pending.pop(finding_id, None)
        if old is not None:
            self.probes.cancel(old)
        extra = dict(extra or {})
        job = self.probes.start(probes, lambda j: self._done(finding_id, j, extra))
        if job is None:
            return False
        self.pending[finding_id] = job
        self.store.set_confirmation(
            finding_id,
            {"verdict": "probing", "copies": self.probes.copies, "probes": len(job.probes)},
        )
        return True

    def cancel(self, finding_id: int) -> None:
        job = self.pending.pop(finding_id, None)
        if job is not None:
            self.probes.cancel(job)

    def _done(self, fid: int, job: Job, extra: dict) -> None:
        self.pending.pop(fid, None)
        out = {
            "verdict": job.verdict,
            "copies": job.copies,
            "probes": probes_json(self.probes.topo, job),
            **extra,
        }
        if "model_winner" in extra:  # an interference finding: whom the data plane obeyed
            out["obeyed"] = {
                AGREES: extra["model_winner"],
                DIFFERS: "not " + extra["model_winner"],
            }.get(job.verdict, "unseen")
        try:
            self.store.set_confirmation(fid, out)
        except Exception as e:  # the store logs and counts its own failures
            log.error("finding #%d: confirmation not stored: %s", fid, e)
            return
        log.log(
            logging.WARNING if job.verdict == DIFFERS else logging.INFO,
            "finding #%d: data plane %s",
            fid,
            job.verdict,
        )
