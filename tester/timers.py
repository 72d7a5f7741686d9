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

A flow's header is the header as it enters the network at its ingress. With a
model, the monitor matches reports at the egress against the header(s) the model
says leave there (set_field rewrites applied), derived again for each model version.

The silence clock of a flow starts when the flow is first seen (a matching ingress
sample or report), never before `grace` seconds after the monitor was armed. A flow
never seen raises no alarm, unless it has `expect_traffic`: then its clock starts
when the grace ends.

Transients. `TransientGuard` takes a feed of touched header classes: `begin()`
when a FlowMod is sent (in flight), `end()` when it is applied everywhere, or
`touched()` for a finished change. A report whose class is in flight or was
touched less than `settle` seconds ago is held back, not judged. Model updates
(`on_model_update`) also carry the header space they touched: of a class they
named, only the reports whose header lies in that space are held.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from cpc.critical import CriticalFlow
from cpc.results import Port

__all__ = ["CriticalFlow", "BlackholeAlarm", "BlackholeMonitor", "TransientGuard"]

_ALPHA = 0.2  # EWMA weight of a new gap


@dataclass
class _FlowState:
    flow: CriticalFlow
    start: float  # when the monitor was armed (the grace counts from here)
    first_seen: float | None = None
    last_report: float | None = None
    report_gap: float | None = None
    egress_rate: int = 0
    last_ingress: float | None = None
    ingress_gap: float | None = None
    ingress_rate: int = 0
    alarmed: bool = False
    alarms: int = 0
    # What identifies the flow in reports at its egress (the model's egress headers).
    egress_match: tuple[dict, ...] = ()
    version: int | None = None  # model version egress_match was derived for


@dataclass(frozen=True)
class BlackholeAlarm:
    flow: CriticalFlow
    since: float  # the silence began: last report, else first seen, else end of the grace
    now: float
    threshold: float
    expected_gap: float | None
    detail: str = field(default="")


def _ewma(old: float | None, new: float) -> float:
    return new if old is None else old + _ALPHA * (new - old)


def flow_paths(model, flow: CriticalFlow) -> list[tuple]:
    """(Delivery, header as it leaves) of the flow's header sent in at its ingress, for the
    outcomes that leave at its egress; [] when the flow has no header or the model does
    not deliver it there."""
    if flow.header is None or model is None:
        return []
    return [
        (d, h)
        for d, h in model.trace_headers(flow.ingress, flow.header)
        if d.kind == "egress" and d.egress == flow.egress
    ]


class BlackholeMonitor:
    def __init__(
        self,
        flows: Iterable[CriticalFlow],
        k: float = 10.0,
        now: float | None = None,
        *,
        grace: float = 0.0,
        model=None,
    ):
        self.k = k
        self.grace = grace
        self.model = model  # a cpc.model.Model: derives the flows' egress headers
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
        """Start the grace of flows without reports now (the collector is listening)."""
        for st in self._states:
            if st.last_report is None:
                st.start = now

    def hold(self, until: float) -> None:
        """No alarms before `until`: the caller was not reading datagrams for a while, so
        reports may still be queued in the socket."""
        self._hold_until = max(self._hold_until, until)

    def egress_match(self, st: _FlowState) -> tuple[dict, ...]:
        """The flow's match fields as reports at its egress carry them, for this model
        version: rewritten where the model's path rewrites them; as written without a
        model, or when the model does not deliver the flow there."""
        model = self.model
        if model is None or st.flow.header is None:
            return (st.flow.match,)
        if st.version != model.version:
            keys = st.flow.match.keys()
            try:
                out = [{k: h.get(k) for k in keys} for _, h in flow_paths(model, st.flow)]
            except Exception:  # a model that cannot trace the flow: match as written
                out = []
            st.egress_match = tuple({tuple(m.items()): m for m in out}.values()) or (st.flow.match,)
            st.version = model.version
        return st.egress_match

    def on_report(
        self, egress: Port, header: dict, now: float, sampling_rate: int
    ) -> list[CriticalFlow]:
        """Note a report at egress; returns the flows whose alarm this report clears."""
        recovered = []
        for st in self._by_egress.get(egress, ()):
            if any(all(header.get(k) == v for k, v in m.items()) for m in self.egress_match(st)):
                if st.last_report is not None and now > st.last_report and not st.alarmed:
                    st.report_gap = _ewma(st.report_gap, now - st.last_report)
                st.last_report = now
                if st.first_seen is None:
                    st.first_seen = now
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
                if st.first_seen is None:
                    st.first_seen = now
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
            since = st.last_report if st.last_report is not None else st.first_seen
            if since is None and not st.flow.expect_traffic:
                continue  # never seen: no traffic to lose yet
            grace = self.grace if st.flow.grace is None else st.flow.grace
            since = max(st.start + grace, since if since is not None else st.start)
            e = self.expected_gap(st)
            threshold = max(st.flow.timeout, self.k * e) if e else st.flow.timeout
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
    """Held-back reports: of a class in flight, or touched less than `settle` seconds ago.

    A model update names classes, but a class is every header with one forwarding action
    (cpc.partition), often a large share of all traffic, while a FlowMod changes only the
    headers its match covers. So for an update of the model (`on_model_update`) only the
    reports whose header lies in the update's region (Update.region) are held; `begin`,
    `end` and `touched` hold whole classes.
    """

    def __init__(self, settle: float = 2.0, clock: Callable[[], float] = time.monotonic):
        self.settle = settle
        self.clock = clock
        self._inflight: dict[int, int] = {}
        self._done: dict[int, float] = {}  # whole classes: when last touched
        # Model updates, oldest first: (when, classes named, region BDD, its HeaderSpace).
        self._updates: deque[tuple[float, frozenset, object, object]] = deque()
        self._named: dict[int, float] = {}  # class -> latest update naming it (a quick filter)
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

    def on_model_update(self, update, now: float | None = None) -> None:
        """Adapter for `model.subscribe(fn)`: update.classes were just changed, within
        update.region (read here: subscribers run in the model's thread)."""
        region = getattr(update, "region", None)
        if region is None:  # no region known: hold the whole classes
            self.touched(update.classes, now)
            return
        if not update.classes:
            return
        t = self.clock() if now is None else now
        self._updates.append((t, update.classes, region, update.space))
        for c in update.classes:
            self._named[c] = t

    def held(self, class_id: int, now: float, header: dict | None = None) -> bool:
        """Is a report of this class (with this header, if given) held back at `now`?"""
        return self.held_until(class_id, header) > now

    def held_until(self, class_id: int, header: dict | None = None) -> float:
        """When reports of the class (with this header, if given; without one, any of the
        class) stop being held back: inf while in flight, 0 when not held."""
        if class_id in self._inflight:
            return float("inf")
        t = self._done.get(class_id)
        until = 0.0 if t is None else t + self.settle
        if self._named.get(class_id, -float("inf")) + self.settle <= until:
            return until
        for t, classes, region, space in reversed(self._updates):
            if t + self.settle <= until:
                break  # older updates cannot hold it longer
            if class_id in classes and (header is None or space.contains(region, header)):
                return t + self.settle
        return until

    def expire(self, now: float) -> None:
        """Forget classes and updates that settled long ago (call now and then)."""
        old = [c for c, t in self._done.items() if now - t >= self.settle]
        for c in old:
            del self._done[c]
        while self._updates and now - self._updates[0][0] >= self.settle:
            self._updates.popleft()
        old = [c for c, t in self._named.items() if now - t >= self.settle]
        for c in old:
            del self._named[c]
