"""Replay of the Stanford backbone update trace through the incremental model. Prints JSON.

    python bench/stanford.py --json            # routers and ACLs (9,052 updates)
    python bench/stanford.py --noacl --json    # forwarding only (7,680 updates)

update_us_*           one trace line, inserts then deletes in trace order, via Model.apply:
                      turning the parsed line into FlowMods and GroupMods (range expansion, one
                      entry per ACL element, ECMP groups), encoding the matches as BDDs, the
                      class updates and the re-walks of the touched classes; a line of several
                      FlowMods is one update
model_us_*            the same updates on the model's clock, which is what APKeep's and Flash's
                      figures cover: Model.apply only, with the FlowMods built and their matches
                      encoded as BDDs before the clock starts (build_us_avg, encode_us_avg:
                      the two parts left out; the three add up to update_us)
classes_after_insert  header classes when all inserts are in (APKeep: 515, 494 without ACLs)
classes_fwd_acl_after_insert  the same classes counted as APKeep does, two predicate sets:
                      [distinct actions at forwarding elements, at filter elements]
                      (cpc.model.Model.split_class_counts; APKeep: 495 and 22)
classes_after_delete  header classes after the whole trace (APKeep: 2 and 1)
loops                 distinct forwarding cycles after the inserts (Model.loop_cycles);
                      loop_outcomes counts the (class, ingress) walks that end in one
build_s               Model.add_entries of every inserted rule at once, from nothing
rss_mb_replay         peak resident set size at the end of the replay, before that build
                      (rss_mb: the process's peak, the build included)
--throughput          instead: FlowMods per second through Model.apply_many, the trace's
                      FlowMods in batches of 1, 10 and 100 (the proxy commits a barrier's
                      batch at once), each on a fresh model
complete              false when the replay stopped at --budget-s or --max-classes (the ACL
                      trace does: see docs/stanford.md); then classes_at_stop, no build
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import json
import pstats
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import pct, rss_mb  # noqa: E402
from cpc.model import Model  # noqa: E402
from cpc.rules import FlowMod  # noqa: E402
from pazzdata.stanford import apply_change, load  # noqa: E402

DATASETS = Path("/work/shared/datasets")


def throughput(net, sizes=(1, 10, 100)) -> dict:
    """FlowMods per second through apply_many, the whole trace in batches of each size."""
    fms = [fm for upd in net.updates for fm in net.changes(upd)]
    if not all(isinstance(fm, FlowMod) for fm in fms):
        raise SystemExit("--throughput: the trace has ECMP routes (GroupMods); not supported")
    out = {}
    for size in sizes:
        model = Model(net.topo)
        model.add_entries([], net.groups)
        t = time.perf_counter()
        errors = 0
        for i in range(0, len(fms), size):
            errors += len(model.apply_many(fms[i : i + size])[1])
        dt = time.perf_counter() - t
        out[str(size)] = {
            "flowmods": len(fms),
            "seconds": round(dt, 2),
            "flowmods_per_s": round(len(fms) / dt),
            "errors": errors,
        }
        del model
        gc.collect()
    return out


def read_like_the_daemon(upd) -> None:
    """What fuzzer.engine.Fuzzer.on_update and tester.timers.TransientGuard read of every update."""
    _ = upd.pairs, upd.exits, upd.region


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--noacl", action="store_true", help="the forwarding-only dataset")
    ap.add_argument("--dataset", help="dataset directory (default: the shared copy)")
    ap.add_argument(
        "--no-rule-ids", action="store_true", help="entries without pazzd's unique rule IDs"
    )
    ap.add_argument(
        "--budget-s",
        type=float,
        default=900.0,
        help="stop the replay (and skip the build) once this much update time is spent",
    )
    ap.add_argument("--max-classes", type=int, default=300_000, help="stop the replay beyond")
    ap.add_argument(
        "--throughput",
        action="store_true",
        help="FlowMods/s through apply_many in batches of 1, 10 and 100",
    )
    ap.add_argument(
        "--no-loops",
        action="store_true",
        help="skip the loop count after the inserts (it spells out every looping path)",
    )
    ap.add_argument(
        "--as-daemon",
        action="store_true",
        help="time with what pazzd's fuzzer and tester read of every update (its pairs, "
        "its exits and its region) inside each update",
    )
    ap.add_argument("--profile", metavar="N", type=int, help="print the top N cProfile entries")
    ap.add_argument("--json", action="store_true", help="print only the JSON object")
    args = ap.parse_args(argv)
    ds = (
        Path(args.dataset)
        if args.dataset
        else DATASETS / ("stanford-noacl" if args.noacl else "stanford")
    )
    net = load(ds, rule_ids=not args.no_rule_ids)

    entries, groups = net.state(net.inserted())
    if args.throughput:
        out = {
            "dataset": ds.name,
            "rule_ids": not args.no_rule_ids,
            "throughput": throughput(net),
            "rss_mb": rss_mb(),
        }
        print(json.dumps(out) if args.json else json.dumps(out, indent=2))
        return out

    # Replay, incrementally.
    model = Model(net.topo)
    model.add_entries([], net.groups)
    if args.as_daemon:
        model.subscribe(read_like_the_daemon)
    prof = cProfile.Profile() if args.profile else None
    times = []  # per update: build + encode + apply
    model_times = []  # per update: apply only (the model's clock)
    build_times, encode_times = [], []
    insert_times = []
    classes_after_insert = None
    split_after_insert = None
    loops = loop_outcomes = None
    spent = 0.0
    for upd in net.updates:
        if spent > args.budget_s or model.class_count() > args.max_classes:
            break
        if upd.op == "-" and classes_after_insert is None:
            classes_after_insert = model.class_count()
            split_after_insert = model.split_class_counts()
            if not args.no_loops:
                loop_outcomes = model.loop_count()
                loops = len(model.loop_cycles())
            insert_times = list(times)
        if prof:
            prof.enable()
        t = time.perf_counter()
        changes = net.changes(upd)
        t1 = time.perf_counter()
        for c in changes:  # what apply would encode, encoded first (cached by the space)
            if isinstance(c, FlowMod):
                model.space.match_bdd(c.match.fields)
        t2 = time.perf_counter()
        for c in changes:
            apply_change(model, c)
        t3 = time.perf_counter()
        if prof:
            prof.disable()
        dt = (t3 - t) * 1e6
        times.append(dt)
        model_times.append((t3 - t2) * 1e6)
        build_times.append((t1 - t) * 1e6)
        encode_times.append((t2 - t1) * 1e6)
        spent += dt / 1e6
    complete = len(times) == len(net.updates)
    rss_replay = rss_mb()  # the peak so far: the replay's (the build below comes after)
    classes_now = model.class_count()
    del model
    gc.collect()

    # Build: every inserted rule at once (only when the replay got through in budget).
    build_s = build_classes = None
    if complete:
        t0 = time.perf_counter()
        model = Model(net.topo)
        model.add_entries(entries, groups)
        build_s = round(time.perf_counter() - t0, 3)
        build_classes = model.class_count()
        del model
    if classes_after_insert is None:  # stopped during the inserts
        insert_times = list(times)
    delete_times = times[len(insert_times) :]
    out = {
        "dataset": ds.name,
        "rule_ids": not args.no_rule_ids,
        "switches": len(net.topo.switches),
        "edge_ports": len(net.topo.edges),
        "entries": len(entries),
        "complete": complete,
        "updates": len(times),
        "update_us_avg": round(sum(times) / len(times), 1),
        "update_us_p50": round(pct(times, 50), 1),
        "update_us_p99": round(pct(times, 99), 1),
        "model_us_avg": round(sum(model_times) / len(model_times), 1),
        "model_us_p50": round(pct(model_times, 50), 1),
        "model_us_p99": round(pct(model_times, 99), 1),
        "build_us_avg": round(sum(build_times) / len(build_times), 1),
        "encode_us_avg": round(sum(encode_times) / len(encode_times), 1),
        "groups": len(groups),
        "insert_us_avg": round(sum(insert_times) / max(1, len(insert_times)), 1),
        "delete_us_avg": round(sum(delete_times) / max(1, len(delete_times)), 1),
        "total_s": round(sum(times) / 1e6, 2),
        "classes_after_insert": classes_after_insert,
        "classes_fwd_acl_after_insert": split_after_insert,
        "classes_after_delete": classes_now if complete else None,
        "classes_at_stop": None if complete else classes_now,
        "classes_build": build_classes,
        "loops": loops,
        "loop_outcomes": loop_outcomes,
        "build_s": build_s,
        "rss_mb_replay": rss_replay,
        "rss_mb": rss_mb(),
    }
    print(json.dumps(out) if args.json else json.dumps(out, indent=2))
    if prof:
        pstats.Stats(prof, stream=sys.stderr).sort_stats("tottime").print_stats(args.profile)
        pstats.Stats(prof, stream=sys.stderr).sort_stats("cumulative").print_stats(args.profile)
    return out


if __name__ == "__main__":
    main()
