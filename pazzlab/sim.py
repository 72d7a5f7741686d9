"""Detection-effect simulation on the reference data plane (cpc.refdp).

Faults are hidden routes that the model does not know, installed on every switch
(priority = the routes' priority, next hops towards a random host):
  * "near": a fat-finger of an existing /24 route: one bit of its network part flipped,
    landing outside every intended prefix;
  * "wide": a /k (k in 6..12) destination prefix far from the intended 10.0.0.0/8.
A probe (ingress, header) detects a fault when the reference data plane, with the hidden
entries, delivers it to an egress where the model expects nothing for that header or
other tags (model.expected). Probes whose header misses every hidden match behave
exactly as the model says (tests/cpc checks the model against the same reference), so
only probes inside a fault's match are sent through the reference.

The probe streams are the fuzzer's (Fuzzer.next_probes) and the baseline's: uniform
random valid headers (fuzzer.hspace.valid_headers) from the edge ports in turn, at the
same rate. Both are generated once per seed and checked against every fault.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass

from cpc.refdp import RefDataPlane
from cpc.rules import FlowEntry, Instructions, Match
from fuzzer.engine import Fuzzer
from fuzzer.hspace import Sampler, valid_headers
from pazzdata.workloads import ROUTE_PRIORITY, Workload, next_hops

__all__ = ["Fault", "detects", "make_faults", "fuzzer_stream", "uniform_stream", "first_detections"]


@dataclass
class Fault:
    kind: str
    match: Match
    entries: list[FlowEntry]
    target: str


def _hidden_route(wl: Workload, net: int, mask: int, host: str) -> list[FlowEntry]:
    hdpid, hport = wl.hosts[host]
    hops = next_hops(wl.topo, hdpid)
    m = Match.build({"eth_type": (0x0800, 0xFFFF), "ipv4_dst": (net, mask)})
    out = []
    for dpid in sorted(wl.topo.switches):
        ports = [hport] if dpid == hdpid else hops[dpid][:1]
        out.append(
            FlowEntry(
                dpid,
                0,
                ROUTE_PRIORITY,
                m,
                Instructions((("output", ports[0]),)),
                cookie=0x99,
                rule_id=0,
            )
        )
    return out


def make_faults(wl: Workload, n: int, kind: str, seed: int = 7) -> list[Fault]:
    rng = random.Random(seed)
    nets = set(wl.prefixes)
    hosts = sorted(wl.hosts)
    out: list[Fault] = []
    while len(out) < n:
        host = rng.choice(hosts)
        if kind == "near":
            p = rng.choice(sorted(nets))
            q = p ^ (1 << rng.randrange(8, 32))
            if q in nets or (q >> 24) == 0:
                continue
            net, mask = q, 0xFFFFFF00
        else:
            k = rng.randrange(6, 13)
            mask = (0xFFFFFFFF << (32 - k)) & 0xFFFFFFFF
            net = rng.getrandbits(32) & mask
            if (net ^ 0x0A000000) & mask & 0xFF000000 == 0:  # overlaps 10.0.0.0/8
                continue
        entries = _hidden_route(wl, net, mask, host)
        out.append(Fault(kind, entries[0].match, entries, host))
    return out


def fuzzer_stream(model, seed: int, batch: int = 64, **kw) -> Iterator[tuple]:
    fz = Fuzzer(model, seed=seed, subscribe=False, min_replan_s=0.0, **kw)
    while True:
        probes = fz.next_probes(batch)
        if not probes:
            return
        fz.record(probes)
        for pr in probes:
            yield pr.ingress, pr.header


def uniform_stream(model, seed: int) -> Iterator[tuple]:
    rng = random.Random(seed)
    smp = Sampler(model.space, valid_headers(model.space))
    edges = model.topo.edge_ports()
    i = rng.randrange(len(edges))
    while True:
        i = (i + 1) % len(edges)
        yield edges[i], smp.uniform(rng)


def detects(model, ref: RefDataPlane, ingress, header) -> bool:
    for d, h in ref.send_with_headers(ingress, header):
        if d.kind != "egress":
            continue
        exp = model.expected(d.egress, h)
        if not any(e.verify_port == d.verify_port and e.verify_rule == d.verify_rule for e in exp):
            return True
    return False


def first_detections(model, wl: Workload, faults: list[Fault], stream, budget: int) -> list:
    """For each fault, the 1-based index of the first probe of stream that detects it,
    or None within budget probes."""
    refs = [RefDataPlane(wl.topo, f.entries + wl.entries, wl.groups) for f in faults]
    first: list[int | None] = [None] * len(faults)
    pending = set(range(len(faults)))
    for n, (ingress, h) in enumerate(stream, 1):
        if n > budget or not pending:
            break
        for j in list(pending):
            if faults[j].match.contains(h, ingress[1]) and detects(model, refs[j], ingress, h):
                first[j] = n
                pending.discard(j)
    return first
