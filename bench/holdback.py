"""The tester's transient hold-back under benign controller churn (offline, simulated time).

A 3x3 grid from pazzdata.workloads; the reference data plane sends a steady stream of reports
(every host to several prefixes of every other host); meanwhile benign updates arrive at
`--rate` FlowMods/s, one at a time or in batches (`--batch N`): a /32 route with the
covering /24's output (a new Verify identity for that /32 only; by default half of them (`--hit`) on an
address that carries traffic), added on a random switch and deleted again later. The reference data plane follows every update at once, so no
report is a fault. Prints JSON: the share of reports held back and the fault samples.

    .venv/bin/python bench/holdback.py --rate 5.7
    .venv/bin/python bench/holdback.py --rate 5.7 --batch 11   # one batch every ~2 s
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from cpc.fields import parse_header  # noqa: E402
from cpc.model import Model  # noqa: E402
from cpc.refdp import RefDataPlane  # noqa: E402
from cpc.rules import FlowMod, Match  # noqa: E402
from pazzdata import workloads  # noqa: E402
from tester.emit import ReferenceEmitter, synthetic_ifmap  # noqa: E402
from tester.engine import Tester  # noqa: E402
from tester.store import FaultStore  # noqa: E402
from tester.timers import TransientGuard  # noqa: E402


def traffic(wl) -> list:
    out = []
    for src in sorted(wl.hosts):
        for i, net in enumerate(sorted(wl.prefixes)[:18]):
            if wl.prefixes[net] == src:
                continue
            h = parse_header(f"tcp_dst=80,tcp_src={1000 + i},nw_src=10.0.{int(src[1:]) - 1}.9")
            h["ipv4_dst"] = net + 7 + i
            out.append((wl.hosts[src], h))
    return out


def run(
    rate: float, batch: int, duration: float, settle: float, seed: int, hit: float = 0.5
) -> dict:
    wl = workloads.generate("grid", 3, 200, rule_ids=True, acls=2)
    m = Model(wl.topo)
    m.add_entries(wl.entries, wl.groups)
    guard = TransientGuard(settle=settle, clock=lambda: now)
    m.subscribe(guard.on_model_update)
    ports = [(d, p) for d in sorted(wl.topo.switches) for p in wl.topo.ports_of(d)]
    with tempfile.TemporaryDirectory() as tmp:
        store = FaultStore(f"{tmp}/f.db")
        t = Tester(m, store, synthetic_ifmap(ports), ports=ports, guard=guard)
        rng = random.Random(seed)
        pairs = traffic(wl)
        routes = {
            (e.dpid, e.match.get("ipv4_dst")[0]): e
            for e in m.entries()
            if e.priority == workloads.ROUTE_PRIORITY
        }
        keys = sorted(routes)
        nets = sorted(wl.prefixes)
        live: list[FlowMod] = []
        ref = RefDataPlane(wl.topo, m.entries(), m.groups())
        em = ReferenceEmitter()
        now, step, next_upd, updates = 0.0, 0.05, 0.0, 0
        while now < duration:
            if now >= next_upd:
                fms = []
                for _ in range(batch):
                    if len(live) >= 20 or (live and rng.random() < 0.5):
                        add = live.pop(rng.randrange(len(live)))
                        fms.append(FlowMod("delete_strict", add.dpid, 0, add.priority, add.match))
                    else:
                        dpid, net = keys[rng.randrange(len(keys))]
                        r = routes[(dpid, net)]
                        # A share `hit` of them on an address that carries traffic (must be held).
                        ip = net + (
                            7 + nets.index(net) if rng.random() < hit else rng.randrange(256)
                        )
                        match = Match.build(
                            {"eth_type": (0x0800, 0xFFFF), "ipv4_dst": (ip, 0xFFFFFFFF)}
                        )
                        if any(f.dpid == dpid and f.match == match for f in live):
                            continue
                        fm = FlowMod("add", dpid, 0, 30, match, r.instructions, cookie=0x30)
                        live.append(fm)
                        fms.append(fm)
                m.apply_many(fms)
                updates += len(fms)
                ref = RefDataPlane(wl.topo, m.entries(), m.groups())
                next_upd += batch / rate
            for ingress, h in rng.sample(pairs, 20):
                for d, final in ref.send_with_headers(ingress, h):
                    em.add_delivery(d, final)
            for dg in em.flush():
                t.process_datagram(dg, now)
            now += step
        st = t.stats
        store.close()
    return {
        "rate": rate,
        "batch": batch,
        "settle_s": settle,
        "duration_s": duration,
        "updates": updates,
        "reports": st.reports,
        "held": st.held_transient,
        "held_share": round(st.held_transient / max(1, st.reports), 4),
        "judged_consistent": st.consistent,
        "fault_samples": st.fault_samples,
        "hit": hit,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rate", type=float, default=5.7, help="benign FlowMods per second")
    p.add_argument("--batch", type=int, default=1, help="FlowMods per model update")
    p.add_argument("--duration", type=float, default=30.0, help="simulated seconds")
    p.add_argument("--settle", type=float, default=2.0)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--hit", type=float, default=0.5, help="share of updates on traffic")
    a = p.parse_args()
    print(json.dumps(run(a.rate, a.batch, a.duration, a.settle, a.seed, a.hit)))


if __name__ == "__main__":
    main()
