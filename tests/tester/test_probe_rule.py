"""The blackhole alarm from a critical flow's marked probes (tester.timers, probe rule).

The fuzzer probes the flow every period_s; each probe is reported 1 in 1 at the egress,
in the switch's once-a-second datagrams, unless its report is lost on the way (each
independently, with probability `loss`). The monitor is fed what a collector would see.

The bound: a flow that still delivers alarms at most per_hour times a flow-hour when at
most `probe_loss` of the reports are lost. Checked as test_blackhole_bound.py checks the
production rules: at a bound and a loss high enough for alarms to be counted (per_hour
0.9, loss 0.3), the count over H flow-hours stays under the 99.9 % Poisson quantile of
per_hour * H; with the monitor told a smaller loss than the real one (so it asks for
fewer probes in a row) the same simulation must break the bound, so the check can fail.

Detection: probes stop being reported at a random moment (the route was deleted): the
alarm comes within probe_run_needed probe periods plus the allowances, whatever the
sampling rate of production traffic.
"""

from __future__ import annotations

import math
import random

import pytest

from cpc.critical import CriticalFlow
from tester.silence import HOUR, probe_run_needed
from tester.timers import BlackholeMonitor

INGRESS, EGRESS = (1, 1), (3, 2)
HDR = {"ipv4_dst": 0x0A000302}
BATCH, JITTER = 1.0, 0.05


def _flow(period: float = 1.0) -> CriticalFlow:
    return CriticalFlow(
        "f", INGRESS, EGRESS, dict(HDR), timeout=3.0, header=dict(HDR), period_s=period
    )


def _run(hours: float, loss: float, told: float, per_hour: float, seed: int, stop_at=None):
    """Alarms of one flow probed once a second for `hours`; reports lost with probability
    `loss` (always after stop_at); the monitor assumes `told`. Returns alarm times."""
    rng = random.Random(seed)
    mon = BlackholeMonitor(
        [_flow()], now=0.0, per_hour=per_hour, probe_reports=True, probe_loss=told
    )
    phase = rng.random()
    end = hours * HOUR
    alarms = []
    pending: list[float] = []  # report arrival times, in order
    t = 0.5
    tick = 1.0 + rng.random()
    while t < end:
        mon.on_probe(INGRESS, HDR, t)
        if (stop_at is None or t < stop_at) and rng.random() >= loss:
            pending.append(math.ceil(t + 0.01 - phase) + phase + rng.uniform(0, JITTER))
        t += 1.0
        while tick <= t:
            while pending and pending[0] <= tick:
                mon.on_probe_report(EGRESS, HDR, pending.pop(0))
            alarms += [tick for _ in mon.check(tick)]
            tick += 1.0
    return alarms


def test_run_needed_is_the_least_run_within_the_bound():
    for period in (0.1, 1.0, 5.0):
        for per_hour in (1e-6, 5e-7, 1e-2):
            for loss in (0.01, 0.1, 0.3):
                m = probe_run_needed(period, per_hour, loss)
                assert HOUR / period * loss**m <= per_hour
                assert m == 1 or HOUR / period * loss ** (m - 1) > per_hour
    assert probe_run_needed(1.0, 5e-7) == 5  # the default: 1e-6 a flow-hour, half of it here


@pytest.mark.slow
def test_false_alarms_stay_within_the_bound_and_the_check_can_fail():
    hours, per_hour, loss = 100.0, 0.9, 0.3
    allowed = per_hour * hours  # the monitor spends half of per_hour on this rule
    quantile = allowed + 3.1 * math.sqrt(allowed)  # about the 99.9 % Poisson quantile
    ok = len(_run(hours, loss, told=loss, per_hour=per_hour, seed=1))
    assert ok <= quantile, (ok, quantile)
    # Told a tenth of the real loss, it asks for too short a run: far more alarms.
    bad = len(_run(hours, loss, told=loss / 10, per_hour=per_hour, seed=1))
    assert bad > quantile, (bad, quantile)


