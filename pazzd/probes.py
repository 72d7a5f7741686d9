"""Probe and watch: the one path by which every check confirms something in the data plane.

A check hands the service a job: a few probes, each a header sent from an ingress with the
exits the model predicts for it (none: the model drops it). The service

1. waits until the tester judges reports of every probe's header again: a model update
   holds back the reports of the headers it touched for `tester.settle` seconds
   (tester.timers.TransientGuard), and a probe sent inside that hold would never be judged;
2. has the fuzzer send `copies` copies of each (a share of each probe batch) and watches
   every report of the header at an exit (tester.engine.watches) that carries the probe's
   ingress in its Verify_Port Bloom filter: the same header from another ingress (a host,
   or late copies of another job) is not the probe's;
3. gives each probe a fate when the round's window closes, GRACE seconds after the fuzzer
   sent the round's last copy (the copies of every job share one confirmation budget):

   expected   reported only where the model says, with the tags it allows; or, for a probe
              the model drops, no report at all while reports reached the tester
   elsewhere  a report at another exit or with other tags
   dropped    the model forwards it, it never arrived, also after RETRIES more rounds,
              while reports reached the tester
   unseen     nothing could be judged: its reports were held back, or no report of anything
              reached the tester during its rounds

   A probe with no judged report is sent again (another round, after any new hold) before
   it is called dropped or unseen: at most 1 + RETRIES rounds per probe.

The verdict of a job is one rule for every check:

   differs    a probe went elsewhere or was dropped
   agrees     every probe's fate is expected (each forwarded probe seen where the model says)
   unseen     otherwise: something could not be judged, and nothing contradicted the model

A job decides early when a report contradicts the model, or when every probe is forwarded
by the model and has been seen where it says.
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from cpc.results import Port
from cpc.tags import port_bits
from tester.engine import watch_key

__all__ = ["RETRIES", "Job", "Probe", "ProbeService", "verdict_of"]

log = logging.getLogger("pazzd.probes")

MAX_COPIES = 2000
MAX_REPORTS = 32  # kept per probe
RETRIES = 1  # extra rounds for a probe with no judged report
GRACE = 10.0  # seconds after a round's copies are due out, for their reports
HOLD_WAIT = 120.0  # a job whose headers stay held longer than this is unseen
QUEUE_WAIT = 300.0  # a round whose copies the fuzzer has not sent by then closes anyway

EXPECTED, ELSEWHERE, DROPPED, UNSEEN = "expected", "elsewhere", "dropped", "unseen"
AGREES, DIFFERS = "agrees", "differs"


@dataclass(frozen=True)
class Probe:
    """One header to send from ingress; exits: where the model says it leaves."""

    label: str
    ingress: Port
    header: dict
    exits: frozenset = frozenset()
    about: object = field(default=None, compare=False)  # what the check probes it for


@dataclass
class Watched:
    probe: Probe
    key: tuple
    reports: list = field(default_factory=list)  # judged: {egress, tags, allowed, time}
    held: int = 0  # reports not judged (held back) in this round
    rounds: int = 0
    fate: str | None = None
    round_held: int = 0
    queued: object = None  # the fuzzer's queued item of the round: [ingress, header, left]
    ingress_bits: int = 0  # Verify_Port bits every report of this probe carries

    def seen_right(self, port_name) -> bool:
        names = {port_name(e) for e in self.probe.exits}
        return bool(self.reports) and all(
            r["allowed"] and r["egress"] in names for r in self.reports
        )

    def contradicted(self, port_name) -> bool:
        names = {port_name(e) for e in self.probe.exits}
        return any(not r["allowed"] or r["egress"] not in names for r in self.reports)


@dataclass
class Job:
    id: int
    probes: list[Watched]
    on_done: Callable[[Job], None]
    copies: int
    started: float
    due: float = 0.0  # when the waiting probes may go out (0: now)
    deadline: float = 0.0  # end of the round in flight (0: none in flight)
    waiting: list[Watched] = field(default_factory=list)  # probes to send next round
    in_flight: list[Watched] = field(default_factory=list)
    reports_at_send: int = 0
    sent_at: float = 0.0
    evidence_at: float | None = None  # every forwarded probe seen where the model says
    verdict: str | None = None
    ready: bool = False  # decided by its reports: finished on the next tick

    def fates(self) -> list[str]:
        return [w.fate for w in self.probes]


def verdict_of(fates: list[str]) -> str:
    if any(f in (ELSEWHERE, DROPPED) for f in fates):
        return DIFFERS
    if fates and all(f == EXPECTED for f in fates):
        return AGREES
    return UNSEEN


class ProbeService:
    """tester: its `watches`, `guard` and `stats.reports`; fuzzer: `confirm()` and
    `ingresses`; model: `classify()`. copies: per probe and round (3N at sampling 1/N:
    the header shows at an exit with probability about 95 %)."""

    def __init__(
        self,
        tester,
        fuzzer,
        model,
        topo,
        *,
        sampling_rate: int,
        probe_rate: float,
        share: float,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.tester = tester
        self.fuzzer = fuzzer
        self.model = model
        self.topo = topo
        self.clock = clock
        self.copies = min(MAX_COPIES, 3 * max(1, sampling_rate))
        self.rate = max(probe_rate * share, 1.0)  # confirmation copies per second, at most
        self.jobs: dict[int, Job] = {}
        self._by_key: dict[tuple, list[tuple[Job, Watched]]] = {}
        self._ids = itertools.count(1)
        self.rounds_sent = 0
        self.retried = 0
        self.foreign = 0  # reports of a watched header that did not come from the probe

    # --- for the checks ----------------------------------------------------------------------
    def ingresses(self) -> list[Port]:
        """The ingresses the fuzzer sends from."""
        return self.fuzzer.ingresses

    def watched(self) -> list[tuple]:
        """The watch keys in use: a new probe should differ from them (tester.WATCH_FIELDS)."""
        return list(self._by_key)

    def window(self, n_probes: int = 1) -> float:
        """Seconds one round of n probes takes, reports included."""
        return n_probes * self.copies / self.rate + GRACE

    def start(self, probes: list[Probe], on_done: Callable[[Job], None]):
        """Watch and send these probes; on_done(job) once every probe has a fate (job.verdict
        set). None when the fuzzer sends from none of their ingresses."""
        ok = [p for p in probes if p.ingress in set(self.ingresses())]
        if not ok:
            return None
        now = self.clock()
        job = Job(next(self._ids), [], on_done, self.copies, now)
        for p in ok:
            w = Watched(p, watch_key(p.header), ingress_bits=port_bits(*p.ingress))
            job.probes.append(w)
            job.waiting.append(w)
            self._by_key.setdefault(w.key, []).append((job, w))
            self.tester.watches[w.key] = self._report
        self.jobs[job.id] = job
        self._try_send(job, now)
        return job

    def cancel(self, job: Job) -> None:
        """Stop watching (copies already queued still go out)."""
        self.jobs.pop(job.id, None)
        for w in job.probes:
            rest = [x for x in self._by_key.get(w.key, ()) if x[1] is not w]
            if rest:
                self._by_key[w.key] = rest
            else:
                self._by_key.pop(w.key, None)
                self.tester.watches.pop(w.key, None)

    def tick(self) -> None:
        now = self.clock()
        for job in list(self.jobs.values()):
            if job.ready:
                self._decide(job)
                continue
            if job.deadline and now >= job.deadline:
                if self._queued(job) and now < job.sent_at + QUEUE_WAIT:
                    # The fuzzer still has copies of this round to send (other jobs'
                    # copies share its confirmation budget): the window starts again.
                    job.deadline = now + GRACE
                else:
                    self._close_round(job, now)
            if job.waiting and not job.in_flight:
                self._try_send(job, now)
            if job.id in self.jobs and not job.waiting and not job.in_flight:
                self._finish(job)

    def pending(self) -> int:
        return len(self.jobs)

    # --- rounds -----------------------------------------------------------------------------
    def _held_until(self, hdr: dict) -> float:
        guard = getattr(self.tester, "guard", None)
        if guard is None:
            return 0.0
        return guard.held_until(self.model.classify(hdr), hdr)

    def _try_send(self, job: Job, now: float) -> None:
        until = max(self._held_until(w.probe.header) for w in job.waiting)
        if until > now:
            if now - job.started > HOLD_WAIT:  # held all along: nothing can be judged
                for w in job.waiting:
                    w.fate = UNSEEN
                job.waiting = []
            return
        sent = []
        for w in job.waiting:
            w.rounds += 1
            w.round_held = 0
            w.queued = self.fuzzer.confirm(w.probe.ingress, w.probe.header, self.copies)
            if w.queued:
                sent.append(w)
            else:
                w.fate = UNSEEN
        job.waiting = []
        if not sent:
            return
        self.rounds_sent += 1
        job.in_flight = sent
        job.reports_at_send = self.tester.stats.reports
        job.sent_at = now
        job.deadline = now + self.window(len(sent))

    @staticmethod
    def _queued(job: Job) -> bool:
        """Whether copies of the round in flight wait in the fuzzer's queue still."""
        return any(isinstance(w.queued, list) and w.queued[2] > 0 for w in job.in_flight)

    def _close_round(self, job: Job, now: float) -> None:
        observed = self.tester.stats.reports > job.reports_at_send
        name = self.topo.port_name
        for w in job.in_flight:
            if w.fate is not None:
                continue
            if w.contradicted(name):
                w.fate = ELSEWHERE
            elif w.reports:
                w.fate = EXPECTED
            elif w.round_held == 0 and observed and not w.probe.exits:
                w.fate = EXPECTED  # dropped, as the model says
            elif w.rounds <= RETRIES:
                job.waiting.append(w)  # nothing judged yet: another round
                self.retried += 1
            elif w.round_held or not observed:
                w.fate = UNSEEN
            else:
                w.fate = DROPPED
        job.in_flight = []
        job.deadline = 0.0

    def _finish(self, job: Job) -> None:
        self.cancel(job)
        job.verdict = verdict_of(job.fates())
        try:
            job.on_done(job)
        except Exception:
            log.exception("a probe job's verdict was not taken")

    # --- reports ----------------------------------------------------------------------------
    def _report(self, egress, hdr, vport, vrule, allowed, now) -> None:
        name = self.topo.port_name
        for job, w in list(self._by_key.get(watch_key(hdr), ())):
            if vport & w.ingress_bits != w.ingress_bits:
                # Not from this probe's ingress (its Bloom bits are missing): the same
                # header sent elsewhere, by a host or another job whose copies were late.
                self.foreign += 1
                continue
            if allowed is None:
                w.held += 1
                w.round_held += 1
                continue
            if len(w.reports) < MAX_REPORTS:
                w.reports.append(
                    {
                        "egress": name(egress),
                        "verify_port": f"0x{vport:08x}",
                        "verify_rule": f"0x{vrule:04x}",
                        "allowed": allowed,
                        "time": now,
                    }
                )
            self._early(job, now)

    def _early(self, job: Job, now: float) -> None:
        """Mark a job to decide on the next tick (the reports of the same datagrams are all
        in by then) when a report contradicts the model, or when every probe is one the
        model forwards and each was seen where it says."""
        name = self.topo.port_name
        if job.evidence_at is None and all(w.seen_right(name) for w in job.probes if w.probe.exits):
            job.evidence_at = now
        if any(w.contradicted(name) for w in job.probes) or all(
            w.probe.exits and w.seen_right(name) for w in job.probes
        ):
            job.ready = True

    def _decide(self, job: Job) -> None:
        """The early verdict: fates from the reports so far (a probe without any keeps
        none: it cannot turn a differs, and an agrees needs every probe seen)."""
        name = self.topo.port_name
        for w in job.probes:
            if w.fate is None:
                if w.contradicted(name):
                    w.fate = ELSEWHERE
                elif w.reports:
                    w.fate = EXPECTED
                else:
                    w.fate = UNSEEN
        job.waiting, job.in_flight, job.deadline = [], [], 0.0
        self._finish(job)


def probes_json(topo, job: Job) -> list[dict]:
    """Each probe, its exits, reports and fate, as the findings' confirmation records it."""
    name = topo.port_name
    return [
        {
            "probe": w.probe.label,
            "ingress": name(w.probe.ingress),
            "expected_exits": sorted(name(e) for e in w.probe.exits),
            "reports": w.reports,
            "held": w.held,
            "rounds": w.rounds,
            "fate": w.fate,
        }
        for w in job.probes
    ]
