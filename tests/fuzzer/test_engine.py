"""Model updates, coverage accounting, critical flows and metrics."""

from __future__ import annotations

from cpc.critical import CriticalFlow
from cpc.fields import parse_header
from cpc.model import Model
from fuzzer.engine import Fuzzer
from fuzzer.inject import RecordingInjector
from pazzdata.workloads import generate


class Clock:
    t = 0.0

    def __call__(self):
        return self.t


def _model():
    wl = generate("grid", 2, 200, rule_ids=True)
    m = Model(wl.topo)
    m.add_entries(wl.entries, wl.groups)
    return wl, m


def test_update_replans_and_trims_coverage():
    wl, m = _model()
    clk = Clock()
    fz = Fuzzer(
        m, pairs=[((1, 5), (4, 5))], rate=10_000, burst=1000, clock=clk, seed=1, min_replan_s=0.0
    )
    inj = RecordingInjector()
    clk.t = 1.0
    fz.step(inj, max_probes=500)
    before = fz.coverage((1, 5), (4, 5))
    assert before["coverage_ratio"] > 0 and before["probes"] > 0
    plan = fz.state[(1, 5)].plan
    # A new route on every switch for 172.16.0.0/12 towards h4: S_i grows, plan is rebuilt.
    m.add_flow(1, "priority=30,ip,nw_dst=172.16.0.0/12,actions=output:2")
    m.add_flow(2, "priority=30,ip,nw_dst=172.16.0.0/12,actions=output:3")
    m.add_flow(4, "priority=30,ip,nw_dst=172.16.0.0/12,actions=output:5")
    assert fz._changed != m.space.false
    clk.t = 2.0
    fz.step(inj, max_probes=10)
    new = fz.state[(1, 5)].plan
    assert new is not plan and new.version == m.version
    h = parse_header("nw_dst=172.16.1.1,tcp_dst=80")
    assert m.space.contains(new.pairs[(4, 5)].s_i, h)
    # Coverage in the touched region was dropped.
    assert not m.space.contains(fz.state[(1, 5)].cov, h)
    assert all(ingress == (1, 5) for ingress, _ in inj.frames)


def test_critical_flows_are_probed_every_period():
    wl, m = _model()
    clk = Clock()
    fz = Fuzzer(m, rate=1000, burst=100, clock=clk, seed=1)
    h = parse_header("nw_dst=10.0.1.7,tcp_dst=443")
    fz.set_critical([CriticalFlow("web", (1, 5), None, {}, header=h, period_s=0.5)])
    inj = RecordingInjector()
    crit = 0
    for _ in range(100):  # 10 s
        clk.t += 0.1
        probes = fz.next_probes(fz.bucket.take(100))
        crit += sum(p.area == "critical" for p in probes)
        assert all(p.area != "critical" or p.header == h for p in probes)
        fz.record(probes)
    assert 19 <= crit <= 21
    assert fz.sent_by_area["critical"] == crit
    assert inj.frames == []


def test_metrics_state_the_window_and_the_bound():
    wl, m = _model()
    clk = Clock()
    fz = Fuzzer(m, rate=1000, burst=1000, clock=clk, seed=1, subscribe=False, window_s=2.0)
    clk.t = 1.0
    fz.record(fz.next_probes(200))
    met = fz.metrics()
    assert met["probes_sent_total"] == 200
    assert len(met["ingresses"]) == 4
    row = met["ingresses"][0]
    assert row["ingress"] == "1:5"
    assert 0 < row["areas_recent"] <= row["areas"]
    # The bound follows from the schedule: 1000 probes/s shared by 4 ingresses, each
    # group's share split over its areas in round-robin turns (half of the turns).
    plan = fz.state[(1, 5)].plan
    shares = plan.live_shares()
    for g, s in row["revisit_s"].items():
        n = len(plan.areas[g])
        assert abs(s - 1 / (250 * shares[g] / (2 * n if n > 1 else 1))) < 1e-9, g
    worst = max(v for g, v in row["revisit_s"].items() if g != "random")
    assert row["expected_detect_s"]["1"] == worst
    assert row["expected_detect_s"]["1/256"] == 256 * worst
    # Ten seconds later nothing was probed within the 2 s window.
    clk.t = 11.0
    assert fz.metrics()["areas_recent"] == 0
    names = {n for n, _, _ in fz.prometheus_samples()}
    assert {
        "pazz_fuzz_areas_recent",
        "pazz_fuzz_expected_detect_seconds",
        "pazz_fuzz_revisit_seconds",
        "pazz_fuzz_probes_sent_total",
    } <= names
    # One series per ingress (and group or size), never per pair.
    assert all(
        set(lab) <= {"ingress", "group", "fraction"} for _, lab, _ in fz.prometheus_samples()
    )


def test_only_ingresses_with_a_changed_pair_are_replanned():
    wl, m = _model()
    clk = Clock()
    fz = Fuzzer(m, rate=10_000, burst=1000, clock=clk, seed=1, min_replan_s=0.0)
    clk.t = 1.0
    fz.step(RecordingInjector(), max_probes=200)
    plans = {i: st.plan for i, st in fz.state.items()}
    assert all(p is not None for p in plans.values())
    # A route on s4 alone for a new prefix, out of h4's port: no traffic from another
    # ingress reaches it (the other switches drop 172.16/12) and h4's own would go back out
    # of its input port, so no S_i changes; S_e of s4's edge port grows.
    upd = m.add_flow(4, "priority=30,ip,nw_dst=172.16.0.0/12,actions=output:5")
    assert upd.pairs == frozenset() and upd.exits == {(4, 5)}
    clk.t = 2.0
    fz.step(RecordingInjector(), max_probes=200)
    for i, st in fz.state.items():
        touched = any(p[0] == i for p in upd.pairs) or any(e in upd.exits for e in fz.egresses[i])
        assert (st.plan is not plans[i]) == touched, i
        assert st.built_version == m.version
        # A kept plan is exactly what a fresh one would be: same corpora.
    assert fz.state[(4, 5)].plan is plans[(4, 5)]  # the one ingress without (4, 5) as an exit
    for i, st in fz.state.items():
        fresh = {e: m.corpus(i, e) for e in fz.egresses[i]}
        for e, (s_i, s_e) in fresh.items():
            assert st.plan.pairs[e].s_i == s_i and st.plan.pairs[e].s_e == s_e, (i, e)
