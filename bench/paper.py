"""The PAZZ paper's evaluation at its rates, simulated with the real fuzzer and tester.

For each of the paper's topologies (2x2, 3x3, 4x4 grids and the k=4 fat-tree, with the
rule counts of its Table II) this builds the model, injects 28 faults (10 Type-p, 18
Type-a; pazzlab.paperfaults) plus 6 fat-finger routes reported apart, and runs each fault
--runs times (different injection moments in one fuzzer run, different sampling draws)
for three probers at sFlow sampling 1/100 and 1/1000 (pazzlab.papersim): pazz (the
fuzzer), random (the paper's baseline) and atpg (one probe per rule plus random), and
PAZZ with other random shares of the fuzzer (--random-shares; pazz_r50 for 0.5). The
fuzzer's stream of one network is shared by its faults (they are hidden from the model it
plans on); --jobs simulates networks in parallel processes.
Prints one JSON object (--out FILE writes it too); --figures DIR draws the figures
(bench/paperplot.py, the `pazz[eval]` extra).

    python bench/paper.py --jobs 2 --out docs/evaluation/paper.json.gz --figures docs/evaluation
    python bench/paper.py --quick --out /tmp/q.json --figures /tmp/fig   # small, fast
"""

from __future__ import annotations

import argparse
import functools
import gzip
import json
import math
import os
import random
import sys
import time
import zlib
from concurrent.futures import ProcessPoolExecutor

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from bench.common import median, pct, rss_mb  # noqa: E402
from fuzzer.plan import DEFAULT_SHARES, IngressPlan  # noqa: E402
from pazzlab.papersim import (  # noqa: E402
    FUZZ_PPS,
    POLL_S,
    PROD_PPS,
    Net,
    atpg_probes,
    build_scenarios,
    fuzz_stream,
    simulate,
)

# key: (kind, size, rules, the paper's CPC build time in s)
TOPOLOGIES = {
    "grid4": ("grid", 2, 5_000, 0.64),
    "grid9": ("grid", 3, 27_000, 0.91),
    "grid16": ("grid", 4, 60_000, 1.13),
    "fattree4": ("fattree", 4, 100_000, 1.15),
}
SYSTEMS = ("pazz", "random", "atpg")
SAMPLINGS = (100, 1000)
PAPER = {
    "median_s": 40.0,  # 50 % of faults within about 40 s (1/100)
    "all_s": 160.0,  # every fault within 160 s
    "type_a_max_s": 420.0,
    "baseline_speedup": (2.0, 3.0),
    "fuzzer_ms": (1.0, 7.5),
    "tester_ms_per_sample": 4.27,
}
WARMUP_S, SPACING_S = 5.0, 7.0


def fuzzer_plan_ms(net: Net, n: int = 8) -> float:
    """Corpora of one ingress to its first 32 probes (the paper's 'fuzzer time'), median."""
    m, rng, out = net.model, random.Random(1), []
    edges = net.edges
    for ingress in edges[:n]:
        t = time.perf_counter()
        corpora = {e: m.corpus(ingress, e) for e in edges if e != ingress}
        plan = IngressPlan(m.space, ingress, corpora, rng=rng, classes=m.part.bdd_of)
        for _ in range(32):
            plan.next_probe()
        out.append((time.perf_counter() - t) * 1e3)
    return round(median(out), 2)


def delivered_pairs(net: Net) -> int:
    sp = net.model.space
    return sum(net.model.reach(i, e) != sp.false for i in net.edges for e in net.edges if i != e)


def variant(share: float) -> str:
    """The system name of PAZZ with another random share: pazz_r50 for 0.5."""
    return f"pazz_r{round(share * 100)}"


