"""Tester benchmark: synthetic sFlow report datagrams replayed through the Tester.

The model is the real one (cpc.model) on a pazzdata.workloads network; reports come from
the reference data plane (cpc.refdp) and are packed by tester.emit into sFlow v5
datagrams, as patched OVS would send them. Measured:

- samples_per_s: one process, datagrams of --per-datagram samples, decode to verdict;
- sample_us_p50/p99: per sample latency, one-sample datagrams, decode to verdict;
- rss_mb: the process's peak resident size (model included);
- workers: N processes forked after the model is built (copy-on-write), each fed its
  own shard of agents in memory (as SO_REUSEPORT's per-source hashing shards them);
- udp: the same over real UDP with SO_REUSEPORT on 127.0.0.1 (sender on the same box);
- hop_samples_per_s, hop_sample_us_p50/p99: the same flows' per-hop samples (an ingress
  sample where each packet arrives over a link, the Verify shim as the switches before
  built it), judged against the model's path prefixes (Model.allows_at).

Usage: python bench/tester.py [--topology grid|fattree] [--size N] [--rules R] [--json]
(default: the k=4 fat-tree with 100k rules). --select-hash: the switches pick one SELECT
bucket per flow by Open vSwitch's hash and the model judges by that pick (pazzd's default,
ovs.select_hash); without it every bucket is a path (the reference sends each flow down
all of them, the model allows all).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import resource
import socket
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from cpc.model import Model  # noqa: E402
from cpc.refdp import RefDataPlane  # noqa: E402
from cpc.selecthash import group_bucket  # noqa: E402
from pazzdata import workloads  # noqa: E402
from tester.collector import open_socket  # noqa: E402
from tester.emit import ReferenceEmitter, synthetic_ifmap  # noqa: E402
from tester.engine import Tester  # noqa: E402
from tester.store import FaultStore  # noqa: E402

PAPER_MS_PER_SAMPLE = 4.27


def build(kind: str, size: int, rules: int, select_hash: bool = False):
    t0 = time.perf_counter()
    wl = workloads.generate(kind, size, rules, rule_ids=True)
    m = Model(wl.topo)
    m.add_entries(wl.entries, wl.groups)
    m.build()
    if select_hash:
        m.select = group_bucket
    return wl, m, time.perf_counter() - t0


def _ref(wl, m) -> RefDataPlane:
    """The data plane as the model is told the switches pick SELECT buckets."""
    pick = (lambda _d, g, h: m.select(g, h)) if m.select is not None else None
    return RefDataPlane(wl.topo, m.entries(), m.groups(), select=pick)


def _flow(rng, hosts: list, nets: list) -> tuple:
    """(source host, header) of one random TCP flow to a host of the network's prefixes."""
    h = dict(
        ipv4_dst=rng.choice(nets) + rng.randrange(1, 255),
        ipv4_src=0x0B000000 + rng.randrange(1 << 16),
        ip_proto=6,
        tp_dst=rng.choice([80, 443, 8080]),
        tp_src=rng.randrange(1024, 65535),
        eth_type=0x0800,
        vlan_vid=0,
        eth_dst=0x020000000001,
        eth_src=0x020000000002,
    )
    return rng.choice(hosts), h


def reports(wl, m, flows: int, seed: int = 7):
    """(egress, header, vp, vr) of `flows` distinct flows between random hosts and prefixes."""
    import random

    rng = random.Random(seed)
    ref = _ref(wl, m)
    hosts = sorted(wl.hosts)
    nets = sorted(wl.prefixes)
    out = []
    while len(out) < flows:
        src, h = _flow(rng, hosts, nets)
        for d, final in ref.send_with_headers(wl.hosts[src], h):
            if d.kind == "egress":
                out.append((d.egress, final, d.verify_port, d.verify_rule))
    return out[:flows]


def hop_datagrams(wl, m, flows: int, per: int, seed: int = 7) -> tuple[list[bytes], int]:
    """The per-hop samples of the flows of reports() (same seed: the same flows), marked
    as patched OVS marks ingress samples; and how many."""
    import random

    rng = random.Random(seed)
    ref = _ref(wl, m)
    hosts, nets = sorted(wl.hosts), sorted(wl.prefixes)
    em = ReferenceEmitter(sampling_rate=100, ovs_marking=True)
    n = done = 0
    while done < flows:
        src, h = _flow(rng, hosts, nets)
        n += em.add_arrivals(ref.arrivals(wl.hosts[src], h))
        done += 1
    return em.flush(per), n


