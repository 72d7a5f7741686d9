"""What the interference checker (cpc.interference) adds to each model update. Prints JSON.

    python bench/interference.py --network fattree --json    # 100k fat-tree, routes in 3 apps
    python bench/interference.py --network stanford --json   # routes and ACLs as two apps

Each sampled entry is deleted (delete_strict) and added back, both FlowMods timed through
Model.apply; entries alternate between the checker subscribed and no subscriber at all
(the state after a re-add is the one before, so a checker that skipped one stays right).

update_us_p50_without / _with   the median FlowMod, without and with the checker
added_pct                       (with - without) / without, at the median
checker_us_p50 / _p99           the checker's own share of one FlowMod (its on_update)
scan_s                          the checker's first scan of the bulk-loaded model
findings                        open findings by relation after the scan
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import pct, readd_flowmods, rss_mb  # noqa: E402
from cpc.interference import App, Apps, InterferenceChecker  # noqa: E402
from cpc.model import Model  # noqa: E402

DATASETS = Path("/work/shared/datasets")


def fattree(rules: int, seed: int):
    from pazzdata.workloads import generate

    wl = generate("fattree", 4, rules, seed=seed, rule_ids=True)
    nets: dict[tuple, int] = {}
    for e in wl.entries:
        if e.cookie == 0x10:  # a route: the app is the prefix's number mod 3
            net = e.match.get("ipv4_dst")[0]
            e.cookie = 0x10 + nets.setdefault(net, len(nets) % 3)
    apps = Apps(
        [App("routes0", 0x10, 0xFF), App("routes1", 0x11, 0xFF), App("routes2", 0x12, 0xFF)]
        + [App("acl", 0x20, 0xFF)]
    )
    return wl.topo, wl.entries, wl.groups, apps


def stanford(dataset: Path):
    from pazzdata.stanford import FwdRule, load

    net = load(dataset, rule_ids=True)
    entries = []
    for rule in net.inserted():
        for e in net.entries(rule):
            e.cookie = 0x1 if isinstance(rule, FwdRule) else 0x2
            entries.append(e)
    apps = Apps([App("routes", 0x1, 0xFF), App("acls", 0x2, 0xFF)])
    return net.topo, entries, net.groups, apps


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--network", choices=["fattree", "stanford"], default="fattree")
    ap.add_argument("--rules", type=int, default=100_000, help="fat-tree entries")
    ap.add_argument("--dataset", help="Stanford dataset directory (default: the shared copy)")
    ap.add_argument("--updates", type=int, default=2000, help="FlowMods timed (half each way)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", action="store_true", help="print only the JSON object")
    args = ap.parse_args(argv)
    rng = random.Random(args.seed)
    if args.network == "fattree":
        topo, entries, groups, apps = fattree(args.rules, args.seed)
    else:
        topo, entries, groups, apps = stanford(Path(args.dataset or DATASETS / "stanford"))

    model = Model(topo)
    model.add_entries(entries, groups)
    checker = InterferenceChecker(model, apps)
    t = time.perf_counter()
    checker.scan()
    scan_s = time.perf_counter() - t
    found = Counter(f.relation for f in checker.findings.values())

    spent = [0.0]

    def timed(upd) -> None:
        t = time.perf_counter()
        checker.on_update(upd)
        spent[0] += time.perf_counter() - t

    times: dict[bool, list[float]] = {False: [], True: []}
    own: list[float] = []
    sample = rng.sample(entries, min(len(entries), args.updates // 2))
    for i, e in enumerate(sample):
        on = i % 2 == 0
        model._subscribers[:] = [timed] if on else []
        for fm in readd_flowmods(e):
            spent[0] = 0.0
            t = time.perf_counter()
            model.apply(fm)
            times[on].append((time.perf_counter() - t) * 1e6)
            if on:
                own.append(spent[0] * 1e6)
    without, with_ = pct(times[False], 50), pct(times[True], 50)
    after = Counter(f.relation for f in checker.findings.values())
    out = {
        "network": args.network,
        "entries": model.rule_count(),
        "apps": list(apps.names),
        "flowmods": len(times[False]) + len(times[True]),
        "update_us_p50_without": round(without, 1),
        "update_us_p50_with": round(with_, 1),
        "added_pct": round(100 * (with_ - without) / without, 1),
        "checker_us_p50": round(pct(own, 50), 1),
        "checker_us_p99": round(pct(own, 99), 1),
        "scan_s": round(scan_s, 2),
        "findings": dict(sorted(found.items())),
        "findings_unchanged": after == found,
        "rss_mb": rss_mb(),
    }
    print(json.dumps(out) if args.json else json.dumps(out, indent=2))
    return out


if __name__ == "__main__":
    main()
