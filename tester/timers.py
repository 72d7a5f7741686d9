"""Blackhole timers for critical flows, and the hold-back of reports during updates.

Blackholes. A critical flow (ingress, egress, match) raises an alarm when no
report for it arrives at its egress for

    T_alarm = max(T_cfg, k * E),   E = N_e / r

where N_e is the egress sampling rate (1 in N_e packets is sampled) and r the
flow's packet rate. E is the expected time to the next sample: with r packets
per second and probability 1/N_e each, samples arrive as a Poisson process of
rate r/N_e. The chance that a flow still delivered but no sample came within
k * E is (1 - 1/N_e)^(k N_e) ~ e^-k (k = 10: 4.5e-5 per gap). r comes from the
ordinary ingress samples of the flow at its ingress switch (each stands for
N_i packets: r = N_i / gap_i, smoothed), or, when the ingress does not sample,
from the reports' own gaps (E = smoothed report gap). A flow whose ingress
samples stop as well is idle, not blackholed: no alarm. The alarm clears with
the next report.

Transients. `TransientGuard` takes a feed of touched header classes: `begin()`
when a FlowMod is sent (in flight), `end()` when it is applied everywhere, or
`touched()` for a finished change. A report whose class is in flight or was
touched less than `settle` seconds ago is held back, not judged.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from cpc.results import Port

__all__ = ["CriticalFlow", "BlackholeAlarm", "BlackholeMonitor", "TransientGuard"]

_ALPHA = 0.2  # EWMA weight of a new gap


@dataclass(frozen=True)
class CriticalFlow:
    name: str
    ingress: Port
    egress: Port
    match: dict  # exact header fields (cpc.fields names) that identify the flow
    timeout: float = 30.0  # T_cfg: the least time without reports before an alarm
    header: dict | None = None  # a full header of the flow, to ask the model for its path

    def matches(self, header: dict) -> bool:
        return all(header.get(k) == v for k, v in self.match.items())


@dataclass
class _FlowState:
    flow: CriticalFlow
    start: float
    last_report: float | None = None
    report_gap: float | None = None
    egress_rate: int = 0
    last_ingress: float | None = None
    ingress_gap: float | None = None
    ingress_rate: int = 0
    alarmed: bool = False
    alarms: int = 0


@dataclass(frozen=True)
class BlackholeAlarm:
    flow: CriticalFlow
    since: float  # last report (or monitor start)
    now: float
    threshold: float
    expected_gap: float | None
    detail: str = field(default="")


def _ewma(old: float | None, new: float) -> float:
    return new if old is None else old + _ALPHA * (new - old)


class BlackholeMonitor:
    def __init__(self, flows: Iterable[CriticalFlow], k: float = 10.0, now: float | None = None):
        self.k = k
        start = time.monotonic() if now is None else now
        self._states = [_FlowState(f, start) for f in flows]
        self._by_egress: dict[Port, list[_FlowState]] = {}
        self._by_ingress: dict[Port, list[_FlowState]] = {}
        for st in self._states:
            self._by_egress.setdefault(st.flow.egress, []).append(st)
            self._by_ingress.setdefault(st.flow.ingress, []).append(st)

        self._hold_until = start

    @property
    def flows(self) -> list[CriticalFlow]:
        return [s.flow for s in self._states]

    def arm(self, now: float) -> None:
        """Start the silence clocks of flows without reports now (the collector is listening)."""
        for st in self._states:
            if st.last_report is None:
                st.start = now

    def hold(self, until: float) -> None:
        """No alarms before `until`: the caller was not reading datagrams for a while, so
        reports may still be queued in the socket."""
        self._hold_until = max(self._hold_until, until)

    def on_report(
        self, egress: Port, header: dict, now: float, sampling_rate: int
    ) -> list[CriticalFlow]:
        """Note a report at egress; returns the flows whose alarm this report clears."""
        recovered = []
        for st in self._by_egress.get(egress, ()):
            if st.flow.matches(header):
                if st.last_report is not None and now > st.last_report and not st.alarmed:
                    st.report_gap = _ewma(st.report_gap, now - st.last_report)
                st.last_report = now
                st.egress_rate = sampling_rate
                if st.alarmed:
                    st.alarmed = False
                    recovered.append(st.flow)
        return recovered

    def on_ingress(self, ingress: Port, header: dict, now: float, sampling_rate: int) -> None:
        for st in self._by_ingress.get(ingress, ()):
            if st.flow.matches(header):
                if st.last_ingress is not None and now > st.last_ingress:
                    st.ingress_gap = _ewma(st.ingress_gap, now - st.last_ingress)
                st.last_ingress = now
                st.ingress_rate = sampling_rate

    def expected_gap(self, st: _FlowState) -> float | None:
        """E: the expected time between reports of the flow, None while unknown."""
        if st.ingress_gap and st.ingress_rate:
            pps = st.ingress_rate / st.ingress_gap
            n_e = st.egress_rate or st.ingress_rate
            return n_e / pps
        return st.report_gap

    def check(self, now: float) -> list[BlackholeAlarm]:
        """New alarms since the last call (each outage alarms once)."""
        out = []
        if now < self._hold_until:
            return out
        for st in self._states:
            if st.alarmed:
                continue
            e = self.expected_gap(st)
            threshold = max(st.flow.timeout, self.k * e) if e else st.flow.timeout
            since = st.last_report if st.last_report is not None else st.start
            if now - since <= threshold:
                continue
            if st.last_ingress is not None and st.ingress_gap:
                # Ingress samples are seen for this flow: alarm only while it is still sent.
                if now - st.last_ingress > self.k * st.ingress_gap:
                    continue
                detail = "ingress still sampled, no report at egress"
            else:
                detail = "no report at egress"
            st.alarmed = True
            st.alarms += 1
            out.append(BlackholeAlarm(st.flow, since, now, threshold, e, detail))
        return out


class TransientGuard:
    """Held-back header classes: in flight, or touched less than `settle` seconds ago."""

    def __init__(self, settle: float = 2.0, clock: Callable[[], float] = time.monotonic):
        self.settle = settle
        self.clock = clock
        self._inflight: dict[int, int] = {}
        self._done: dict[int, float] = {}
        self.held_count = 0

    def begin(self, classes: Iterable[int], now: float | None = None) -> None:
        for c in classes:
            self._inflight[c] = self._inflight.get(c, 0) + 1

    def end(self, classes: Iterable[int], now: float | None = None) -> None:
        t = self.clock() if now is None else now
        for c in classes:
            n = self._inflight.get(c, 0) - 1
            if n > 0:
                self._inflight[c] = n
            else:
                self._inflight.pop(c, None)
            self._done[c] = t

    def touched(self, classes: Iterable[int], now: float | None = None) -> None:
        t = self.clock() if now is None else now
        for c in classes:
            self._done[c] = t

    def on_model_update(self, update) -> None:
        """Adapter for `model.subscribe(fn)`: update.classes were just changed."""
        self.touched(update.classes)

    def held(self, class_id: int, now: float) -> bool:
        if class_id in self._inflight:
            return True
        t = self._done.get(class_id)
        return t is not None and now - t < self.settle

    def held_until(self, class_id: int) -> float:
        """When reports of the class stop being held back (inf while in flight, 0: not held)."""
        if class_id in self._inflight:
            return float("inf")
        t = self._done.get(class_id)
        return 0.0 if t is None else t + self.settle

    def expire(self, now: float) -> None:
        """Forget classes that settled long ago (call now and then)."""
        old = [c for c, t in self._done.items() if now - t >= self.settle]
        for c in old:
            del self._done[c]