def run_network(
    key: str, rules: int, runs: int, horizon: float, shares: tuple, dense: bool, say
) -> tuple[dict, list]:
    kind, size, _, paper_cpc = TOPOLOGIES[key]
    t = time.perf_counter()
    net = Net(key, kind, size, rules)
    scs = build_scenarios(net)
    say(f"{key}: model {net.build_s:.2f} s, {len(scs)} faults")
    seconds = WARMUP_S + SPACING_S * (runs - 1) + horizon
    faults = [s.fault for s in scs]
    streams = {"pazz": fuzz_stream(net, faults, seconds, seed=1)}
    stream = streams["pazz"]
    say(f"{key}: {stream['probes']} fuzzer probes in {time.perf_counter() - t:.0f} s")
    for share in shares:
        streams[variant(share)] = fuzz_stream(net, faults, seconds, seed=1, random_share=share)
        say(f"{key}: {variant(share)} stream done at {time.perf_counter() - t:.0f} s")
    if dense:
        streams["pazz_dense"] = fuzz_stream(net, faults, seconds, seed=1, shares=DEFAULT_SHARES)
        say(f"{key}: pazz_dense stream done at {time.perf_counter() - t:.0f} s")
    systems = SYSTEMS + tuple(variant(s) for s in shares) + (("pazz_dense",) if dense else ())
    ap = atpg_probes(net, seed=1)
    info = {
        "switches": len(net.wl.topo.switches),
        "rules": net.model.rule_count(),
        "classes": net.model.class_count(),
        "edge_ports": len(net.edges),
        "delivered_pairs": delivered_pairs(net),
        "build_s": round(net.build_s, 3),
        "paper_build_s": paper_cpc,
        "fuzzer_plan_ms": fuzzer_plan_ms(net),
        "fuzzer_probes": stream["probes"],
        "fuzzer_sent_by_group": {k: _groups(v["sent_by_area"]) for k, v in streams.items()},
        "atpg_probes": len(ap),
        "faults": [],
    }
    rows = []
    for sc in scs:
        f = sc.fault
        pos = [j for j, (ing, h) in enumerate(ap) if f.match.contains(h, ing[1])]
        info["faults"].append(
            {
                "name": f.name,
                "family": f.family,
                "type": f.type,
                "match": str(f.match),
                "note": f.note,
                "entries": len(f.entries),
                "production_pps_in_match": round(sc.prod_rate, 3),
                "uniform_share": sc.uniform_p,
                "fuzzer_probes_in_match": {k: len(v["hits"][f.name]) for k, v in streams.items()},
                "atpg_probes_in_match": len(pos),
            }
        )
        for r in range(runs):
            t0 = WARMUP_S + SPACING_S * r
            for system in systems:
                for n in SAMPLINGS:
                    res = simulate(
                        sc,
                        system,
                        n,
                        t0,
                        horizon,
                        seed=zlib.crc32(f"{key} {f.name} {r} {system} {n}".encode()),
                        fuzz_hits=streams[system]["hits"][f.name] if system in streams else None,
                        atpg=(pos, len(ap), FUZZ_PPS / 2, ap),
                    )
                    rows.append(
                        {
                            "net": key,
                            "fault": f.name,
                            "family": f.family,
                            "type": f.type,
                            "system": system,
                            "sampling": n,
                            "run": r,
                            "detect_s": res["detect_s"],
                            "verdicts": res["verdicts"],
                            "samples": res["samples"],
                        }
                    )
    info["wall_s"] = round(time.perf_counter() - t, 1)
    say(f"{key}: done in {info['wall_s']} s")
    return info, rows


def _groups(by_area: dict) -> dict:
    out: dict[str, int] = {}
    for area, n in by_area.items():
        g = area.split()[0] if area else "other"
        out[g] = out.get(g, 0) + n
    return out


def stats(values: list, horizon: float) -> dict:
    """Median, p90, max of detection times, undetected runs counting as infinite."""
    xs = sorted(math.inf if v is None else v for v in values)
    fmt = lambda v: None if v == math.inf else round(v, 1)  # noqa: E731
    return {
        "runs": len(xs),
        "detected": sum(v != math.inf for v in xs),
        "median_s": fmt(pct(xs, 50)) if xs else None,
        "p90_s": fmt(pct(xs, 90)) if xs else None,
        "max_s": fmt(xs[-1]) if xs else None,
        "within_60_s": round(sum(v <= 60 for v in xs) / len(xs), 3) if xs else None,
        "within_120_s": round(sum(v <= 120 for v in xs) / len(xs), 3) if xs else None,
    }


def summarize(rows: list, horizon: float) -> dict:
    out: dict = {}
    systems = list(dict.fromkeys(r["system"] for r in rows))
    groups = {
        "all28": ("p", "a"),
        "type_p": ("p",),
        "type_a": ("a",),
        "fat_finger": ("hard",),
        "heldout": ("held",),
    }
    for key in TOPOLOGIES:
        for n in SAMPLINGS:
            for system in systems:
                sel = [r for r in rows if r["net"] == key and r["sampling"] == n]
                sel = [r for r in sel if r["system"] == system]
                if not sel:
                    continue
                d = out.setdefault(key, {}).setdefault(f"1/{n}", {}).setdefault(system, {})
                for g, types in groups.items():
                    d[g] = stats([r["detect_s"] for r in sel if r["type"] in types], horizon)
    for per in out.values():
        for by_sys in per.values():
            for s in [s for s in systems if s.startswith("pazz")]:
                pz = by_sys[s]["all28"]["median_s"]
                pre = "" if s == "pazz" else f"{s}_"
                for b in ("random", "atpg"):
                    bm = by_sys[b]["all28"]["median_s"]
                    by_sys[f"{pre}speedup_median_vs_{b}"] = (
                        None if pz in (None, 0) else (math.inf if bm is None else round(bm / pz, 2))
                    )
    return out


