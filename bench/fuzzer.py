"""Benchmark of the fuzzer (fuzzer/) on the paper's topologies. Prints one JSON object.

    python bench/fuzzer.py --json                       # fat-tree k=4, 100k rules
    python bench/fuzzer.py --effect --faults 20 --budget 50000 --json

corpus_to_plan_ms  from the corpora of one ingress (S_i, S_e for every exit, as
                   model.corpus returns them) to its first batch of `--batch` probes:
                   areas, samplers, boundary sets (median over ingresses), after a FlowMod
                   that deletes a route and one that adds it back
corpus_to_plan_ms_new_route   the same after a FlowMod that adds a route to a /24 nobody
                   routed before (the ingress's covered set changes: nothing to reuse)
probes_per_s       crafting throughput: canonical headers to Ethernet frames with checksums
plan_probes_per_s  planning throughput in steady state (Fuzzer.next_probes + record)
rss_mb             peak resident size of the process (model included)
--effect           probes to first detection of injected faults on the reference data
                   plane, fuzzer vs uniform random probing (pazzlab.sim); median and p90
                   per fault kind, misses counted as the budget
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import median, pct, readd_flowmods, rss_mb  # noqa: E402
from cpc.model import Model  # noqa: E402
from cpc.rules import FlowMod, Match  # noqa: E402
from fuzzer.craft import Crafter  # noqa: E402
from fuzzer.engine import Fuzzer  # noqa: E402
from fuzzer.hspace import CountCache, Sampler, valid_headers  # noqa: E402
from fuzzer.plan import IngressPlan, shares_with_delivered  # noqa: E402
from pazzdata.workloads import generate  # noqa: E402
from pazzlab.sim import first_detections, fuzzer_stream, make_faults, uniform_stream  # noqa: E402


def covered_of(corpora):
    """covered(i): the union of S_i over the exits."""
    out = None
    for s_i, _ in corpora.values():
        out = s_i if out is None else out | s_i
    return out


def new_route(e, k: int) -> FlowMod:
    """A FlowMod that adds a route to 172.16.k.0/24 (outside the generated 10/8), with the
    next hops of entry e, on e's switch."""
    match = Match.build(
        {"eth_type": (0x0800, 0xFFFF), "ipv4_dst": (0xAC100000 | k << 8, 0xFFFFFF00)}
    )
    return FlowMod("add", e.dpid, 0, 1000, match, e.instructions, rule_id=900_000 + k)


