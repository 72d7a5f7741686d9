"""The packet budget: token bucket and the fuzzer's step under a fake clock."""

from __future__ import annotations

import asyncio

from cpc.model import Model
from fuzzer.engine import Fuzzer
from fuzzer.inject import RecordingInjector
from fuzzer.rate import TokenBucket
from pazzdata.workloads import generate


class FakeClock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_token_bucket_never_exceeds_rate_plus_burst():
    clk = FakeClock()
    tb = TokenBucket(1000, burst=50, clock=clk)
    granted = []  # (time, n)
    import random

    rng = random.Random(4)
    for _ in range(5000):
        clk.t += rng.choice((0.0, 0.0001, 0.001, 0.003, 0.02))
        granted.append((clk.t, tb.take(rng.randrange(0, 80))))
    start = granted[0][0]
    # Any window [a, b]: granted <= burst + rate * (b - a).
    times = [t for t, _ in granted]
    for i in range(0, len(granted), 97):
        total = 0
        for j in range(i, len(granted)):
            total += granted[j][1]
            assert total <= 50 + 1000 * (times[j] - times[i]) + 1e-6
    assert sum(n for _, n in granted) <= 50 + 1000 * (clk.t - start) + 1e-6
    # Idle long: tokens cap at the burst.
    clk.t += 100
    assert tb.take(10_000) == 50
    assert tb.wait_time(10) > 0


def test_fuzzer_step_respects_budget():
    wl = generate("grid", 2, 200, rule_ids=True)
    model = Model(wl.topo)
    model.add_entries(wl.entries, wl.groups)
    clk = FakeClock()
    fz = Fuzzer(model, rate=1000, burst=100, clock=clk, seed=1)
    inj = RecordingInjector()
    sent = 0
    for _ in range(300):
        clk.t += 0.01
        sent += fz.step(inj)
    assert len(inj.frames) == sent == fz.sent_total
    assert sent <= 100 + 1000 * 3.0 + 1
    assert sent >= 0.9 * 1000 * 3.0  # and it uses the budget


def test_run_loop_stops_and_stays_under_rate():
    wl = generate("grid", 2, 200, rule_ids=True)
    model = Model(wl.topo)
    model.add_entries(wl.entries, wl.groups)
    fz = Fuzzer(model, rate=500, burst=20, seed=1)
    inj = RecordingInjector()

    async def go():
        stop = asyncio.Event()
        task = asyncio.create_task(fz.run(inj, stop))
        await asyncio.sleep(0.6)
        stop.set()
        await task

    asyncio.run(go())
    assert 0 < len(inj.frames) <= 20 + 500 * 0.8
