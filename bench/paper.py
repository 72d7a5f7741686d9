"""The PAZZ paper's evaluation at its rates, simulated with the real fuzzer and tester.

For each of the paper's topologies (2x2, 3x3, 4x4 grids and the k=4 fat-tree, with the
rule counts of its Table II) this builds the model, injects 28 faults (10 Type-p, 18
Type-a; pazzlab.paperfaults), 6 fat-finger routes (in the mix the targets count) and 6
held-out ones (apart), and runs each fault --runs times (different injection moments in
one fuzzer run, different sampling draws) in two settings (every pair of edge ports
probed, and the paper's single source-destination pair with faults of its own), two
observation modes (U: the paper's, every packet 1/N at its exit; P: probes reported 1/1,
production 1/N, per-hop samples judged) and for each prober (pazzlab.papersim): pazz (the
fuzzer), random (the paper's baseline), acl_uncovered (uniform over the model's ACL deny
sets and its uncovered space), and PAZZ with other random shares of the fuzzer
(--random-shares; pazz_r50 for 0.5), at sFlow sampling 1/100 and 1/1000. The fuzzer's
stream of one network and setting is shared by its faults (they are hidden from the model
it plans on). pazz takes the shares pazzd takes: in mode U those for the sFlow rate
(sparse), in mode P those for sampling 1 with pazzd's delivered share (every probe is
reported, and the switches drop probes at the exit, so pazzd probes delivered space too;
pazzd.wiring.probe_sampling, delivered_share), so it has a stream per mode; --jobs
simulates networks in parallel processes.
Prints one JSON object (--out FILE writes it too); --figures DIR draws the figures
(bench/paperplot.py, the `pazz[eval]` extra).

    python bench/paper.py --jobs 2 --out docs/evaluation/paper.json.gz --figures docs/evaluation
    python bench/paper.py --quick --out /tmp/q.json --figures /tmp/fig   # small, fast
"""

from __future__ import annotations

