"""Steady-state detection on random networks (pazzlab.steady): hidden rules installed at a
random moment long after the last intended change, benign churn running, the real Fuzzer
at a simulated clock and the reference data plane as the network.

    python bench/steady.py --seeds 10 --rate 1000 --json

Prints per fault kind: cases, detected, seconds from installation to the first
detecting probe (median, p90, max), and the fuzzer's own stated bound for the first case.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from fuzzer.plan import shares_with_delivered  # noqa: E402
from pazzlab.steady import FAULT_KINDS, run_case  # noqa: E402


def _pct(xs: list[float], q: float) -> float | None:
    if not xs:
        return None
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=10, help="random networks (and fault draws)")
    ap.add_argument("--first-seed", type=int, default=1000)
    ap.add_argument("--rate", type=float, default=1000.0, help="probes per second")
    ap.add_argument("--horizon", type=float, default=60.0, help="seconds after the fault")
    ap.add_argument("--t-min", type=float, default=20.0, help="earliest fault moment (s)")
    ap.add_argument("--t-max", type=float, default=40.0, help="latest fault moment (s)")
    ap.add_argument("--churn", type=float, default=2.0, help="seconds between benign changes")
    ap.add_argument("--kinds", default=",".join(FAULT_KINDS))
    ap.add_argument(
        "--delivered-share",
        type=float,
        default=0.0,
        help="fuzz.delivered_share (pazzd's default with marked probes: 0.2)",
    )
    ap.add_argument("--json", action="store_true", help="JSON only")
    a = ap.parse_args(argv)
    t0 = time.perf_counter()
    out = {
        "rate": a.rate,
        "horizon_s": a.horizon,
        "churn_s": a.churn,
        "seeds": a.seeds,
        "fault_window_s": [a.t_min, a.t_max],
        "delivered_share": a.delivered_share,
        "kinds": {},
    }
    for kind in a.kinds.split(","):
        secs, missed = [], 0
        for seed in range(a.first_seed, a.first_seed + a.seeds):
            r = run_case(
                seed,
                kind,
                rate=a.rate,
                t_min=a.t_min,
                t_max=a.t_max,
                horizon=a.horizon,
                churn_s=a.churn,
                shares=shares_with_delivered(a.delivered_share) if a.delivered_share else None,
            )
            if r["detected"]:
                secs.append(r["seconds"])
            else:
                missed += 1
            if not a.json:
                print(kind, seed, r, file=sys.stderr)
        out["kinds"][kind] = {
            "cases": a.seeds,
            "detected": len(secs),
            "median_s": statistics.median(secs) if secs else None,
            "p90_s": _pct(secs, 0.9),
            "max_s": max(secs) if secs else None,
        }
    out["wall_s"] = round(time.perf_counter() - t0, 1)
    print(json.dumps(out, indent=None if a.json else 2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
