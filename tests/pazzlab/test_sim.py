"""Detection effect on the reference data plane, small budget: grid 3, ~2k rules."""

from __future__ import annotations

from cpc.model import Model
from pazzdata.workloads import generate
from pazzlab.sim import first_detections, fuzzer_stream, make_faults, uniform_stream


def test_fuzzer_finds_fat_finger_routes_uniform_probing_does_not():
    wl = generate("grid", 3, 2000, rule_ids=True)
    m = Model(wl.topo)
    m.add_entries(wl.entries, wl.groups)
    faults = make_faults(wl, 8, "near", seed=11)
    budget = 12000
    # Three probe streams, compared by the faults found: one stream's count or median over
    # 8 faults is luck (over streams 1-4 of one fuzzer the median went 7.0k, 12k+, 12k+,
    # 5.2k), and with about half of the trials past the budget the pooled median sits at
    # the budget's edge too (10.0k, 8.4k and 11.4k probes for three versions of the
    # fuzzer that found 13, 15 and 14 of 24).
    fz = [
        x for s in (1, 2, 3) for x in first_detections(m, wl, faults, fuzzer_stream(m, s), budget)
    ]
    un = first_detections(m, wl, faults, uniform_stream(m, 1), budget)
    found = sorted(x for x in fz if x is not None)
    assert len(found) >= 12, fz  # half of the 24 trials
    assert sum(x is not None for x in un) <= 1, un  # 3 of 24 at this rate


def test_wide_faults_are_found_by_the_random_share():
    wl = generate("grid", 3, 2000, rule_ids=True)
    m = Model(wl.topo)
    m.add_entries(wl.entries, wl.groups)
    faults = make_faults(wl, 8, "wide", seed=5)
    # Three probe streams: a /12 is 2^-12 of the random group's tenth, so one stream in
    # 20,000 probes misses one now and then (5 of 40 over five streams).
    found = [
        x
        for seed in (1, 2, 3)
        for x in first_detections(m, wl, faults, fuzzer_stream(m, seed), 20000)
    ]
    assert sum(x is not None for x in found) >= 20, found
