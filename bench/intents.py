"""What the intent checks (cpc.intents) add to a model update. Prints one JSON object.

    python bench/intents.py --network fattree --rules 100000 --json
    python bench/intents.py --network stanford --json          # routers and ACLs
    python bench/intents.py --network stanford --noacl --json

Every update is timed whole (Model.apply, subscribers included) and the checker's share of
it separately (its on_update, timed inside the subscriber), on the same model state:

update_us_p50_model    median of (update − checks): the update without the checks
update_us_p50_checked  median of the whole update, checks included
added_p50              update_us_p50_checked / update_us_p50_model − 1 (target ≤ 0.20)
check_us_p50/p99       the checker's own time per update
check_all_s            checking the model from scratch before the updates (start-up)
check_all_full_s       the same once every insert is in (Stanford: the full network)
guard_us_p50           (fattree) IntentGuard.judge of one FlowMod: apply, check, undo
guard_burst_per_s      (fattree) FlowMods judged per second in a burst of 1,000 without a
                       barrier (each judged after all before it, in flight), in the
                       proxy's slices of 50 ms (IntentGuard.batch)
guard_burst_per_s_unbatched  the same burst's first 200, each judged on its own (every
                       FlowMod in flight applied and undone again per judgement)
violations_open        open violations at the end
loops_after_inserts    (stanford) no_loops violations once every route is in, next to
                       Model.loop_cycles then (they must agree)

Policies: no_loops everywhere; blackhole_free from two edge ports; reach, isolate,
waypoint and reply between random edge ports, over a /16 or a protocol.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import pct, readd_flowmods, rss_mb  # noqa: E402
from cpc.intents import IntentChecker, Policy  # noqa: E402
from cpc.model import Model  # noqa: E402

DATASETS = Path("/work/shared/datasets")
TCP = (("eth_type", 0x0800, 0xFFFF), ("ip_proto", 6, 0xFF))


def policies(topo, rng: random.Random) -> list[Policy]:
    edges = topo.edge_ports()
    a, b, c, d = (rng.choice(edges) for _ in range(4))
    via = frozenset({rng.choice(sorted(topo.switches))})
    ip16 = (("eth_type", 0x0800, 0xFFFF), ("ipv4_dst", 0x0A000000, 0xFFFF0000))
    return [
        Policy("no_loops", "loop_free"),
        Policy("no_blackholes", "blackhole_free", src=(a, b)),
        Policy("reach", "reach", src=(a,), dst=b, match=ip16),
        Policy("isolate", "isolate", src=(c,), dst=d, match=TCP),
        Policy("waypoint", "waypoint", src=(a,), dst=c, via=via),
        Policy("reply", "reply", src=(b,), dst=d, match=TCP),
    ]


class Timed:
    """The checker as a subscriber, its time per update kept."""

    def __init__(self, checker: IntentChecker) -> None:
        self.checker = checker
        self.last = 0.0
        self.guard = None  # an IntentGuard that keeps its trials' changes

    def __call__(self, upd) -> None:
        t = time.perf_counter()
        ch = self.checker.on_update(upd)
        self.last = time.perf_counter() - t
        if self.guard is not None:
            self.guard.collect(ch)


def run_updates(model: Model, timed: Timed, batches) -> tuple[list[float], list[float]]:
    whole, checks = [], []
    for fms in batches:
        timed.last = 0.0
        t = time.perf_counter()
        for fm in fms:
            model.apply(fm)
        dt = time.perf_counter() - t
        whole.append(dt * 1e6)
        checks.append(timed.last * 1e6)
    return whole, checks


def fattree(args, rng):
    from pazzdata.workloads import generate

    wl = generate("fattree", args.k, args.rules, seed=args.seed, rule_ids=True)
    model = Model(wl.topo)
    model.add_entries(wl.entries, wl.groups)
    picks = [rng.choice(wl.entries) for _ in range(args.updates)]
    batches = [[fm] for e in picks for fm in readd_flowmods(e)]
    return model, batches, wl.topo


def stanford(args, rng):
    from pazzdata.stanford import load

    ds = DATASETS / ("stanford-noacl" if args.noacl else "stanford")
    net = load(ds, rule_ids=True)
    model = Model(net.topo)
    model.add_entries([], net.groups)
    batches = [list(net.changes(u)) for u in net.updates]  # the dataset has no ECMP routes
    if args.updates:  # the first N inserts of the trace
        ins = [b for b, u in zip(batches, net.updates, strict=True) if u.op == "+"]
        batches = ins[: args.updates]
    # where the deletes start: loops are counted there, when every route is in
    args.inserts = next((i for i, u in enumerate(net.updates) if u.op == "-"), len(batches))
    return model, batches, net.topo


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--network", choices=["fattree", "stanford"], default="fattree")
    ap.add_argument("--k", type=int, default=4)
    ap.add_argument("--rules", type=int, default=100_000)
    ap.add_argument("--updates", type=int, default=1000, help="fattree: entries re-added")
    ap.add_argument("--noacl", action="store_true", help="stanford: the forwarding-only trace")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument(
        "--policies",
        choices=["default", "all"],
        default="all",
        help="default: no_loops only (pazzd's default); all: six policies of every kind",
    )
    ap.add_argument("--json", action="store_true", help="print only the JSON object")
    args = ap.parse_args(argv)
    if args.network == "stanford" and "--updates" not in (argv or sys.argv):
        args.updates = 0  # the whole trace
    rng = random.Random(args.seed)
    model, batches, topo = (fattree if args.network == "fattree" else stanford)(args, rng)
    if args.network == "fattree":
        model.build()
    pols = policies(topo, rng)
    if args.policies == "default":
        pols = pols[:1]
    checker = IntentChecker(model, pols)
    t0 = time.perf_counter()
    checker.check_all()
    check_all_s = time.perf_counter() - t0
    timed = Timed(checker)
    model.subscribe(timed)
    n_ins = getattr(args, "inserts", len(batches))
    whole, checks = run_updates(model, timed, batches[:n_ins])
    loops = sum(1 for v in checker.open.values() if v.policy.name == "no_loops")
    loop_cycles = len(model.loop_cycles())
    t0 = time.perf_counter()
    IntentChecker(model, pols).check_all()  # a start-up on the full model
    check_all_full_s = time.perf_counter() - t0
    w2, c2 = run_updates(model, timed, batches[n_ins:])
    whole, checks = whole + w2, checks + c2
    bare = [w - c for w, c in zip(whole, checks, strict=True)]
    out = {
        "network": args.network + ("-noacl" if args.noacl else ""),
        "rules": model.rule_count(),
        "classes": model.class_count(),
        "updates": len(whole),
        "policies": [p.name for p in pols],
        "update_us_p50_model": round(pct(bare, 50), 1),
        "update_us_p50_checked": round(pct(whole, 50), 1),
        "update_us_avg_model": round(sum(bare) / len(bare), 1),
        "update_us_avg_checked": round(sum(whole) / len(whole), 1),
        "added_p50": round(pct(whole, 50) / pct(bare, 50) - 1, 3),
        "added_avg": round(sum(whole) / sum(bare) - 1, 3),
        "check_us_p50": round(pct(checks, 50), 1),
        "check_us_p99": round(pct(checks, 99), 1),
        "check_all_s": round(check_all_s, 3),
        "check_all_full_s": round(check_all_full_s, 3),
        "violations_open": len(checker.open),
        "violations_by_policy": {
            p.name: sum(1 for v in checker.open.values() if v.policy.name == p.name) for p in pols
        },
        "loops_after_inserts": loops,
        "loop_cycles_after_inserts": loop_cycles,
    }
    if args.network == "fattree":
        from pazzd.guard import IntentGuard

        guard = timed.guard = IntentGuard(model, lambda: {"no_loops"})
        times = []
        for e in [rng.choice(model.entries()) for _ in range(200)]:
            add = readd_flowmods(e)[1]
            add.priority += 1  # a new entry over the old one: the trial adds and undoes it
            t = time.perf_counter()
            guard.judge(add)
            times.append((time.perf_counter() - t) * 1e6)
        out["guard_us_p50"] = round(pct(times, 50), 1)
        out["guard_us_p99"] = round(pct(times, 99), 1)
        burst = []
        for e in [rng.choice(model.entries()) for _ in range(1000)]:
            add = readd_flowmods(e)[1]
            add.priority += 1
            burst.append(add)
        out["guard_burst_per_s"] = round(_burst(guard, burst, slice_s=0.05), 1)
        out["guard_burst_per_s_unbatched"] = round(_burst(guard, burst[:200], slice_s=0), 1)
    out["rss_mb"] = rss_mb()
    print(json.dumps(out) if args.json else json.dumps(out, indent=2))
    return out


def _burst(guard, fms: list, slice_s: float) -> float:
    """FlowMods judged per second when each is judged with every one before it in flight;
    slice_s: the batch is closed and opened again after that many seconds (0: no batch)."""
    pending: list = []
    t0 = time.perf_counter()
    i = 0
    while i < len(fms):
        end = time.perf_counter() + slice_s
        with guard.batch() if slice_s else contextlib.nullcontext():
            while i < len(fms):
                if not guard.judge(fms[i], pending):
                    pending.append(fms[i])
                i += 1
                if time.perf_counter() > end:
                    break
    return len(fms) / (time.perf_counter() - t0)


if __name__ == "__main__":
    main()
