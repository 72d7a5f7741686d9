"""How every cost grows with the network: rules and switches, one fresh process per point.

Per point (a pazzdata.workloads grid or fat-tree): model build, update p50/p99 (a random
entry deleted and added back), `Model.expected` p50, the fuzzer's corpus-to-plan (the
corpora of one ingress to its first 32 probes, warm count cache), tester samples/s (sFlow
datagrams of 8 reports, decode to verdict, one process; tags from the model's own trace)
and peak RSS. Each series gets a least-squares slope in log-log space (cost ~ size^slope).

    python bench/scaling.py --out docs/evaluation/scaling.json --figures docs/evaluation
    python bench/scaling.py --quick          # small points only

Axes: rules 5k..1M on the k=4 fat-tree; switches: grids 2x2..8x8 and fat-trees k=4, 8, 16
at 100k rules (the generator needs one /24 per host, so k=16 gets about 336k).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

RULES = [5_000, 20_000, 100_000, 500_000, 1_000_000]
GRIDS = [2, 3, 4, 6, 8]
FATTREES = [4, 8, 16]
SWITCH_RULES = 100_000
METRICS = (
    "build_s",
    "update_us_p50",
    "update_us_p99",
    "expected_us_p50",
    "corpus_to_plan_ms",
    "tester_samples_per_s",
    "rss_mb",
)
BUDGET = {"update_us_p99": 10_000.0, "rss_mb": 4096.0}  # the daemon's budgets


def measure(kind: str, size: int, rules: int, updates: int, seconds: float) -> dict:
    from bench.common import median, pct, rss_mb
    from bench.cpc import readd
    from cpc.model import Model
    from fuzzer.hspace import CountCache
    from fuzzer.plan import IngressPlan
    from pazzdata.workloads import generate
    from tester.emit import ReferenceEmitter, synthetic_ifmap
    from tester.engine import Tester
    from tester.store import FaultStore

    rng = random.Random(1)
    wl = generate(kind, size, rules, rule_ids=True)
    t = time.perf_counter()
    model = Model(wl.topo)
    model.add_entries(wl.entries, wl.groups)
    build_s = time.perf_counter() - t
    upd = readd(model, rng.sample(wl.entries, updates))
    nets, edges = sorted(wl.prefixes), wl.topo.edge_ports()
    samples = []
    while len(samples) < 400:
        h = {
            "eth_type": 0x0800,
            "ipv4_dst": rng.choice(nets) | rng.randrange(1, 255),
            "ipv4_src": rng.choice(nets) | 7,
            "ip_proto": 6,
            "tp_dst": 80,
            "tp_src": rng.randrange(1024, 65535),
        }
        out = [d for d in model.trace_headers(rng.choice(edges), h) if d[0].kind == "egress"]
        if out:
            d, fh = rng.choice(out)
            samples.append((d.egress, fh, d.verify_port, d.verify_rule))
    exp = []
    for egress, h, _, _ in samples[:200]:
        t = time.perf_counter()
        model.expected(egress, h)
        exp.append((time.perf_counter() - t) * 1e6)
    cache, plan_ms = CountCache(model.space), []
    for k, ingress in enumerate(edges[:5]):
        corpora = {e: model.corpus(ingress, e) for e in edges if e != ingress}
        t = time.perf_counter()
        plan = IngressPlan(
            model.space, ingress, corpora, rng=rng, cache=cache, classes=model.part.bdd_of
        )
        for _ in range(32):
            plan.next_probe()
        if k:  # the first one fills the count cache
            plan_ms.append((time.perf_counter() - t) * 1e3)
    ports = [(d, p) for d in sorted(wl.topo.switches) for p in wl.topo.ports_of(d)]
    tester = Tester(model, FaultStore(":memory:"), synthetic_ifmap(ports), ports=ports)
    em = ReferenceEmitter(sampling_rate=1000)
    for s in samples:
        em.add(*s)
    dgs = em.flush(8)
    t0, n = time.perf_counter(), 0
    while time.perf_counter() - t0 < seconds:
        for d in dgs:
            tester.process_datagram(d, 0.0)
        n += 1
    el = time.perf_counter() - t0
    return {
        "kind": kind,
        "size": size,
        "switches": len(wl.topo.switches),
        "hosts": len(wl.hosts),
        "rules": model.rule_count(),
        "classes": model.class_count(),
        "build_s": round(build_s, 3),
        "update_us_p50": round(pct(upd, 50), 1),
        "update_us_p99": round(pct(upd, 99), 1),
        "expected_us_p50": round(pct(exp, 50), 1),
        "corpus_to_plan_ms": round(median(plan_ms), 2),
        "tester_samples_per_s": round(tester.stats.reports / el),
        "tester_faults": tester.stats.fault_samples,
        "rss_mb": rss_mb(),
    }


def slope(xs: list[float], ys: list[float]) -> float | None:
    pts = [(math.log(x), math.log(y)) for x, y in zip(xs, ys, strict=True) if x > 0 and y > 0]
    if len(pts) < 2:
        return None
    mx = sum(p[0] for p in pts) / len(pts)
    my = sum(p[1] for p in pts) / len(pts)
    sxx = sum((p[0] - mx) ** 2 for p in pts)
    return round(sum((p[0] - mx) * (p[1] - my) for p in pts) / sxx, 3) if sxx else None


MAX_MEMORY = 2 * BUDGET["rss_mb"]  # MB of address space a point may take: twice the budget
POINT_TIMEOUT = 900.0  # s


def _limit_memory() -> None:
    import resource

    cap = int(MAX_MEMORY * 2**20)
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))


def _point(kind, size, rules, updates, seconds, say) -> dict:
    """One point in a fresh process, stopped beyond twice the memory budget or
    POINT_TIMEOUT: such a point is out of budget whatever it would have measured."""
    args = [sys.executable, __file__, "--point", f"{kind},{size},{rules},{updates},{seconds}"]
    t = time.perf_counter()
    head = {"kind": kind, "size": size, "rules": rules}
    try:
        p = subprocess.run(
            args, capture_output=True, text=True, timeout=POINT_TIMEOUT, preexec_fn=_limit_memory
        )
    except subprocess.TimeoutExpired:
        return {**head, "error": f"not finished within {POINT_TIMEOUT:.0f} s"}
    if p.returncode != 0:
        err = p.stderr.strip()
        if "MemoryError" in err or "memory" in err.lower():
            err = f"out of memory: over {MAX_MEMORY:.0f} MB of address space ({err[-200:]})"
        say(f"{kind} {size} {rules}: {time.perf_counter() - t:.0f} s, {err[-300:]}")
        return {**head, "error": err[-500:]}
    res = json.loads(p.stdout)
    say(f"{kind} {size} {rules}: {time.perf_counter() - t:.0f} s {json.dumps(res)}")
    return res


def series(points: list[dict], x: str) -> dict:
    ok = [p for p in points if "error" not in p]
    return {m: slope([p[x] for p in ok], [p[m] for p in ok]) for m in METRICS}


def plot(report: dict, outdir: str) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    files = []
    for name, x in (("rules", "rules"), ("switches", "switches")):
        pts = [p for p in report[name] if "error" not in p]
        fig, axes = plt.subplots(2, 4, figsize=(15, 6.5))
        for ax, m in zip(axes.flat, METRICS, strict=False):
            for kind, mark in (("fattree", "o-"), ("grid", "s-")):
                sel = sorted((p for p in pts if p["kind"] == kind), key=lambda p: p[x])
                if sel:
                    ax.loglog([p[x] for p in sel], [p[m] for p in sel], mark, label=kind)
            sl = report["slopes"][name]
            if name == "rules":
                txt = f"slope {sl.get(m)}"
            else:
                txt = f"slope grid {sl['grid'].get(m)}, fat-tree {sl['fattree'].get(m)}"
            ax.set_title(f"{m} ({txt})", fontsize=8)
            ax.set_xlabel(x)
            ax.grid(alpha=0.3, which="both")
            ax.legend(fontsize=7)
        axes.flat[-1].axis("off")
        fig.tight_layout()
        for ext in ("png", "svg"):
            path = os.path.join(outdir, f"scaling-{name}.{ext}")
            fig.savefig(path, dpi=100)
            files.append(path)
        plt.close(fig)
    return files


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--point", help=argparse.SUPPRESS)
    ap.add_argument("--quick", action="store_true", help="5k and 20k rules, grids 2x2 and 3x3")
    ap.add_argument("--updates", type=int, default=500)
    ap.add_argument("--seconds", type=float, default=2.0, help="tester replay per point")
    ap.add_argument("--out")
    ap.add_argument("--figures")
    ap.add_argument("--verbose", "-v", action="store_true")
    args = ap.parse_args(argv)
    if args.point:
        kind, size, rules, updates, seconds = args.point.split(",")
        res = measure(kind, int(size), int(rules), int(updates), float(seconds))
        print(json.dumps(res))
        return 0
    say = (lambda s: print(s, file=sys.stderr, flush=True)) if args.verbose else (lambda s: None)
    rules = RULES[:2] if args.quick else RULES
    grids = GRIDS[:2] if args.quick else GRIDS
    fts = [] if args.quick else FATTREES
    sw_rules = 5_000 if args.quick else SWITCH_RULES
    upd, sec = (100, 0.5) if args.quick else (args.updates, args.seconds)
    t0 = time.perf_counter()
    by_rules = [_point("fattree", 4, r, upd, sec, say) for r in rules]
    by_sw = [_point("grid", n, sw_rules, upd, sec, say) for n in grids]
    by_sw += [_point("fattree", k, sw_rules, upd, sec, say) for k in fts]
    report = {
        "bench": "scaling",
        "quick": args.quick,
        "budget": BUDGET,
        "rules": by_rules,
        "switches": by_sw,
        "slopes": {
            "rules": series(by_rules, "rules"),
            "switches": {
                "grid": series([p for p in by_sw if p.get("kind") == "grid"], "switches"),
                "fattree": series([p for p in by_sw if p.get("kind") == "fattree"], "switches"),
            },
        },
        "within_budget": [
            {"kind": p["kind"], "size": p["size"], "rules": p["rules"]}
            for p in by_rules + by_sw
            if "error" not in p and all(p[k] <= v for k, v in BUDGET.items())
        ],
        "wall_s": round(time.perf_counter() - t0, 1),
    }
    if args.figures:
        report["figures"] = plot(report, args.figures)
    text = json.dumps(report, indent=1)
    if args.out:
        with open(args.out, "w") as fh:
            fh.write(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