def effect(model, wl, nfaults: int, budget: int, seeds: int, random_share: float) -> dict:
    out = {}
    for kind in ("near", "wide"):
        faults = make_faults(wl, nfaults, kind)
        row = {}
        for name in ("fuzzer", "uniform"):
            res = []
            for seed in range(1, seeds + 1):
                stream = (
                    fuzzer_stream(model, seed, random_share=random_share)
                    if name == "fuzzer"
                    else uniform_stream(model, seed)
                )
                res += first_detections(model, wl, faults, stream, budget)
            vals = [x if x is not None else budget for x in res]
            row[name] = {
                "median": pct(vals, 50),
                "p90": pct(vals, 90),
                "missed": sum(x is None for x in res),
                "trials": len(res),
            }
        row["ratio_median"] = round(row["uniform"]["median"] / row["fuzzer"]["median"], 2)
        row["ratio_p90"] = round(row["uniform"]["p90"] / row["fuzzer"]["p90"], 2)
        out[kind] = row
    return out


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--topology", choices=["fattree", "grid"], default="fattree")
    ap.add_argument("--k", type=int, default=4)
    ap.add_argument("--switches", type=int, default=16, choices=[4, 9, 16])
    ap.add_argument("--rules", type=int, default=100_000)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--craft", type=int, default=50_000, help="frames crafted for probes_per_s")
    ap.add_argument("--effect", action="store_true", help="run the detection simulation")
    ap.add_argument("--faults", type=int, default=20, help="faults per kind (--effect)")
    ap.add_argument("--budget", type=int, default=50_000, help="probes per trial (--effect)")
    ap.add_argument("--seeds", type=int, default=2, help="probe streams per generator")
    ap.add_argument(
        "--random-share",
        type=float,
        default=None,
        help="the random group's share (default: the fuzzer's)",
    )
    ap.add_argument(
        "--delivered-share",
        type=float,
        default=0.0,
        help="fuzz.delivered_share (pazzd's default with marked probes: 0.2); the plans then"
        " have an area per distinct match and the mask edges, and matches_ms times listing"
        " the matches after an update, as the fuzzer does once per model version",
    )
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    shares = shares_with_delivered(args.delivered_share) if args.delivered_share else None
    size = args.k if args.topology == "fattree" else math.isqrt(args.switches)
    wl = generate(args.topology, size, args.rules, seed=args.seed, rule_ids=True)
    t0 = time.perf_counter()
    model = Model(wl.topo)
    model.add_entries(wl.entries, wl.groups)
    build_s = time.perf_counter() - t0
    space = model.space
    valid_headers(space)
    edges = wl.topo.edge_ports()
    rng = random.Random(args.seed)

    # Corpus -> first batch, per ingress (corpora computed beforehand, as the model gives
    # them). Cold: a fresh count cache. Warm: the fuzzer's cache after a model update (a
    # route deleted and added back), the case of a running fuzzer getting a new corpus.
    plan_cold, plan_warm, plan_new, corpus_ms = [], [], [], []
    routes = [e for e in wl.entries if e.table == 0 and list(e.instructions.outputs())]
    classes = model.part.bdd_of  # the class areas, as the Fuzzer builds its plans
    cache = CountCache(space)
    matches_ms: list[float] = []
    # the distinct matches as the fuzzer keeps them (followed from each update's changes)
    keeper = Fuzzer(model, seed=args.seed, shares=shares) if shares else None

    def plan_of(corpora):
        kw = {}
        if shares:
            t = time.perf_counter()
            kw["matches"] = keeper._match_bdds()
            matches_ms.append((time.perf_counter() - t) * 1e3)
            kw["shares"] = shares
        return IngressPlan(space, ingress, corpora, rng=rng, cache=cache, classes=classes, **kw)

    for ingress in edges[: min(len(edges), 8)]:
        t = time.perf_counter()
        corpora = {e: model.corpus(ingress, e) for e in edges if e != ingress}
        corpus_ms.append((time.perf_counter() - t) * 1e3)
        t = time.perf_counter()
        plan = plan_of(corpora)
        batch = [plan.next_probe() for _ in range(args.batch)]
        plan_cold.append((time.perf_counter() - t) * 1e3)
        assert all(b is not None for b in batch)
        e = rng.choice(wl.entries)
        for fm in readd_flowmods(e):
            model.apply(fm)
        corpora = {e: model.corpus(ingress, e) for e in edges if e != ingress}
        t = time.perf_counter()
        plan = plan_of(corpora)
        batch = [plan.next_probe() for _ in range(args.batch)]
        plan_warm.append((time.perf_counter() - t) * 1e3)
        # a route out of another host port of the ingress's switch: covered(i) grows
        local = [
            r
            for r in routes
            if r.dpid == ingress[0]
            and any((r.dpid, p) in edges and p != ingress[1] for p in r.instructions.outputs())
        ]
        if local:  # (none where the ingress is its switch's only host port)
            model.apply(new_route(rng.choice(local), len(plan_new)))
            before = covered_of(corpora)
            corpora = {e: model.corpus(ingress, e) for e in edges if e != ingress}
            assert covered_of(corpora) != before, "the new route did not change covered(i)"
            t = time.perf_counter()
            plan = plan_of(corpora)
            batch = [plan.next_probe() for _ in range(args.batch)]
            plan_new.append((time.perf_counter() - t) * 1e3)
        cache = CountCache(space)

    # Crafting throughput over uniform valid headers (all kinds of frames).
    smp = Sampler(space, valid_headers(space))
    hs = [smp.uniform(rng) for _ in range(1000)]
    hs += [
        dict(h, eth_type=0x0800, ip_proto=p)
        for h, p in zip(hs[:300], [6, 17, 1] * 100, strict=False)
    ]
    crafter = Crafter(mark=True)  # the fuzzer's own: every probe carries the marked shim
    crafter.frame(hs[0])
    t = time.perf_counter()
    n = 0
    while n < args.craft:
        for i, h in enumerate(hs):
            crafter.frame(h, i)
        n += len(hs)
    probes_per_s = n / (time.perf_counter() - t)

    # Planning throughput in steady state (after every ingress has its plan).
    fz = Fuzzer(model, seed=args.seed, subscribe=False, shares=shares)
    fz.record(fz.next_probes(4 * len(edges)))
    t = time.perf_counter()
    m = 0
    while m < 5000:
        ps = fz.next_probes(64)
        fz.record(ps)
        m += len(ps)
    plan_pps = m / (time.perf_counter() - t)

    out = {
        "topology": args.topology if args.topology == "fattree" else f"grid{args.switches}",
        "rules": model.rule_count(),
        "classes": model.class_count(),
        "build_s": round(build_s, 2),
        "pairs": len(edges) * (len(edges) - 1),
        "corpus_ms_per_ingress": round(median(corpus_ms), 2),
        "corpus_to_plan_ms": round(median(plan_warm), 3),
        "corpus_to_plan_ms_max": round(max(plan_warm), 3),
        "corpus_to_plan_ms_new_route": round(median(plan_new), 3) if plan_new else None,
        "corpus_to_plan_ms_cold": round(median(plan_cold), 3),
        "delivered_share": args.delivered_share,
        "matches_ms": round(median(matches_ms), 2) if matches_ms else None,
        "probes_per_s": round(probes_per_s),
        "plan_probes_per_s": round(plan_pps),
        "rss_mb": rss_mb(),
    }
    if args.effect:
        out["effect"] = effect(model, wl, args.faults, args.budget, args.seeds, args.random_share)
        out["effect_budget"] = args.budget
        out["rss_mb"] = rss_mb()
    print(json.dumps(out) if args.json else json.dumps(out, indent=2))
    return out


if __name__ == "__main__":
    main()
