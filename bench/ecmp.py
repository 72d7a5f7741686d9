"""The model's answers on a fat-tree with ECMP, the switches picking one SELECT bucket per
flow (Model.select = cpc.selecthash.group_bucket, pazzd's ovs.select_hash). Prints one
JSON object.

    python bench/ecmp.py --k 16 --queries 300
    python bench/ecmp.py --k 8 --max-gb 6        # address-space cap, default 6 GB (0: none)

The network is pazzdata.workloads' k-ary fat-tree, routed as its generator routes:
a /24 for each of --dsts destination hosts (spread over the pods; 0: every host) on
every switch, a SELECT group wherever a switch has several shortest next hops, its
buckets rotated per switch. Every host is an ingress. (The generator's own workload, a
/24 for every host and ACLs at the edge, takes more than 6 GB to build at k=16: the
class walks, not the answers.) Each query is a random TCP flow to a random destination,
asked at its host's edge port, in this order:

expected_us_*   Model.expected(egress, header): the first question about each flow
allows_us_*     Model.allows(egress, header, tags of one answer): the tester's check
at_us_*         Model.expected_at(the link port the flow's path arrives at the exit
                switch on, header): a per-hop sample's record
answers_mean    Expected records per expected() (one per ingress that reaches egress)
rss_mb_built    peak RSS after the build; rss_mb: peak RSS at the end (getrusage)

A run that passes the cap reports "error" with the queries it finished.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from bench.common import pct, rss_mb  # noqa: E402


def _cap(gb: float) -> None:
    """Cap this process's address space (the soft limit; 0: no cap)."""
    if gb > 0:
        hard = resource.getrlimit(resource.RLIMIT_AS)[1]
        cap = int(gb * 2**30)
        resource.setrlimit(resource.RLIMIT_AS, (cap if hard < 0 else min(cap, hard), hard))


def _stats(report: dict, name: str, values: list[float]) -> None:
    if values:
        report[f"{name}_us_p50"] = round(pct(values, 50), 1)
        report[f"{name}_us_p99"] = round(pct(values, 99), 1)
        report[f"{name}_us_mean"] = round(sum(values) / len(values), 1)


def ecmp_network(k: int, dsts: int):
    """(topology, hosts, entries, groups, {/24: its host's edge port}): routes to dsts
    hosts of the k-ary fat-tree (0: all), as pazzdata.workloads.generate makes them."""
    from cpc.rules import FlowEntry, Group, Instructions, Match
    from pazzdata.workloads import ROUTE_COOKIE, ROUTE_PRIORITY, fattree, next_hops

    topo, hosts = fattree(k)
    names = sorted(hosts, key=lambda h: int(h[1:]))
    step = max(1, len(names) // dsts) if dsts else 1
    chosen = names[::step][: dsts or None]
    entries, groups, gids, prefixes = [], [], {}, {}
    for i, name in enumerate(chosen):
        net = 0x0A000000 + (i << 8)
        hdpid, hport = prefixes[net] = hosts[name]
        hops = next_hops(topo, hdpid)
        for dpid in sorted(topo.switches):
            ports = [hport] if dpid == hdpid else hops[dpid]
            if len(ports) == 1:
                acts = (("output", ports[0]),)
            else:
                key = (dpid, tuple(ports))
                if key not in gids:
                    gids[key] = sum(1 for x in gids if x[0] == dpid) + 1
                    r = dpid % len(ports)  # rotated per switch: no ECMP polarization
                    order = ports[r:] + ports[:r]
                    buckets = tuple((("output", p),) for p in order)
                    groups.append(Group(dpid, gids[key], "select", buckets))
                acts = (("group", gids[key]),)
            match = Match.build({"eth_type": (0x0800, 0xFFFF), "ipv4_dst": (net, 0xFFFFFF00)})
            entries.append(
                FlowEntry(
                    dpid,
                    0,
                    ROUTE_PRIORITY,
                    match,
                    Instructions(acts),
                    cookie=ROUTE_COOKIE,
                    rule_id=len(entries) + 1,
                )
            )
    return topo, hosts, entries, groups, prefixes


def run(k: int, dsts: int, queries: int, seed: int, select: bool) -> dict:
    from cpc.model import Model
    from cpc.selecthash import group_bucket

    report: dict = {"bench": "ecmp", "k": k, "select": select, "queries_asked": queries}
    t = time.perf_counter()
    topo, hosts, entries, groups, prefixes = ecmp_network(k, dsts)
    model = Model(topo)
    model.add_entries(entries, groups)
    if select:
        model.select = group_bucket
    report.update(
        switches=len(topo.switches),
        hosts=len(hosts),
        dsts=len(prefixes),
        rules=model.rule_count(),
        select_groups=sum(g.type == "select" for g in groups),
        classes=model.class_count(),
        build_s=round(time.perf_counter() - t, 2),
        rss_mb_built=rss_mb(),
    )
    rng = random.Random(seed)
    nets = sorted(prefixes)
    into = {b: a for a, b in topo.links.items()}  # link far end -> near end
    exp, allow, at, answers = [], [], [], []
    try:
        for _ in range(queries):
            net = rng.choice(nets)
            egress = prefixes[net]
            h = {
                "eth_type": 0x0800,
                "ipv4_dst": net | rng.randrange(1, 255),
                "ipv4_src": rng.getrandbits(32),
                "ip_proto": 6,
                "tp_src": rng.randrange(1024, 65536),
                "tp_dst": rng.choice((80, 443, 8080)),
            }
            t = time.perf_counter()
            got = model.expected(egress, h)
            exp.append((time.perf_counter() - t) * 1e6)
            answers.append(len(got))
            if not got:
                continue
            e = rng.choice(got)
            t = time.perf_counter()
            ok = model.allows(egress, h, e.verify_port, e.verify_rule)
            allow.append((time.perf_counter() - t) * 1e6)
            if not ok:
                raise AssertionError(f"allows() refused an answer of expected(): {egress} {h}")
            arrival = next(
                (hop for hop in reversed(e.hops) if (hop.dpid, hop.in_port) in into), None
            )
            if arrival is not None:
                t = time.perf_counter()
                model.expected_at((arrival.dpid, arrival.in_port), h)
                at.append((time.perf_counter() - t) * 1e6)
    except MemoryError:
        report["error"] = f"out of memory after {len(exp)} queries"
    report["queries"] = len(exp)
    _stats(report, "expected", exp)
    _stats(report, "allows", allow)
    _stats(report, "at", at)
    if answers:
        report["answers_mean"] = round(sum(answers) / len(answers), 1)
    report["rss_mb"] = rss_mb()
    return report


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--k", type=int, default=8, help="fat-tree arity (even)")
    ap.add_argument("--dsts", type=int, default=64, help="destination hosts (0: every host)")
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--max-gb", type=float, default=6.0, help="address-space cap in GB (0: none)")
    ap.add_argument(
        "--every-bucket", action="store_true", help="no SELECT pick: every bucket a path"
    )
    args = ap.parse_args(argv)
    if args.k < 2 or args.k % 2:
        ap.error(f"--k {args.k}: a fat-tree's arity is an even number from 2 on")
    _cap(args.max_gb)
    report = run(args.k, args.dsts, args.queries, args.seed, not args.every_bucket)
    print(json.dumps(report))
    return 0 if "error" not in report else 1


if __name__ == "__main__":
    sys.exit(main())
