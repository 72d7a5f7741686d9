"""What choosing an entry's confirmation probes (cpc.entryprobes) costs. Prints JSON.

    python bench/entryprobes.py --network fattree --rules 10000 --json

For a sample of the workload's entries: the probes pazzd.entries would send (3 inside,
one outside per matched field, every edge port an ingress), timed per entry.

ms_p50 / ms_p99      the time to choose one entry's probes
probed_pct           entries with at least one inside probe (the rest: shadowed, or no
                     edge ingress reaches them)
inside / outside     probes per probed entry, on average
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import pct  # noqa: E402
from cpc.entryprobes import entry_probes  # noqa: E402
from cpc.model import Model  # noqa: E402
from pazzdata.workloads import generate  # noqa: E402

KEY = ("ipv4_dst", "ipv4_src", "ip_proto", "tp_dst", "tp_src")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--network", choices=["grid", "fattree"], default="fattree")
    ap.add_argument("--size", type=int, default=4)
    ap.add_argument("--rules", type=int, default=10_000)
    ap.add_argument("--sample", type=int, default=300)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    wl = generate(args.network, args.size, args.rules, rule_ids=True)
    model = Model(wl.topo)
    model.add_entries(wl.entries, wl.groups)
    entries = model.entries()
    sample = random.Random(1).sample(entries, min(args.sample, len(entries)))
    ings = wl.topo.edge_ports()
    times, inside, outside, probed = [], 0, 0, 0
    for e in sample:
        t0 = time.perf_counter()
        ps = entry_probes(model, e, ings, 3, (), KEY)
        times.append((time.perf_counter() - t0) * 1000)
        n_in = sum(p.kind == "inside" for p in ps)
        probed += n_in > 0
        inside += n_in
        outside += len(ps) - n_in
    out = {
        "network": args.network,
        "entries": len(entries),
        "sampled": len(sample),
        "ms_p50": round(pct(times, 50), 2),
        "ms_p99": round(pct(times, 99), 2),
        "probed_pct": round(100 * probed / len(sample), 1),
        "inside": round(inside / max(probed, 1), 2),
        "outside": round(outside / max(probed, 1), 2),
    }
    print(json.dumps(out, indent=None if args.json else 2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