def datagrams(reps, per: int) -> list[bytes]:
    em = ReferenceEmitter(sampling_rate=100)
    for egress, h, vp, vr in reps:
        em.add(egress, h, vp, vr)
    return em.flush(per)


def tester_for(wl, m) -> Tester:
    ports = [(d, p) for d in sorted(wl.topo.switches) for p in wl.topo.ports_of(d)]
    return Tester(m, FaultStore(":memory:"), synthetic_ifmap(ports), ports=ports)


def run_throughput(t: Tester, dgs: list[bytes], seconds: float) -> tuple[int, float]:
    n = 0
    t0 = time.perf_counter()
    proc = t.process_datagram
    while True:
        for d in dgs:
            proc(d, 0.0)
        n += 1
        el = time.perf_counter() - t0
        if el >= seconds:
            return n, el


def _worker(wl, m, dgs, per, seconds, q) -> None:
    t = tester_for(wl, m)
    n, el = run_throughput(t, dgs, seconds)
    samples = t.stats.reports
    q.put((samples / el, t.stats.fault_samples))


def workers_scaling(wl, m, dgs_by_agent, per, seconds, n):
    """n forked workers, each with the agents of its shard, in memory."""
    shards = [[] for _ in range(n)]
    for i, agent in enumerate(sorted(dgs_by_agent)):
        shards[i % n].extend(dgs_by_agent[agent])
    ctx = mp.get_context("fork")  # the model is inherited copy-on-write, not rebuilt
    q = ctx.Queue()
    ps = [ctx.Process(target=_worker, args=(wl, m, s, per, seconds, q)) for s in shards]
    for p in ps:
        p.start()
    res = [q.get() for _ in ps]
    for p in ps:
        p.join()
    return sum(r[0] for r in res), sum(r[1] for r in res)


def _udp_worker(wl, m, port, stop_at, q) -> None:
    t = tester_for(wl, m)
    s = open_socket("127.0.0.1", port, reuse_port=True, rcvbuf=32 << 20)
    s.setblocking(True)
    s.settimeout(0.2)
    q.put("ready")
    while time.time() < stop_at:
        try:
            data = s.recv(65535)
        except TimeoutError:
            continue
        t.process_datagram(data, 0.0)
    q.put((t.stats.reports, t.stats.datagrams))


