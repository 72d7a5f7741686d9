"""Blackhole timers for critical flows, and the hold-back of reports during updates.

Blackholes. A critical flow (ingress, egress, match) raises an alarm when its silence at
its egress (no report for it) is improbable for a flow that still delivers: at most
`per_hour` false alarms per flow-hour (default 1e-6), given the sampling rates and the
flow's measured rate (the derivation, with numbers, is in docs/tester.md):

- A flow whose ingress is sampled alarms when enough of its ingress samples arrived
  during the silence (tester.silence.run_needed: at 1/1 sampling one is proof). A flow
  whose ingress samples stop too is idle, not blackholed: no alarm.
- A flow seen only at its egress alarms when the silence exceeds the batch period plus
  tester.silence.silence_threshold of a lower confidence bound on its report rate: the
  count of its reports over a window of up to `window` seconds (not a gap between two).
- sFlow datagrams come in batches (`batch`, 1 s in OVS): arrival times are only known to
  a batch, so the batch period is added to every silence, and a window never ends in the
  middle of a batch.
- Until the rate is known well enough (`min_samples` samples in the window) there is no
  alarm, except after `max_silence` seconds if the operator set one. `detection_time` and
  `poorly_sampled` tell a caller which flows to probe with marked probes instead.
- A flow the fuzzer probes (its `period_s`) with marked probes, which the switches
  report 1 in 1 (`probe_reports`), also alarms when `probe_run_needed` of its probes in a
  row, sent after its last report and old enough for their reports to be in, have none:
  at most `per_hour` false alarms per flow-hour if at most PROBE_LOSS of the probe reports
  are lost on the way. The rule arms once a report of one of its probes has come (the
  probe path works; `on_probe_report`: a probe report also starts the flow's silence
  again, but is not counted in its production rate) and does not depend on the sampling
  rate: a blackhole is found in
  about that many probe periods plus the batch allowances, at 1/100 and 1/1000 alike.
- The flow's `timeout` is a floor on every silence that alarms.

A flow's header is the header as it enters the network at its ingress. With a
model, the monitor matches reports at the egress against the header(s) the model
says leave there (set_field rewrites applied), derived again for each model version.

The silence clock of a flow starts when the flow is first seen (a matching ingress
sample or report), never before `grace` seconds after the monitor was armed. A flow
never seen raises no alarm, unless it has `expect_traffic`: then its clock starts
when the grace ends, and it alarms after `max_silence` if set, else after its `timeout`.

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

from .silence import (
    HOUR,
    PROBE_LOSS,
    Series,
    poisson_lower,
    poisson_upper,
    probe_run_needed,
    run_needed,
    silence_threshold,
)

__all__ = ["CriticalFlow", "BlackholeAlarm", "BlackholeMonitor", "TransientGuard"]

# The lower confidence bound on a rate is wrong with probability at most this; with at
# least `min_samples` samples it costs at most half the false-alarm budget (docs/tester.md).
CONFIDENCE = 1e-3
_MAX_PPS = 1e7  # no flow is faster: caps the rate bound of a flow seen for an instant
PROBE_FLIGHT = 0.5  # s: a probe's way from the fuzzer through the network to its exit


@dataclass
class _FlowState:
    flow: CriticalFlow
    start: float  # when the monitor was armed (the grace counts from here)
    first_seen: float | None = None
    last_report: float | None = None
    reports: Series = field(default_factory=Series)
    ingress: Series = field(default_factory=Series)
    alarmed: bool = False
    alarms: int = 0
    # What identifies the flow in reports at its egress (the model's egress headers).
    egress_match: tuple[dict, ...] = ()
    version: int | None = None  # model version egress_match was derived for
    probes: deque = field(default_factory=lambda: deque(maxlen=256))  # when probes were sent
    probe_reported: bool = False  # a report of one of its probes came: the probe path works
    last_probe_report: float | None = None
    probe_alarm: bool = False  # the alarm raised is the probe rule's


@dataclass(frozen=True)
class BlackholeAlarm:
    flow: CriticalFlow
    since: float  # the silence began: last report, else first seen, else end of the grace
    now: float
    threshold: float  # the silence this alarm needed, or was expected to need
    expected_gap: float | None  # the expected time between reports, when known
    detail: str = field(default="")
    ingress_samples: int = 0  # ingress samples during the silence (sampled ingress)
    needed: int = 0  # how many of them (or of the probes) were improbable enough
    probes: int = 0  # the flow's probes sent during the silence and not reported


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
    """Alarms for critical flows whose silence is improbable (see the module docstring).

    per_hour: the false-alarm bound per flow-hour. batch: the sFlow flush period (s).
    latency: how late a report may come after the batch it was sent in (s). window: the
    rate window (s). min_samples: samples the window needs before the rate counts.
    max_silence: alarm after this silence whatever the rate (None: never). max_detect: a
    flow whose blackhole would take longer to find is `poorly_sampled`. k: a floor of k
    expected report gaps on the silence (kept for old configs; it rarely binds).
    probe_reports: the switches report marked probes 1 in 1, so the fuzzer's probes of a
    flow (`on_probe`) are judged by the probe rule, which assumes at most probe_loss of
    their reports lost."""

    def __init__(
        self,
        flows: Iterable[CriticalFlow],
        k: float = 10.0,
        now: float | None = None,
        *,
        grace: float = 0.0,
        model=None,
        per_hour: float = 1e-6,
        batch: float = 1.0,
        latency: float = 0.5,
        window: float = 600.0,
        min_samples: int = 10,
        max_silence: float | None = None,
        max_detect: float = 60.0,
        probe_reports: bool = False,
        probe_loss: float = PROBE_LOSS,
    ):
        if not 0.0 < per_hour < 1.0:
            raise ValueError(f"per_hour must be in (0, 1), got {per_hour!r}")
        if batch < 0 or latency < 0 or window <= 0 or min_samples < 1:
            raise ValueError("batch and latency must be >= 0, window > 0, min_samples >= 1")
        self.k = k
        self.grace = grace
        self.model = model  # a cpc.model.Model: derives the flows' egress headers
        self.per_hour = per_hour
        self.batch = batch
        self.latency = latency
        self.window = window
        self.min_samples = min_samples
        self.max_silence = max_silence
        self.max_detect = max_detect
        self.probe_reports = probe_reports
        self.probe_loss = probe_loss  # the share of probe reports assumed lost on the way
        start = time.monotonic() if now is None else now
        self._states = [_FlowState(f, start) for f in flows]
        self._by_egress: dict[Port, list[_FlowState]] = {}
        self._by_ingress: dict[Port, list[_FlowState]] = {}
        self._by_name: dict[str, _FlowState] = {}
        for st in self._states:
            self._by_egress.setdefault(st.flow.egress, []).append(st)
            self._by_ingress.setdefault(st.flow.ingress, []).append(st)
            self._by_name[st.flow.name] = st

        self._hold_until = start
        self._meant: dict[tuple, bool] = {}  # (flow, ingress header) -> meant for egress
        self._meant_version: int | None = None

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

    def _keep(self, series: Series, now: float) -> None:
        series.prune(now - self.window - 2 * self.batch)

    def on_report(
        self, egress: Port, header: dict, now: float, sampling_rate: int
    ) -> list[CriticalFlow]:
        """Note a report at egress; returns the flows whose alarm this report clears."""
        recovered = []
        for st in self._at_egress(egress, header):
            st.reports.add(now, max(1, sampling_rate))
            self._keep(st.reports, now)
            st.last_report = now if st.last_report is None else max(st.last_report, now)
            if st.first_seen is None:
                st.first_seen = now
            if st.alarmed:
                st.alarmed = False
                recovered.append(st.flow)
        return recovered

    def _at_egress(self, egress: Port, header: dict):
        """The flows whose reports at egress this header is (their egress headers)."""
        for st in self._by_egress.get(egress, ()):
            if any(all(header.get(k) == v for k, v in m.items()) for m in self.egress_match(st)):
                yield st

    def _meant_for_egress(self, st: _FlowState, header: dict) -> bool:
        """Does the model deliver this ingress header to the flow's egress? (True without
        a model, or when it cannot tell.) Packets dropped on purpose, or sent elsewhere,
        must not count as lost."""
        model = self.model
        if model is None:
            return True
        if self._meant_version != model.version or len(self._meant) > 4096:
            self._meant.clear()
            self._meant_version = model.version
        key = (st.flow.name, tuple(sorted(header.items())))
        ok = self._meant.get(key)
        if ok is None:
            try:
                ok = any(
                    d.kind == "egress" and d.egress == st.flow.egress
                    for d, _ in model.trace_headers(st.flow.ingress, header)
                )
            except Exception:  # a header the model cannot trace: count it
                ok = True
            self._meant[key] = ok
        return ok

    def on_probe_report(self, egress: Port, header: dict, now: float) -> list[CriticalFlow]:
        """A report of one of the fuzzer's marked probes at egress: the probe rule arms
        and its run starts again (an alarm of that rule clears). The production rules do
        not see it: it is not the flow's traffic. Returns the flows it clears."""
        recovered = []
        for st in self._at_egress(egress, header):
            st.probe_reported = True
            last = st.last_probe_report
            st.last_probe_report = now if last is None else max(last, now)
            if st.alarmed and st.probe_alarm:
                st.alarmed = False
                recovered.append(st.flow)
        return recovered

    def on_probe(self, ingress: Port, header: dict, now: float) -> None:
        """The fuzzer sent a marked probe of a flow (its header, from its ingress) at now.
        Only probes the model delivers to the flow's egress count: a flow the controller
        stopped delivering on purpose is not a blackhole."""
        for st in self._by_ingress.get(ingress, ()):
            if st.flow.matches(header) and self._meant_for_egress(st, header):
                st.probes.append(now)

    def _probes_unreported(self, st: _FlowState, since: float, now: float) -> int:
        """The flow's probes sent after `since` (its last report) whose reports would be in
        by now: the datagram's batch, its latency and the probe's own way through."""
        late = self.batch + self.latency + PROBE_FLIGHT
        return sum(1 for t in st.probes if since < t <= now - late)

    def on_ingress(self, ingress: Port, header: dict, now: float, sampling_rate: int) -> None:
        for st in self._by_ingress.get(ingress, ()):
            if st.flow.matches(header) and self._meant_for_egress(st, header):
                st.ingress.add(now, max(1, sampling_rate))
                self._keep(st.ingress, now)
                if st.first_seen is None:
                    st.first_seen = now

    # -- rates ---------------------------------------------------------------------------

    def _rate_lower(self, series: Series, end: float) -> float | None:
        """A lower confidence bound on the sample rate (samples/s) over the window that
        ends at the batch arriving at `end`; None while it has fewer than min_samples."""
        n, span = series.window(end, self.window)
        if n < self.min_samples:
            return None
        # Each batch holds samples from up to one batch period before it arrived.
        return poisson_lower(n, CONFIDENCE) / (span + self.batch)

    def _report_rate(self, st: _FlowState) -> tuple[float | None, float | None]:
        """(lower bound, estimate) of the flow's report rate at its egress, per second."""
        ing, rep = st.ingress, st.reports
        n_e = rep.rate or ing.rate or 1
        if ing:  # packets counted at the ingress, each sample stands for N_i of them
            lower = self._rate_lower(ing, ing.last)
            n, span = ing.window(ing.last, self.window)
            scale = ing.rate / n_e
        else:
            lower = self._rate_lower(rep, rep.last) if rep else None
            n, span = rep.window(rep.last, self.window) if rep else (0, 0.0)
            scale = 1.0
        est = n * scale / span if n and span > 0 else None
        return (None if lower is None else lower * scale), est

    def expected_gap(self, st: _FlowState) -> float | None:
        """The expected time between the flow's reports, None while unknown."""
        est = self._report_rate(st)[1]
        return 1.0 / est if est else None

    def _run_needed(self, st: _FlowState, now: float) -> int:
        """Ingress samples during a silence that alarm (tester.silence.run_needed)."""
        ing = st.ingress
        n_i, n_e = ing.rate, st.reports.rate or ing.rate
        seen = ing.count(now - self.window, now)
        span = max(now - max(ing.first, now - self.window), self.batch)
        pps = min(poisson_upper(seen, CONFIDENCE) * n_i / span, _MAX_PPS)
        return run_needed(1.0 / n_i, 1.0 / n_e, HOUR * pps / n_e, self.per_hour / 2)

    def _silence_needed(self, lam: float) -> float:
        """The silence that alarms a flow reported at (at least) lam per second."""
        quiet = silence_threshold(lam, self.per_hour / 2)
        return max(self.k / lam, self.batch + self.latency + quiet)

    def detection_time(self, flow: CriticalFlow | str, now: float) -> float | None:
        """The silence after which a blackhole of the flow, starting now, would alarm (its
        expected value for a flow with a sampled ingress); None while the flow's rate is
        too poorly known to alarm on (the max_silence fallback aside)."""
        st = self._by_name[flow if isinstance(flow, str) else flow.name]
        lower, _ = self._report_rate(st)
        if lower is None:
            return None
        if st.ingress:
            lam_in = lower * (st.reports.rate or st.ingress.rate) / st.ingress.rate
            wait = 2 * (self.batch + self.latency) + self._run_needed(st, now) / lam_in
        else:
            wait = self._silence_needed(lower)
        return max(st.flow.timeout, wait)

    def poorly_sampled(self, flow: CriticalFlow | str, now: float) -> bool:
        """True when production samples cannot find a blackhole of the flow within
        max_detect seconds: probe it with marked probes instead."""
        t = self.detection_time(flow, now)
        return t is None or t > self.max_detect

    # -- alarms --------------------------------------------------------------------------

    def _judge(self, st: _FlowState, since: float, now: float) -> BlackholeAlarm | None:
        silence = now - since
        gap = self.expected_gap(st)
        if st.ingress:
            # Ingress samples taken after the last report, whose own report would be in.
            late = self.batch + self.latency
            m = st.ingress.count(since + late, now - late)
            if m:
                need = self._run_needed(st, now)
                if m >= need:
                    wait = self.detection_time(st.flow, now) or silence
                    detail = "ingress still sampled, no report at egress"
                    return BlackholeAlarm(st.flow, since, now, wait, gap, detail, m, need)
        elif st.reports:
            lower = self._rate_lower(st.reports, st.reports.last)
            if lower is not None:
                wait = self._silence_needed(lower)
                if silence > wait:
                    return BlackholeAlarm(st.flow, since, now, wait, gap, "no report at egress")
        if self.max_silence is not None and silence > self.max_silence:
            detail = "no report at egress for longer than max_silence"
            return BlackholeAlarm(st.flow, since, now, self.max_silence, gap, detail)
        return None

    def _probe_alarm(self, st: _FlowState, now: float) -> BlackholeAlarm | None:
        """The probe rule: probe_run_needed of the flow's probes in a row, sent after its
        last report (production or probe) and old enough to be in, have none."""
        if not (self.probe_reports and st.probe_reported and st.flow.period_s > 0):
            return None
        grace = self.grace if st.flow.grace is None else st.flow.grace
        seen = [t for t in (st.last_report, st.last_probe_report) if t is not None]
        since = max([st.start + grace, *seen])
        if now - since <= st.flow.timeout:
            return None
        need = probe_run_needed(st.flow.period_s, self.per_hour / 2, self.probe_loss)
        m = self._probes_unreported(st, since, now)
        if m < need:
            return None
        wait = need * st.flow.period_s + self.batch + self.latency + PROBE_FLIGHT
        detail = "probes of the flow not reported at egress"
        return BlackholeAlarm(st.flow, since, now, wait, self.expected_gap(st), detail, 0, need, m)

    def check(self, now: float) -> list[BlackholeAlarm]:
        """New alarms since the last call (each outage alarms once)."""
        out = []
        if now < self._hold_until:
            return out
        for st in self._states:
            if st.alarmed:
                continue
            alarm = self._probe_alarm(st, now)
            if alarm is not None:
                st.alarmed = st.probe_alarm = True
                st.alarms += 1
                out.append(alarm)
                continue
            since = st.last_report if st.last_report is not None else st.first_seen
            if since is None and not st.flow.expect_traffic:
                continue  # never seen: no traffic to lose yet
            grace = self.grace if st.flow.grace is None else st.flow.grace
            since = max(st.start + grace, since if since is not None else st.start)
            if now - since <= st.flow.timeout:
                continue
            if st.first_seen is None:  # expect_traffic, never seen: the operator's limit
                limit = st.flow.timeout if self.max_silence is None else self.max_silence
                if now - since <= limit:
                    continue
                alarm = BlackholeAlarm(st.flow, since, now, limit, None, "no report at egress")
            else:
                alarm = self._judge(st, since, now)
                if alarm is None:
                    continue
            st.alarmed, st.probe_alarm = True, False
            st.alarms += 1
            out.append(alarm)
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
