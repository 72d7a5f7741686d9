"""Differential run of OpenFlow agents: stock and patched Open vSwitch and the model on random
FlowMod sequences (pazzlab.agents). Prints JSON: sequences, messages, packets, differences
by kind (must be empty), known divergences by kind, seconds.

    PAZZ_OVS_PREFIX=... python bench/agents.py --sequences 10000 --json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pazzlab.agentgen import random_sequence  # noqa: E402
from pazzlab.agents import Comparison  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sequences", type=int, default=10_000)
    ap.add_argument("--packets", type=int, default=10, help="packets per sequence")
    ap.add_argument("--seed", type=int, default=0, help="the first sequence's seed")
    ap.add_argument("--prefix", default=os.environ.get("PAZZ_OVS_PREFIX"))
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if not args.prefix:
        ap.error("set PAZZ_OVS_PREFIX or --prefix to the patched Open vSwitch")
    t0 = time.perf_counter()
    with Comparison(args.prefix) as cmp:
        for seed in range(args.seed, args.seed + args.sequences):
            cmp.run(random_sequence(seed, args.packets))
        out = cmp.summary()
        examples = {k: [repr(x) for x in v[:3]] for k, v in cmp.examples.items()}
    out["wall_seconds"] = round(time.perf_counter() - t0, 2)
    if examples:
        out["examples"] = examples
    print(json.dumps(out, indent=None if args.json else 2))
    return 1 if out["differences"] else 0


if __name__ == "__main__":
    sys.exit(main())