def test_a_stopped_flow_alarms_within_the_run_of_probes():
    need = probe_run_needed(1.0, 5e-7)
    for seed in range(20):
        stop = 600.0 + random.Random(seed).uniform(0, 60)
        alarms = _run(0.25, 0.01, told=0.01, per_hour=1e-6, seed=seed, stop_at=stop)
        late = [a for a in alarms if a >= stop]
        assert alarms == late, (seed, alarms)  # none before the stop
        # need probes after the last report, each old enough for its report to be in.
        assert late and late[0] - stop <= need + BATCH + 0.5 + 0.5 + 2.0, (seed, late)


def test_no_alarm_without_a_probe_report_or_with_probes_not_sent():
    mon = BlackholeMonitor([_flow()], now=0.0, probe_reports=True)
    for t in range(1, 60):  # probes sent, none ever reported: the probe path is unproven
        mon.on_probe(INGRESS, HDR, float(t))
        assert mon.check(float(t) + 0.5) == []
    mon = BlackholeMonitor([_flow()], now=0.0, probe_reports=True)
    mon.on_probe_report(EGRESS, HDR, 1.0)
    for t in range(2, 60):  # reported once, then the fuzzer stopped: nothing was lost
        assert mon.check(float(t)) == []
    # Production reports at rate 1 (sFlow 1/1) do not arm it: only a probe's report does.
    mon = BlackholeMonitor([_flow()], now=0.0, probe_reports=True)
    mon.on_report(EGRESS, HDR, 1.0, 1)
    for t in range(2, 12):
        mon.on_probe(INGRESS, HDR, float(t))
        assert mon.check(float(t) + 0.5) == []
    # Off (the switches do not report probes 1 in 1): the rule never judges.
    mon = BlackholeMonitor([_flow()], now=0.0, probe_reports=False)
    mon.on_probe_report(EGRESS, HDR, 1.0)
    for t in range(2, 60):
        mon.on_probe(INGRESS, HDR, float(t))
        assert mon.check(float(t) + 0.5) == []


def test_the_testers_marked_reports_reach_the_probe_rule(tmp_path):
    """End to end through Tester.process_datagram: the flow's probes reported marked (as
    patched OVS reports them), then not at all; the alarm names the probes."""
    from tester_helpers import line_model

    from cpc.refdp import RefDataPlane
    from tester.detect import BLACKHOLE
    from tester.emit import ReferenceEmitter, synthetic_ifmap
    from tester.engine import Tester
    from tester.store import FaultStore

    m = line_model(INGRESS, EGRESS)
    for d in (1, 2, 3):
        m.add_flow(d, "priority=10,ip,nw_dst=10.0.3.0/24,actions=output:2")
    topo = m.topo
    ports = [(d, p) for d in sorted(topo.switches) for p in topo.ports_of(d)]
    hdr = {"eth_type": 0x0800, "ipv4_dst": 0x0A000302, "ipv4_src": 0x0A000101}
    f = CriticalFlow("f", INGRESS, EGRESS, {"ipv4_dst": 0x0A000302}, 3.0, hdr)
    mon = BlackholeMonitor([f], now=0.0, model=m, probe_reports=True)
    store = FaultStore(str(tmp_path / "f.db"))
    t = Tester(m, store, synthetic_ifmap(ports), ports=ports, blackholes=mon)
    ref = RefDataPlane(topo, m.entries(), m.groups())
    em = ReferenceEmitter(sampling_rate=1000)
    for s in range(40):
        mon.on_probe(INGRESS, hdr, s + 0.1)
        if s < 20:  # the route is there: the probe is reported at the egress, marked
            for d, out in ref.send_with_headers(INGRESS, hdr):
                em.add(d.egress, out, d.verify_port, d.verify_rule, marked=True)
        for dg in em.flush():
            t.process_datagram(dg, s + 1.0)
        t.tick(s + 1.5)
        if s < 20:
            assert store.faults() == [], s
    (fault,) = store.faults()
    assert fault.kind == BLACKHOLE
    assert fault.localization["detail"] == "probes of the flow not reported at egress"
    assert fault.first_seen - 20.0 <= probe_run_needed(1.0, 5e-7) + 4.0