import argparse
import dataclasses
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
from fuzzer.plan import (  # noqa: E402
    DEFAULT_SHARES,
    DELIVERED_SHARE_MARKED,
    IngressPlan,
    shares_with_delivered,
)
from pazzlab.paperfaults import paper_pair  # noqa: E402
from pazzlab.papersim import (  # noqa: E402
    FUZZ_PPS,
    MODES,
    POLL_S,
    PROD_PPS,
    SYSTEMS,
    Net,
    Scenario,
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
BASELINES = ("random", "acl_uncovered")
SAMPLINGS = (100, 1000)
SETTINGS = ("all", "pair")  # every pair of edge ports probed; the paper's single pair
WITHIN = (10, 60, 120, 240)
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


def _stream(streams: dict, system: str, mode: str) -> str:
    """The fuzz stream a prober uses in a mode: pazz's own for mode P, if there is one."""
    return f"{system}/{mode}" if f"{system}/{mode}" in streams else system


def variant(share: float) -> str:
    """The system name of PAZZ with another random share: pazz_r50 for 0.5."""
    return f"pazz_r{round(share * 100)}"


def run_network(
    key: str,
    rules: int,
    runs: int,
    horizon: float,
    shares: tuple,
    dense: bool,
    say,
    modes: tuple = MODES,
    systems: tuple = SYSTEMS,
    settings: tuple = SETTINGS,
    samplings: tuple = SAMPLINGS,
    clean_runs: int = 0,
) -> tuple[dict, list]:
    kind, size, _, paper_cpc = TOPOLOGIES[key]
    t = time.perf_counter()
    net = Net(key, kind, size, rules)
    say(f"{key}: model {net.build_s:.2f} s")
    info = {
        "switches": len(net.wl.topo.switches),
        "rules": net.model.rule_count(),
        "classes": net.model.class_count(),
        "edge_ports": len(net.edges),
        "delivered_pairs": delivered_pairs(net),
        "build_s": round(net.build_s, 3),
        "paper_build_s": paper_cpc,
        "fuzzer_plan_ms": fuzzer_plan_ms(net),
        "settings": {},
    }
    rows = []
    for setting in settings:
        pair = paper_pair(net.wl) if setting == "pair" else None
        scs = build_scenarios(net, pair=pair)
        fuzzer_pairs = [(net.wl.hosts[pair[0]], net.wl.hosts[pair[1]])] if pair else None
        seconds = WARMUP_S + SPACING_S * (runs - 1) + horizon
        faults = [s.fault for s in scs]
        names = [s for s in systems if s.startswith("pazz")]
        names += [variant(x) for x in shares] + (["pazz_dense"] if dense else [])
        streams = {}
        for name in dict.fromkeys(names):
            extra = {"shares": DEFAULT_SHARES} if name == "pazz_dense" else {}
            if name.startswith("pazz_r"):
                extra = {"random_share": int(name[6:]) / 100}
            streams[name] = fuzz_stream(net, faults, seconds, seed=1, pairs=fuzzer_pairs, **extra)
            say(f"{key} {setting}: {name} stream done at {time.perf_counter() - t:.0f} s")
        probers = [s for s in systems if not s.startswith("pazz")] + list(streams)
        if "pazz" in streams and "P" in modes:
            # In mode P every probe is reported, and pazzd then takes the fuzzer's shares
            # for sampling 1 with its delivered share (pazzd.wiring.probe_sampling,
            # delivered_share): its own stream.
            p_shares = shares_with_delivered(DELIVERED_SHARE_MARKED, 1)
            streams["pazz/P"] = fuzz_stream(
                net, faults, seconds, seed=1, pairs=fuzzer_pairs, shares=p_shares
            )
        st = {
            "pair": list(pair) if pair else None,
            "fuzzer_sent_by_group": {k: _groups(v["sent_by_area"]) for k, v in streams.items()},
            "fuzzer_probes": {k: v["probes"] for k, v in streams.items()},
            "faults": [],
            "clean": {"runs": 0, "false_alarms": []},
        }
        info["settings"][setting] = st
        for sc in scs:
            f = sc.fault
            st["faults"].append(
                {
                    "name": f.name,
                    "family": f.family,
                    "type": f.type,
                    "match": str(f.match),
                    "note": f.note,
                    "entries": len(f.entries),
                    "production_pps_in_match": round(sc.prod_rate, 3),
                    "uniform_share": sc.uniform_p,
                    "deny_share": sc.deny_p,
                    "uncovered_share": sc.uncovered_p,
                    "fuzzer_probes_in_match": {
                        k: len(v["hits"][f.name]) for k, v in streams.items()
                    },
                }
            )
            cells = (runs, modes, probers, samplings, streams, horizon)
            for r, mode, system, n, res in _runs(sc, f"{key} {setting}", *cells):
                rows.append(
                    {
                        "net": key,
                        "setting": setting,
                        "mode": mode,
                        "fault": f.name,
                        "family": f.family,
                        "type": f.type,
                        "system": system,
                        "sampling": n,
                        "run": r,
                        "detect_s": res["detect_s"],
                        "first_s": res["first_s"],
                        "by_hop": res["by_hop"],
                        "verdicts": res["verdicts"],
                        "samples": res["samples"],
                        "seen": res["seen"],
                    }
                )
            if clean_runs:
                clean_control(sc, clean_runs, horizon, modes, probers, samplings, streams, st)
            say(f"{key} {setting}: {f.name} done at {time.perf_counter() - t:.0f} s")
    info["wall_s"] = round(time.perf_counter() - t, 1)
    say(f"{key}: done in {info['wall_s']} s")
    return info, rows


def clean_control(sc, runs, horizon, modes, probers, samplings, streams, st) -> None:
    """The fault's match with no hidden entry, simulated as the fault was: every fault the
    tester opens there is a false alarm (recorded in st["clean"])."""
    ctl = Scenario(
        sc.net, dataclasses.replace(sc.fault, entries=[]), probe_ingresses=sc.probe_ingresses
    )
    cells = (runs, modes, probers, samplings, streams, horizon)
    for r, mode, system, n, res in _runs(ctl, "clean", *cells):
        st["clean"]["runs"] += 1
        if res["detect_s"] is not None:
            st["clean"]["false_alarms"].append(
                {"match_of": sc.fault.name, "run": r, "mode": mode, "system": system}
                | {"sampling": n, "after_s": res["detect_s"]}
                | {"verdicts": res["verdicts"]}
            )


def _runs(sc, tag, runs, modes, probers, samplings, streams, horizon):
    """(run, mode, prober, sampling, result) of every cell of one scenario, each seeded by
    its tag, the run's injection moment WARMUP_S + SPACING_S * run."""
    name = sc.fault.name
    for r in range(runs):
        t0 = WARMUP_S + SPACING_S * r
        for mode in modes:
            for system in probers:
                for n in samplings:
                    res = simulate(
                        sc,
                        system,
                        n,
                        t0,
                        horizon,
                        seed=zlib.crc32(f"{tag} {name} {r} {mode} {system} {n}".encode()),
                        fuzz_hits=streams[_stream(streams, system, mode)]["hits"][name]
                        if system in streams
                        else None,
                        mode=mode,
                    )
                    yield r, mode, system, n, res


def _groups(by_area: dict) -> dict:
    out: dict[str, int] = {}
    for area, n in by_area.items():
        g = area.split()[0] if area else "other"
        out[g] = out.get(g, 0) + n
    return out


def stats(values: list, horizon: float) -> dict:
    """Median, mean, p90, max of detection times and the shares found within 10, 60, 120
    and 240 s; a run not found counts as infinite (the mean counts it at the horizon, the
    paper's per-fault means have no misses)."""
    xs = sorted(math.inf if v is None else v for v in values)
    if not xs:
        return {"runs": 0}
    fmt = lambda v: None if v == math.inf else round(v, 1)  # noqa: E731
    return {
        "runs": len(xs),
        "detected": sum(v != math.inf for v in xs),
        "median_s": fmt(pct(xs, 50)),
        "mean_s": round(sum(min(v, horizon) for v in xs) / len(xs), 1),
        "p90_s": fmt(pct(xs, 90)),
        "max_s": fmt(xs[-1]),
        **{f"within_{w}_s": round(sum(v <= w for v in xs) / len(xs), 3) for w in WITHIN},
    }


GROUPS = {
    "mix": ("p", "a", "hard"),  # the 28 and the fat-fingers: the targets
    "all28": ("p", "a"),
    "type_p": ("p",),
    "type_a": ("a",),
    "fat_finger": ("hard",),
    "heldout": ("held",),
}


def summarize(rows: list, horizon: float) -> dict:
    """summary[net][setting][mode]["1/N"][system]: the groups' stats, each family's, and
    each fault's (mean, median, found); with each prober's speed-up over the baselines."""
    out: dict = {}
    cells: dict = {}
    for r in rows:
        key = (r["net"], r["setting"], r["mode"], f"1/{r['sampling']}", r["system"])
        cells.setdefault(key, []).append(r)
    for (net, setting, mode, samp, system), sel in cells.items():
        d = {
            g: stats([r["detect_s"] for r in sel if r["type"] in ts], horizon)
            for g, ts in GROUPS.items()
        }
        fams: dict = {}
        per: dict = {}
        for r in sel:
            fams.setdefault(r["family"], []).append(r["detect_s"])
            per.setdefault(r["fault"], []).append(r["detect_s"])
        d["families"] = {k: stats(v, horizon) for k, v in fams.items()}
        d["faults"] = {
            k: {x: stats(v, horizon)[x] for x in ("detected", "mean_s", "median_s")}
            for k, v in per.items()
        }
        out.setdefault(net, {}).setdefault(setting, {}).setdefault(mode, {}).setdefault(samp, {})[
            system
        ] = d
    for per_setting in out.values():
        for per_mode in per_setting.values():
            for per_samp in per_mode.values():
                for by_sys in per_samp.values():
                    for system in [s for s in by_sys if s.startswith("pazz")]:
                        d = by_sys[system]
                        for b in BASELINES:
                            if b not in by_sys:
                                continue
                            d[f"speedup_vs_{b}"] = {
                                g: _ratio(by_sys[b][g].get("median_s"), d[g].get("median_s"))
                                for g in ("mix", "all28")
                            } | {
                                f: _ratio(by_sys[b]["families"][f]["median_s"], st["median_s"])
                                for f, st in d["families"].items()
                                if f in by_sys[b]["families"]
                            }
    return out


def _ratio(base, ours):
    """base / ours of two medians (None: not found by half the runs); None when ours is."""
    if ours is None:
        return None
    if base is None:
        return math.inf
    return round(base / ours, 2) if ours > 0 else math.inf


def _say(verbose: bool, msg: str) -> None:
    if verbose:
        print(msg, file=sys.stderr, flush=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--networks", default=",".join(TOPOLOGIES))
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--horizon", type=float, default=600.0, help="seconds after injection")
    ap.add_argument("--modes", default=",".join(MODES), help="observation modes: U, P")
    ap.add_argument("--systems", default=",".join(SYSTEMS), help="probers")
    ap.add_argument("--settings", default=",".join(SETTINGS), help="all (every pair), pair")
    ap.add_argument("--samplings", default=",".join(map(str, SAMPLINGS)), help="N of 1/N")
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
    ap.add_argument(
        "--clean-runs",
        type=int,
        default=None,
        help="runs of each fault's match with no hidden entry, per mode, prober and "
        "sampling: every fault opened there is a false alarm (default 2; 1 with --quick)",
    )
    ap.add_argument("--jobs", type=int, default=1, help="networks simulated in parallel")
    ap.add_argument("--quick", action="store_true", help="grid4, 1,000 rules, 2 runs, 30 s")
    ap.add_argument("--out", help="write the JSON here too")
    ap.add_argument("--figures", help="draw the figures (PNG and SVG) into this directory")
    ap.add_argument("--verbose", "-v", action="store_true")
    args = ap.parse_args(argv)
    if args.quick:
        args.networks, args.runs, args.horizon, args.rules = "grid4", 2, 30.0, 1000
    if args.clean_runs is None:
        args.clean_runs = 1 if args.quick else 2
    lists = {}
    for name, known in (("modes", MODES), ("systems", SYSTEMS), ("settings", SETTINGS)):
        lists[name] = tuple(x for x in getattr(args, name).split(",") if x)
        bad = [x for x in lists[name] if x not in known]
        if bad or not lists[name]:
            ap.error(f"--{name}: unknown {bad or 'none given'} (known: {', '.join(known)})")
    try:
        samplings = tuple(int(x) for x in args.samplings.split(","))
    except ValueError:
        ap.error(f"--samplings: not a list of integers: {args.samplings!r}")
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
    rest = (lists["modes"], lists["systems"], lists["settings"], samplings, args.clean_runs)
    if args.jobs > 1 and len(keys) > 1:
        # Biggest first, so that the last network to start is a small one.
        order = sorted(jobs, key=lambda j: -j[1])
        with ProcessPoolExecutor(min(args.jobs, len(keys))) as pool:
            futs = {j[0]: pool.submit(run_network, *j, say, *rest) for j in order}
            done = {k: f.result() for k, f in futs.items()}
    else:
        done = {j[0]: run_network(*j, say, *rest) for j in jobs}
    nets = {k: done[k][0] for k in keys}
    rows = [r for k in keys for r in done[k][1]]
    report = {
        "bench": "paper",
        "config": {
            "production_pps": PROD_PPS,
            "fuzz_pps": FUZZ_PPS,
            "samplings": [f"1/{n}" for n in samplings],
            "modes": list(lists["modes"]),
            "systems": list(lists["systems"]),
            "settings": list(lists["settings"]),
            "poll_s": POLL_S,
            "runs": args.runs,
            "horizon_s": args.horizon,
            "warmup_s": WARMUP_S,
            "spacing_s": SPACING_S,
            "corroborate": 2,
            "random_shares": list(shares),
            "dense": args.dense,
            "quick": args.quick,
            "clean_runs": args.clean_runs,
        },
        "paper": {k: list(v) if isinstance(v, tuple) else v for k, v in PAPER.items()},
        "networks": nets,
        "summary": summarize(rows, args.horizon),
        "false_alarms": {
            k: {
                s: {"runs": v["clean"]["runs"], "opened": len(v["clean"]["false_alarms"])}
                for s, v in info["settings"].items()
            }
            for k, info in nets.items()
        },
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
