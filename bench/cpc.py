"""Benchmark of the model (cpc/) on the paper's topologies. Prints one JSON object.

    python bench/cpc.py --topology fattree --k 4 --rules 100000 --json
    python bench/cpc.py --topology grid --switches 16 --rules 60000 --json

build_s      full model and reachability from nothing (rules already parsed)
update_us_*  one FlowMod (delete_strict of a random entry, then its add), incrementally
lookup_us_*  model.allows(egress, header, verify_port, verify_rule): the tester's check of
             one sampled report (tags from the model's trace of a random ingress)
expected_us_p50  model.expected(egress, header): every alternative, as a fault's record
             holds them
corpus_ms    model.corpus(ingress, egress) for one pair (median over random pairs)
update_us_p50_after_traces  (--traces N) the same updates again after N model.trace calls,
             as a long-running pazzd makes them (pazzctl trace, localization, critical
             flows); with update_us_p50_before_traces, measured right before the traces
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
from pazzdata.workloads import WIDE_ACL_COOKIE, generate  # noqa: E402


def readd(model: Model, entries) -> list[float]:
    """Delete each entry, then add it back; the time of each FlowMod in µs."""
    out = []
    for e in entries:
        for fm in readd_flowmods(e):
            t = time.perf_counter()
            model.apply(fm)
            out.append((time.perf_counter() - t) * 1e6)
    return out


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--topology", choices=["fattree", "grid"], default="fattree")
    ap.add_argument("--k", type=int, default=4, help="fat-tree arity")
    ap.add_argument("--switches", type=int, default=16, choices=[4, 9, 16], help="grid size")
    ap.add_argument("--rules", type=int, default=100_000)
    ap.add_argument("--updates", type=int, default=1000)
    ap.add_argument("--lookups", type=int, default=5000)
    ap.add_argument(
        "--no-rule-ids", action="store_true", help="entries without pazzd's unique rule IDs"
    )
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument(
        "--wide-acls",
        choices=["inline", "stage"],
        help="ACL lines over every destination at the edge, in the routing table or in a "
        "table-0 stage before it (pazzdata.workloads.generate)",
    )
    ap.add_argument(
        "--acls", type=int, default=8, help="ACL lines per host (wide: per edge switch)"
    )
    ap.add_argument("--traces", type=int, default=0, help="traces between two update runs")
    ap.add_argument("--json", action="store_true", help="print only the JSON object")
    args = ap.parse_args(argv)
    rng = random.Random(args.seed)
    size = args.k if args.topology == "fattree" else math.isqrt(args.switches)
    wl = generate(
        args.topology,
        size,
        args.rules,
        seed=args.seed,
        rule_ids=not args.no_rule_ids,
        acls=args.acls,
        wide_acls=args.wide_acls,
    )

    t0 = time.perf_counter()
    model = Model(wl.topo)
    model.add_entries(wl.entries, wl.groups)
    build_s = time.perf_counter() - t0

    # Updates: delete a random entry, then add it back; both are timed.
    upd = readd(model, rng.sample(wl.entries, min(len(wl.entries), args.updates // 2)))
    wide = {}
    if args.wide_acls:  # the wide lines alone: each overlaps every route of its switch
        lines = [e for e in wl.entries if e.cookie == WIDE_ACL_COOKIE and e.priority]
        acl = readd(model, rng.sample(lines, min(len(lines), 100)))
        wide = {
            "wide_acls": args.wide_acls,
            "acl_update_us_p50": round(pct(acl, 50), 1),
            "acl_update_us_avg": round(sum(acl) / len(acl), 1),
            "partition": "two labels" if model.part.factored else "one label",
        }
    traced = {}
    if args.traces:
        again = rng.sample(wl.entries, min(len(wl.entries), args.updates // 2))
        traced["update_us_p50_before_traces"] = round(pct(readd(model, again), 50), 1)
        nets, ingresses = sorted(wl.prefixes), wl.topo.edge_ports()
        t = time.perf_counter()
        for _ in range(args.traces):
            h = {
                "eth_type": 0x0800,
                "ipv4_dst": rng.choice(nets) | rng.randrange(1, 255),
                "ipv4_src": 7,
                "ip_proto": 6,
                "tp_dst": 80,
                "tp_src": 1234,
            }
            model.trace(rng.choice(ingresses), h)
        traced["trace_us_avg"] = round((time.perf_counter() - t) / args.traces * 1e6, 1)
        traced["update_us_p50_after_traces"] = round(pct(readd(model, again), 50), 1)

    # Lookups: a header of a random prefix sent in at a random edge port, judged where it
    # leaves the network with the tags its trace says the switch writes (the tester's
    # question); and the full list of alternatives (what a fault's record holds).
    nets = sorted(wl.prefixes)
    ingresses = wl.topo.edge_ports()
    samples = []
    while len(samples) < args.lookups:
        net = rng.choice(nets)
        h = {
            "eth_type": 0x0800,
            "ipv4_dst": net | rng.randrange(1, 255),
            "ipv4_src": rng.choice(nets) | 7,
            "ip_proto": 6,
            "tp_dst": 80,
            "tp_src": rng.randrange(1024, 65535),
        }
        out = [d for d in model.trace(rng.choice(ingresses), h) if d.kind == "egress"]
        if out:
            d = rng.choice(out)
            samples.append((d.egress, h, d.verify_port, d.verify_rule))
    look, full = [], []
    answered = 0
    for egress, h, vp, vr in samples:
        t = time.perf_counter()
        answered += model.allows(egress, h, vp, vr)
        look.append((time.perf_counter() - t) * 1e6)
        t = time.perf_counter()
        model.expected(egress, h)
        full.append((time.perf_counter() - t) * 1e6)

    edges = wl.topo.edge_ports()
    corp = []
    for _ in range(20):
        i, e = rng.sample(edges, 2)
        t = time.perf_counter()
        model.corpus(i, e)
        corp.append((time.perf_counter() - t) * 1e3)

    out = {
        "topology": args.topology if args.topology == "fattree" else f"grid{args.switches}",
        "switches": len(wl.topo.switches),
        "rules": model.rule_count(),
        "rule_ids": not args.no_rule_ids,
        "classes": model.class_count(),
        "build_s": round(build_s, 3),
        "updates": len(upd),
        "update_us_p50": round(pct(upd, 50), 1),
        "update_us_p99": round(pct(upd, 99), 1),
        "update_us_avg": round(sum(upd) / len(upd), 1),
        "lookup_us_p50": round(pct(look, 50), 2),
        "lookup_us_p99": round(pct(look, 99), 2),
        "expected_us_p50": round(pct(full, 50), 2),
        "lookups_answered": answered / len(look),
        "corpus_ms": round(median(corp), 3),
        "loops": model.loop_count(),
        **wide,
        **traced,
        "rss_mb": rss_mb(),
    }
    print(json.dumps(out) if args.json else json.dumps(out, indent=2))
    return out


if __name__ == "__main__":
    main()
