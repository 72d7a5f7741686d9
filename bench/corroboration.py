"""What corroboration (tester.corroborate) costs in detection latency, and what it saves.

    python bench/corroboration.py [--faults N] [--rates 0.5,2,10] [--seed S] [--json]

The tester is fed on a simulated clock: each of N faults sends samples as a Poisson process
of `rate` sampled reports per second (a faulty flow's packet rate divided by the sFlow
sampling rate); besides, N one-off corrupted samples (each a different header class) arrive.
For corroborate = 1 and 2 it reports the detection latency from a fault's first sample to
its record (mean, p50, p90) and how many faults the one-off samples opened.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tester.emit import ReferenceEmitter, synthetic_ifmap  # noqa: E402
from tester.engine import Tester  # noqa: E402
from tester.store import FaultStore  # noqa: E402
from tests.tester.tester_helpers import (  # noqa: E402
    ALL_PORTS,
    BAD,
    EGRESS,
    GOOD,
    HDR,
    FakeModel,
    expected,
    tags_of,
)


def run(corroborate: int, n: int, rate: float, seed: int) -> dict:
    rng = random.Random(seed)
    hdrs = [{**HDR, "ipv4_dst": 0x0A000000 + i} for i in range(2 * n)]
    model = FakeModel({(EGRESS, h["ipv4_dst"]): [expected(GOOD)] for h in hdrs})
    with tempfile.TemporaryDirectory() as d:
        store = FaultStore(str(Path(d) / "f.db"))
        opened: dict[int, float] = {}
        t = Tester(
            model,
            store,
            synthetic_ifmap(ALL_PORTS),
            resolve_after=1e9,
            on_fault=lambda ev: ev.new and opened.setdefault(ev.header["ipv4_dst"], clock[0]),
        )
        t.corroborate, t.corroborate_window = corroborate, 60.0
        clock = [0.0]
        events = []  # (time, header, is one-off)
        for i in range(n):  # faults: samples from t0 on, Poisson
            t0 = rng.uniform(0, 100)
            x = t0
            for _ in range(corroborate + 3):
                events.append((x, hdrs[i], False))
                x += rng.expovariate(rate)
        for i in range(n, 2 * n):  # one-off corrupted samples
            events.append((rng.uniform(0, 100), hdrs[i], True))
        events.sort(key=lambda e: e[0])
        first: dict[int, float] = {}
        em = ReferenceEmitter()
        for when, h, _ in events:
            clock[0] = when
            first.setdefault(h["ipv4_dst"], when)
            em.add(EGRESS, h, *tags_of(BAD))
            for dg in em.flush():
                t.process_datagram(dg, when)
        store.close()
    lat = sorted(opened[k] - first[k] for k in opened if k < 0x0A000000 + n)
    false = sum(1 for k in opened if k >= 0x0A000000 + n)
    q = statistics.quantiles(lat, n=10) if len(lat) > 1 else [0.0] * 9
    return {
        "corroborate": corroborate,
        "rate_per_s": rate,
        "faults_opened": len(lat),
        "latency_mean_s": round(statistics.fmean(lat), 3) if lat else None,
        "latency_p50_s": round(q[4], 3),
        "latency_p90_s": round(q[8], 3),
        "one_off_samples": n,
        "opened_by_one_off": false,
    }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--faults", type=int, default=300)
    p.add_argument("--rates", default="0.5,2,10")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--json", action="store_true")
    a = p.parse_args(argv)
    rows = [run(c, a.faults, float(r), a.seed) for r in a.rates.split(",") for c in (1, 2)]
    if a.json:
        print(json.dumps(rows, indent=1))
    else:
        for r in rows:
            print(r)
    return 0


if __name__ == "__main__":
    sys.exit(main())