def _say(verbose: bool, msg: str) -> None:
    if verbose:
        print(msg, file=sys.stderr, flush=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--networks", default=",".join(TOPOLOGIES))
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--horizon", type=float, default=240.0, help="seconds after injection")
    ap.add_argument("--rules", type=int, default=None, help="override every rule count")
    ap.add_argument(
        "--random-shares",
        default=None,
        help="PAZZ variants with these fuzzer random shares, comma-separated "
        "('' for none; default 0.5, none with --quick)",
    )
    ap.add_argument(
        "--dense",
        action="store_true",
        help="also PAZZ with the fuzzer's shares for dense sampling (pazz_dense)",
    )
    ap.add_argument("--jobs", type=int, default=1, help="networks simulated in parallel")
    ap.add_argument("--quick", action="store_true", help="grid4, 1,000 rules, 2 runs, 30 s")
    ap.add_argument("--out", help="write the JSON here too")
    ap.add_argument("--figures", help="draw the figures (PNG and SVG) into this directory")
    ap.add_argument("--verbose", "-v", action="store_true")
    args = ap.parse_args(argv)
    if args.quick:
        args.networks, args.runs, args.horizon, args.rules = "grid4", 2, 30.0, 1000
    say = functools.partial(_say, args.verbose)  # picklable, for --jobs
    if args.random_shares is None:
        args.random_shares = "" if args.quick else "0.5"
    try:
        shares = tuple(float(x) for x in args.random_shares.split(",") if x.strip())
    except ValueError:
        ap.error(f"--random-shares: not a list of numbers: {args.random_shares!r}")
    if not all(0 < x < 1 for x in shares):
        ap.error(f"--random-shares: every share must be in (0, 1): {args.random_shares!r}")
    keys = args.networks.split(",")
    for key in keys:
        if key not in TOPOLOGIES:
            ap.error(f"--networks: unknown network {key!r} (known: {', '.join(TOPOLOGIES)})")
    t0 = time.perf_counter()
    jobs = [
        (k, args.rules or TOPOLOGIES[k][2], args.runs, args.horizon, shares, args.dense)
        for k in keys
    ]
    if args.jobs > 1 and len(keys) > 1:
        # Biggest first, so that the last network to start is a small one.
        order = sorted(jobs, key=lambda j: -j[1])
        with ProcessPoolExecutor(min(args.jobs, len(keys))) as pool:
            futs = {j[0]: pool.submit(run_network, *j, say) for j in order}
            done = {k: f.result() for k, f in futs.items()}
    else:
        done = {j[0]: run_network(*j, say) for j in jobs}
    nets = {k: done[k][0] for k in keys}
    rows = [r for k in keys for r in done[k][1]]
    report = {
        "bench": "paper",
        "config": {
            "production_pps": PROD_PPS,
            "fuzz_pps": FUZZ_PPS,
            "samplings": [f"1/{n}" for n in SAMPLINGS],
            "poll_s": POLL_S,
            "runs": args.runs,
            "horizon_s": args.horizon,
            "warmup_s": WARMUP_S,
            "spacing_s": SPACING_S,
            "corroborate": 2,
            "random_shares": list(shares),
            "dense": args.dense,
            "quick": args.quick,
        },
        "paper": {k: list(v) if isinstance(v, tuple) else v for k, v in PAPER.items()},
        "networks": nets,
        "summary": summarize(rows, args.horizon),
        "runs": rows,
        "wall_s": round(time.perf_counter() - t0, 1),
        "rss_mb": rss_mb(),
    }
    if args.figures:
        from bench.paperplot import draw

        report["figures"] = draw(report, args.figures)
    if args.out:  # FILE.json.gz: gzip'd (every run is in it)
        opener = gzip.open if args.out.endswith(".gz") else open
        with opener(args.out, "wt") as fh:
            fh.write(json.dumps(report, separators=(",", ":")) + "\n")
    print(json.dumps({k: v for k, v in report.items() if k != "runs"}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
