"""tester.probeloss: the delivered group's probes that no exit reports, simulated probe by
probe. The oracle is the simulation's own ground truth: which areas it blackholes, which
reports it drops at random, when the collector is away."""

from __future__ import annotations

import math
import random

from cpc.tags import port_bits
from tester.engine import watch_key
from tester.probeloss import (
    LOST,
    OTHERS,
    REPLAY_AGAIN_S,
    REPLAY_COPIES,
    REPLAYS_PER_MIN,
    WINDOW,
    ProbeLoss,
)

INGRESSES = [(1, 1), (2, 1), (3, 1), (4, 1)]
EXIT = (9, 1)


def _header(rng: random.Random, area: int) -> dict:
    return {
        "eth_type": 0x0800,
        "ipv4_src": 0x0A000000 | rng.getrandbits(16),
        "ipv4_dst": 0x0B000000 | (area << 8) | rng.getrandbits(8),
        "ip_proto": 6,
        "tp_src": rng.randrange(1024, 65536),
        "tp_dst": 80,
    }


def _delivers(ingress, header):
    return [EXIT]


def _run(
    seconds: float,
    rate: float = 200.0,
    areas: int = 25,
    loss: float = 0.0,
    blackholed=lambda ingress, area, header, t: False,
    outage=lambda t: False,
    seed: int = 1,
    pl: ProbeLoss | None = None,
    t0: float = 0.0,
    replay: bool = False,
    replayed: list | None = None,
):
    """Probes round-robin over ingresses and areas at `rate`/s; each is reported (one
    second later) unless lost at random, blackholed or sent during an outage of the
    collector. With replay, the copies ProbeLoss asks for go out one per probe slot, on
    top of the rate (as the fuzzer interleaves them). Returns (the ProbeLoss,
    [(time, alarm)], [(time, recovered)])."""
    rng = random.Random(seed)
    copies: list[tuple] = []

    def again(i, h, a, n):
        if replayed is not None:
            replayed.append((i, tuple(sorted(h.items()))))
        copies.extend([(i, dict(h), a)] * n)

    if pl is None:
        pl = ProbeLoss(_delivers, watch_key, replay=again if replay else None)
    pl.reporting.add(EXIT)
    alarms, recovered = [], []
    n = int(seconds * rate)
    reports: list[tuple[float, dict, tuple]] = []
    next_check = t0 + 1.0
    for k in range(n):
        t = t0 + k / rate
        ingress = INGRESSES[k % len(INGRESSES)]
        area = (k // len(INGRESSES)) % areas
        sends = [(ingress, _header(rng, area), f"delivered {area}")]
        if copies:
            sends.append(copies.pop(0))
        for ingress, h, label in sends:
            a = int(label.split()[-1])
            pl.sent(ingress, h, label, t)
            if not (blackholed(ingress, a, h, t) or outage(t) or rng.random() < loss):
                reports.append((t + 0.6, h, ingress))
        while reports and reports[0][0] <= t:
            _, rh, ri = reports.pop(0)
            pl.seen(EXIT, rh, port_bits(*ri))
        if t >= next_check:
            a, r = pl.check(t)
            alarms += [(t, x) for x in a]
            recovered += [(t, x) for x in r]
            next_check += 1.0
    return pl, alarms, recovered


def test_the_window_rule_bounds_false_alarms_at_the_assumed_loss():
    # The docstring's bound: 8 or more of 24 lost, each with probability 1 %.
    p = sum(math.comb(WINDOW, k) * 0.01**k * 0.99 ** (WINDOW - k) for k in range(LOST, WINDOW + 1))
    assert p < 1e-10 and p * 1000 * 3600 < 4e-4
    # Simulated: 20 minutes at 200 probes/s, 1 % of the reports lost at random.
    pl, alarms, _ = _run(1200, loss=0.01)
    assert alarms == [] and pl.lost_total > 1000, pl.stats()


def test_a_blackholed_area_alarms_within_its_window_and_recovers():
    start, end = 60.0, 120.0
    pl, alarms, recovered = _run(
        180, blackholed=lambda i, a, h, t: i == (2, 1) and a == 7 and start <= t < end
    )
    ((t, alarm),) = alarms
    assert (alarm.ingress, alarm.area, alarm.lost) == ((2, 1), "delivered 7", LOST)
    # The area's probes come every 25 * 4 / 200 = 0.5 s: LOST of them, then the report delay.
    assert start < alarm.since < start + 0.5 and t - start <= LOST * 0.5 + 3.0
    assert alarm.others >= OTHERS and alarm.exits == [EXIT]
    # Once its probes come back, a window with at most one loss in it: recovered.
    ((tr, what),) = recovered
    assert what == ((2, 1), "delivered 7") and end < tr <= end + WINDOW * 0.5 + 2.0


def test_a_blackhole_of_part_of_an_area_alarms_too():
    """A SELECT group hashes half of the area's flows to a bucket that drops: the window
    still fills with losses, where a run in a row would be broken by every other probe."""
    pl, alarms, _ = _run(
        120, blackholed=lambda i, a, h, t: a == 3 and t >= 30 and h["tp_src"] % 2 == 0
    )
    assert {x.ingress for _, x in alarms} == set(INGRESSES)
    assert {x.area for _, x in alarms} == {"delivered 3"}
    assert all(t - 30 <= 2 * WINDOW * 0.5 for t, _ in alarms)


def test_the_collector_or_the_injector_away_alarms_nothing():
    """Every probe lost for 30 s (the collector down, or no probe leaving): no area's loss
    stands out from the rest of its ingress's, so nothing alarms."""
    _, alarms, _ = _run(120, outage=lambda t: 40 <= t < 70)
    assert alarms == []
    # An ingress that loses all its probes everywhere (a failing injector) neither, nor one
    # that loses 40 % of them at random (a congested one): its other areas lose as much.
    _, alarms, _ = _run(120, blackholed=lambda i, a, h, t: i == (3, 1) and t > 20, loss=0.0)
    assert alarms == []
    rng = random.Random(5)
    _, alarms, _ = _run(300, blackholed=lambda i, a, h, t: i == (3, 1) and rng.random() < 0.4)
    assert alarms == []


def test_probes_held_back_undelivered_or_towards_silent_exits_do_not_count():
    held = {"on": True}
    pl = ProbeLoss(_delivers, watch_key, lambda h, since: held["on"])
    pl, alarms, _ = _run(60, blackholed=lambda i, a, h, t: a == 2, pl=pl)
    assert alarms == [] and pl.lost_total == 0 and pl.unjudged > 0  # all held back
    held["on"] = False
    pl, alarms, _ = _run(60, blackholed=lambda i, a, h, t: a == 2, pl=pl, t0=100.0)
    assert {x.area for _, x in alarms} == {"delivered 2"}  # the same, judged
    # The model drops the area's headers (the controller's doing): no loss.
    pl = ProbeLoss(lambda i, h: None if (h["ipv4_dst"] >> 8) & 0xFF == 2 else [EXIT], watch_key)
    _, alarms, _ = _run(60, blackholed=lambda i, a, h, t: a == 2, pl=pl)
    assert alarms == []
    # An exit that never reported anything (no sFlow there): its probes are not judged.
    silent = (8, 1)
    pl = ProbeLoss(lambda i, h: [silent] if (h["ipv4_dst"] >> 8) & 0xFF == 2 else [EXIT], watch_key)
    pl, alarms, _ = _run(60, blackholed=lambda i, a, h, t: a == 2, pl=pl)
    assert alarms == [] and silent not in pl.reporting


def test_a_report_counts_only_for_the_ingress_its_verify_port_names():
    pl = ProbeLoss(_delivers, watch_key)
    pl.reporting.add(EXIT)
    h = _header(random.Random(3), 1)
    pl.sent((1, 1), h, "delivered 1", 0.0)
    pl.sent((2, 1), h, "delivered 1", 0.0)
    pl.seen(EXIT, h, port_bits(2, 1))
    pl.check(10.0)
    assert (pl.seen_total, pl.lost_total) == (1, 1)


def _few_headers(i, a, h, t):
    """4 of the 256 destinations of area 5, from t = 30 s: one probe of the area in 64."""
    return a == 5 and t >= 30 and h["ipv4_dst"] & 0xFF < 4


def test_a_blackhole_of_a_few_headers_alarms_by_replays():
    """A blackhole that takes a few headers of a large area (a route typed wide) loses one
    probe of the area in 64: never 8 of a window of 24 by the area's own probes, but each
    lost probe's header, sent again, fills the window within seconds."""
    _, alarms, _ = _run(150, blackholed=_few_headers)
    assert alarms == []
    pl, alarms, _ = _run(150, blackholed=_few_headers, replay=True)
    assert alarms and {x.area for _, x in alarms} == {"delivered 5"}
    # The first lost probe of an ingress is judged about 2 s after it left, its copies
    # leave within the next ones and are judged as late: within 8 s of the first loss.
    first = min(x.since for _, x in alarms)
    assert first >= 30 and min(t for t, _ in alarms) - first <= 8.0
    assert pl.replays <= 4 * REPLAYS_PER_MIN * 150 / 60


def test_replays_keep_within_their_budget_and_raise_no_false_alarm():
    """10 minutes at 200 probes/s with 1 % of the reports lost at random, replays on: the
    copies come back, no alarm, and the replays stay within REPLAYS_PER_MIN an ingress and
    minute, one per header in REPLAY_AGAIN_S."""
    asked: list[tuple] = []
    pl, alarms, _ = _run(600, loss=0.01, replay=True, replayed=asked)
    assert alarms == [] and pl.replays == len(asked) > 100
    assert len(set(asked)) == len(asked)  # random loss: every header once (well within 30 s)
    per = {i: sum(x == i for x, _ in asked) for i in INGRESSES}
    assert all(v <= REPLAYS_PER_MIN * 10 for v in per.values())
    assert REPLAY_COPIES == LOST and REPLAY_AGAIN_S >= 10


def test_a_header_is_replayed_at_most_once_in_its_time():
    calls = []
    pl = ProbeLoss(_delivers, watch_key, replay=lambda i, h, a, n: calls.append((i, n)))
    pl.reporting.add(EXIT)
    h = _header(random.Random(3), 1)
    for k in range(200):  # the same header lost every 0.1 s for 20 s
        pl.sent((1, 1), h, "delivered 1", k * 0.1)
    pl.check(30.0)
    assert calls == [((1, 1), REPLAY_COPIES)]