def udp_run(wl, m, dgs, n, seconds, senders: int = 8):
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    stop_at = time.time() + seconds + 2.0
    ps = [ctx.Process(target=_udp_worker, args=(wl, m, port, stop_at, q)) for _ in range(n)]
    for p in ps:
        p.start()
    for _ in ps:
        q.get()
    socks = [socket.socket(socket.AF_INET, socket.SOCK_DGRAM) for _ in range(senders)]
    sent = 0
    t0 = time.perf_counter()
    i = 0
    # Paced by the sender's own speed; each sender socket is one "agent" 4-tuple.
    while time.perf_counter() - t0 < seconds:
        for d in dgs:
            socks[i % senders].sendto(d, ("127.0.0.1", port))
            i += 1
        sent += len(dgs)
    el = time.perf_counter() - t0
    res = [q.get() for _ in ps]
    for p in ps:
        p.join()
    got = sum(r[0] for r in res)
    per = sum(r[1] for r in res)
    return {
        "workers": n,
        "sent_datagrams": sent,
        "received_datagrams": per,
        "samples_per_s": got / el,
        "loss": 1 - per / sent if sent else 0.0,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--topology", default="fattree", choices=["grid", "fattree"])
    ap.add_argument("--size", type=int, default=4, help="fat-tree k, or grid side")
    ap.add_argument("--rules", type=int, default=100_000)
    ap.add_argument("--flows", type=int, default=4000)
    ap.add_argument("--per-datagram", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--no-udp", action="store_true")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--select-hash", action="store_true", help="judge ECMP by OVS's pick")
    a = ap.parse_args()

    wl, m, build_s = build(a.topology, a.size, a.rules, a.select_hash)
    reps = reports(wl, m, a.flows)
    dgs = datagrams(reps, a.per_datagram)
    t = tester_for(wl, m)
    # Warm the expected-answer cache once (a live tester sees each class many times).
    for d in dgs:
        t.process_datagram(d, 0.0)
    assert t.stats.fault_samples == 0, "the reference data plane must agree with the model"
    warm_misses = t.stats.cache_misses
    base_reports = t.stats.reports
    n, el = run_throughput(t, dgs, a.seconds)
    sps = (t.stats.reports - base_reports) / el

    singles = datagrams(reps, 1)
    lat = []
    pc = time.perf_counter_ns
    for _ in range(3):
        for d in singles:
            s = pc()
            t.process_datagram(d, 0.0)
            lat.append((pc() - s) / 1000)
    lat.sort()
    p50, p99 = lat[len(lat) // 2], lat[int(len(lat) * 0.99)]

    # Cold: a fresh tester, every class a cache miss (model.expected called).
    cold = tester_for(wl, m)
    s = time.perf_counter()
    for d in singles:
        cold.process_datagram(d, 0.0)
    cold_us = (time.perf_counter() - s) / len(singles) * 1e6

    # Per-hop samples: warm once (judged, cached), then throughput and latency.
    hop_dgs, n_hops = hop_datagrams(wl, m, a.flows, a.per_datagram)
    for d in hop_dgs:
        t.process_datagram(d, 0.0)
    assert t.stats.hop_fault_samples == 0 and t.stats.hop_unjudged == 0, t.stats.as_dict()
    hop_base = t.stats.hop_samples_judged
    _, el = run_throughput(t, hop_dgs, a.seconds)
    hop_sps = (t.stats.hop_samples_judged - hop_base) / el
    hop_singles = hop_datagrams(wl, m, min(a.flows, 1000), 1)[0]
    hlat = []
    for d in hop_singles:
        s = pc()
        t.process_datagram(d, 0.0)
        hlat.append((pc() - s) / 1000)
    hlat.sort()
    cold = tester_for(wl, m)
    s = time.perf_counter()
    for d in hop_singles:
        cold.process_datagram(d, 0.0)
    hop_cold_us = (time.perf_counter() - s) / len(hop_singles) * 1e6

    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    by_agent: dict[str, list[bytes]] = {}
    em = ReferenceEmitter(sampling_rate=100)
    for egress, h, vp, vr in reps:
        em.add(egress, h, vp, vr)
    for d in em.flush(a.per_datagram):
        from tester.sflow import decode

        by_agent.setdefault(decode(d).agent, []).append(d)
    scaling = {}
    for n in range(1, a.workers + 1):
        scaling[str(n)] = round(workers_scaling(wl, m, by_agent, a.per_datagram, a.seconds, n)[0])
    udp = [] if a.no_udp else [udp_run(wl, m, dgs, n, a.seconds) for n in range(1, a.workers + 1)]

    out = {
        "topology": f"{a.topology}{a.size}",
        "rules": m.rule_count(),
        "classes": m.class_count(),
        "model_build_s": round(build_s, 3),
        "flows": len(reps),
        "samples_per_datagram": a.per_datagram,
        "samples_per_s": round(sps),
        "sample_us_p50": round(p50, 2),
        "sample_us_p99": round(p99, 2),
        "sample_us_cold_mean": round(cold_us, 1),
        "expected_cache_entries": warm_misses,
        "hop_samples": n_hops,
        "hop_samples_per_s": round(hop_sps),
        "hop_sample_us_p50": round(hlat[len(hlat) // 2], 2),
        "hop_sample_us_p99": round(hlat[int(len(hlat) * 0.99)], 2),
        "hop_sample_us_cold_mean": round(hop_cold_us, 1),
        "rss_mb": round(rss, 1),
        "paper_ms_per_sample": PAPER_MS_PER_SAMPLE,
        "speedup_vs_paper_p50": round(PAPER_MS_PER_SAMPLE * 1000 / p50, 1),
        "workers_in_memory_samples_per_s": scaling,
        "workers_udp_reuseport": udp,
        "cpus": os.cpu_count(),
    }
    if a.json:
        print(json.dumps(out))
    else:
        for k, v in out.items():
            print(f"{k}: {v}")


if __name__ == "__main__":
    main()
