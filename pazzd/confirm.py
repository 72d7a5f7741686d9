"""Confirm a finding in the data plane: probe its witness, record what the exits report.

A finding about the intended state (pazzd.findings) is a claim about what the rules do.
The fuzzer sends the finding's witness header from its ingress (and, for a reply policy,
the reply from the egress) in enough copies that sFlow sampling 1/N shows it at an exit
with probability about 95 % (3N copies), and the tester calls back for every report of
that header. When the window closes, the finding records the verdict:

  agrees     every report came with tags the model allows, at an exit the model predicts;
             and where the model predicts no exit (a loop, a blackhole), none reported it
  differs    a report at an exit the model does not predict, or with other tags: the data
             plane does not do what the model says (the tester opens a data-plane fault too)
  unseen     the model predicts an exit and no report arrived (sampling, or the data plane
             drops it: the tester's blackhole watch covers critical flows)
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

from cpc.intents import Violation
from cpc.topology import Topology

from .probewatch import ProbeWatch

__all__ = ["Confirmations", "exits"]

log = logging.getLogger("pazzd.confirm")


@dataclass
class _Pending:
    finding_id: int
    deadline: float
    probes: list  # [(label, ingress, header, expected exits)]
    seen: dict = field(default_factory=dict)  # label -> Watch (pazzd.probewatch)
    extra: dict = field(default_factory=dict)  # what the verdict says besides


class Confirmations:
    """store: the fault store (findings); tester: its `watches`; fuzzer: `confirm()`;
    probes: the ProbeWatch over them to share (one is made otherwise); share: the part of
    each probe batch the fuzzer gives confirmation copies (fuzzer.engine)."""

    def __init__(
        self,
        store,
        tester,
        fuzzer,
        topo: Topology,
        sampling_rate: int,
        probe_rate: float,
        clock=time.time,
        probes: ProbeWatch | None = None,
        share: float = 0.5,
    ) -> None:
        self.store = store
        self.topo = topo
        self.probes = probes or ProbeWatch(tester, fuzzer, topo, sampling_rate)
        self.copies = self.probes.copies
        self.window = self.copies / max(probe_rate * share, 1.0) + 10.0
        self.clock = clock
        self.pending: dict[int, _Pending] = {}
        self.done = 0

    def start(self, finding_id: int, v: Violation) -> bool:
        """Probe a new finding's witness; False when its ingress is not fuzzed."""
        probes = [("witness", v.ingress, v.witness, exits(v.paths))]
        if v.reply is not None and v.policy.dst is not None:
            probes.append(("reply", v.policy.dst, v.reply, exits(v.reply_paths)))
        return self.start_probes(finding_id, probes)

    def start_probes(self, finding_id: int, probes: list, extra: dict | None = None) -> bool:
        """Probe headers for a finding: probes are (label, ingress, header, the exits the
        model predicts); extra goes into the verdict. False when no ingress is fuzzed."""
        p = _Pending(finding_id, self.clock() + self.window, probes, extra=extra or {})
        for label, ing, hdr, _ in probes:
            w = self.probes.send(ing, hdr)
            if w is not None:
                p.seen[label] = w
        if not p.seen:
            return False
        self.pending[finding_id] = p
        self.store.set_confirmation(
            finding_id, {"verdict": "probing", "copies": self.copies, "until": p.deadline}
        )
        return True

    def tick(self) -> None:
        now = self.clock()
        for fid, p in list(self.pending.items()):
            if now < p.deadline:
                continue
            del self.pending[fid]
            for w in p.seen.values():
                self.probes.close(w)
            result = self._verdict(p)
            self.done += 1
            try:
                self.store.set_confirmation(fid, result)
            except Exception as e:  # the store logs and counts its own failures
                log.error("finding #%d: confirmation not stored: %s", fid, e)
                continue
            log.log(
                logging.WARNING if result["verdict"] == "differs" else logging.INFO,
                "finding #%d: data plane %s",
                fid,
                result["verdict"],
            )

    def _verdict(self, p: _Pending) -> dict:
        out = {"copies": self.copies, "probes": [], **p.extra}
        verdicts = []
        for label, ing, _hdr, exits in p.probes:
            if label not in p.seen:
                continue
            seen = p.seen[label].reports
            names = {self.topo.port_name(e) for e in exits}
            if any(not r["allowed"] or r["egress"] not in names for r in seen):
                verdict = "differs"
            elif exits and not seen:
                verdict = "unseen"
            else:
                verdict = "agrees"
            verdicts.append(verdict)
            out["probes"].append(
                {
                    "probe": label,
                    "ingress": self.topo.port_name(ing),
                    "expected_exits": sorted(names),
                    "reports": seen,
                    "verdict": verdict,
                }
            )
        for v in ("differs", "unseen", "agrees"):
            if v in verdicts:
                out["verdict"] = v
                break
        if "model_winner" in p.extra:  # an interference finding: whom the data plane obeyed
            out["obeyed"] = {
                "agrees": p.extra["model_winner"],
                "differs": "not " + p.extra["model_winner"],
            }.get(out.get("verdict"), "unseen")
        return out


def exits(paths) -> set:
    return {d.egress for d in paths if d.kind == "egress"}
