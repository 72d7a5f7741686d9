"""Paper-rate detection simulation: the real fuzzer and tester on a virtual clock.

The network is the reference data plane (cpc.refdp) with a fault's hidden entries; the
tester is tester.engine.Tester (pazzd's defaults: a fault opens on its second sample
within 60 s, the first asks for re-probes), fed sFlow v5 datagrams that tester.emit
packs from the reference's deliveries, exactly as patched OVS reports them. Probes come
from the systems compared, at the paper's rates:

  pazz     fuzzer.engine.Fuzzer (endless plans), 1000 probes/s, its default shares for
           sampling 1/100 and sparser; pazz_rNN the same with random_share NN %;
           pazz_dense the same with the shares for dense sampling (fuzzer.plan);
  random   the paper's baseline: uniformly random valid headers from random edge ports,
           1000 probes/s;
  atpg     ATPG-style: one probe per intended rule (a header that rule matches, from an
           ingress whose shortest path crosses its switch), cycled at 500 probes/s, plus
           uniform random at 500 probes/s.

All three share production traffic: 10^6 packets/s, spread evenly over the edge ports,
each uniform over the TCP/UDP port 80/443 flows from the host's own prefixes to every
other host's prefixes. A SELECT group sends a packet down one bucket, picked by a hash of
its flow as Open vSwitch does (pazzlab.flowhash): every copy of a header from one ingress
takes the same path. sFlow samples each packet at its exit with probability 1/N, and the
collector sees a sample at the next whole second (the agent's 1 s polling).

10^6 packets/s are not generated one by one: only packets inside the fault's match can
differ from the model, and in-match sampled packets form a Poisson stream of rate
10^6 * p / N, where p (the in-match share of production traffic) comes from BDD counts.
Likewise the uniform prober's in-match sampled probes are a geometric stream. Every such
packet is still drawn as a concrete header, sent through the reference, and judged by the
tester. The fuzzer's probes are generated one by one (its schedule is not uniform).
"""

from __future__ import annotations

import heapq
import itertools
import math
import random
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field

from cpc.model import Model
from cpc.refdp import RefDataPlane
from fuzzer.engine import CONFIRM_SHARE, CORROBORATE_MAX, Fuzzer
from fuzzer.hspace import Sampler, range_bdd, valid_headers
from pazzdata.workloads import ACL_PRIORITY, Workload, generate
from pazzlab.flowhash import select_bucket
from pazzlab.paperfaults import PaperFault, paper_faults
from tester.emit import ReferenceEmitter, synthetic_ifmap
from tester.engine import Tester
from tester.store import FaultStore

__all__ = [
    "PROD_PPS",
    "FUZZ_PPS",
    "POLL_S",
    "Net",
    "Scenario",
    "atpg_probes",
    "build_scenarios",
    "fuzz_stream",
    "simulate",
]

PROD_PPS = 1e6
FUZZ_PPS = 1000.0
POLL_S = 1.0
PROD_PORTS = (80, 443)
MAC_DST, MAC_SRC = 0x020000000001, 0x020000000002
MAX_EVENTS = 20000  # per run: a bound, never reached in the paper's scenarios


def _exact(space, fld: str, v: int, width: int):
    return space.field_bdd(fld, v, (1 << width) - 1)


class Net:
    """One paper topology: workload, model, tester plumbing and production traffic."""

    def __init__(self, key: str, kind: str, size: int, rules: int, seed: int = 1) -> None:
        import time

        self.key = key
        self.wl: Workload = generate(kind, size, rules, seed=seed, rule_ids=True)
        t = time.perf_counter()
        self.model = Model(self.wl.topo)
        self.model.add_entries(self.wl.entries, self.wl.groups)
        self.build_s = time.perf_counter() - t
        self.space = self.model.space
        topo = self.wl.topo
        self.ports = [(d, p) for d in sorted(topo.switches) for p in topo.ports_of(d)]
        self.ifmap = synthetic_ifmap(self.ports)
        self.edges = topo.edge_ports()
        self.valid = valid_headers(self.space)
        self._prod()

    def _prod(self) -> None:
        sp = self.space
        owned: dict[str, list[int]] = {}
        for net, host in self.wl.prefixes.items():
            owned.setdefault(host, []).append(net)
        pre = {n: sp.field_bdd("ipv4_dst", n, 0xFFFFFF00) for n in self.wl.prefixes}
        src = {n: sp.field_bdd("ipv4_src", n, 0xFFFFFF00) for n in self.wl.prefixes}
        all_dst = sp.union(pre.values())
        port = sp.false
        for p in PROD_PORTS:
            port = port | _exact(sp, "tp_dst", p, 16)
        common = (
            _exact(sp, "eth_type", 0x0800, 16)
            & (_exact(sp, "ip_proto", 6, 8) | _exact(sp, "ip_proto", 17, 8))
            & port
            & range_bdd(sp, "tp_src", 1024, 65535)
            & _exact(sp, "vlan_vid", 0, 13)
            & _exact(sp, "eth_dst", MAC_DST, 48)
            & _exact(sp, "eth_src", MAC_SRC, 48)
        )
        self.prod: dict = {}
        for host, ingress in self.wl.hosts.items():
            mine = owned.get(host, [])
            own_dst = sp.union(pre[n] for n in mine)
            own_src = sp.union(src[n] for n in mine)
            self.prod[ingress] = common & all_dst & ~own_dst & own_src

    def tester(self, clock) -> Tester:
        t = Tester(self.model, FaultStore(":memory:"), self.ifmap, ports=self.ports, clock=clock)
        t.corroborate, t.corroborate_window = 2, 60.0  # pazzd's defaults
        return t


@dataclass
class Scenario:
    """One fault on one network: its reference data plane and its in-match shares."""

    net: Net
    fault: PaperFault
    ref: RefDataPlane = field(init=False)  # every outcome, each SELECT bucket an alternative
    ovs: RefDataPlane = field(init=False)  # the outcomes OVS gives: one bucket per flow
    prod_rate: float = field(init=False)  # in-match production packets per second
    uniform_p: float = field(init=False)  # in-match share of uniform valid headers

    def __post_init__(self) -> None:
        wl, m = self.net.wl, self.fault.match
        # Entries that cannot match any header of the fault's match never decide one (no
        # entry of these workloads rewrites a header), so the reference keeps the rest.
        keep = [e for e in self.fault.entries + wl.entries if e.match.overlaps(m)]
        self.ref = RefDataPlane(wl.topo, keep, wl.groups)
        self.ovs = RefDataPlane(wl.topo, keep, wl.groups, select=select_bucket)
        sp = self.net.space
        mb = sp.match_bdd(m.fields)
        per = PROD_PPS / len(self.net.prod)
        self._prod = []
        for ingress, u in self.net.prod.items():
            cell = u & mb
            if cell != sp.false:
                share = sp.count(cell) / sp.count(u)
                self._prod.append((ingress, per * share, cell))
        self.prod_rate = sum(r for _, r, _ in self._prod)
        self._prod_smp = {}
        vm = self.net.valid & mb
        self.uniform_p = sp.count(vm) / sp.count(self.net.valid)
        self._uniform_smp = Sampler(sp, vm) if vm != sp.false else None

    def prod_header(self, rng: random.Random):
        ingress, _, cell = rng.choices(self._prod, weights=[r for _, r, _ in self._prod])[0]
        smp = self._prod_smp.get(ingress)
        if smp is None:
            smp = self._prod_smp[ingress] = Sampler(self.net.space, cell)
        return ingress, smp.uniform(rng)

    def uniform_header(self, rng: random.Random):
        return rng.choice(self.net.edges), self._uniform_smp.uniform(rng)


# ------------------------------------------------------------------ probe streams


def fuzz_stream(
    net: Net,
    faults: list[PaperFault],
    seconds: float,
    seed: int,
    random_share: float | None = None,
    shares: dict | None = None,
    sampling: int = 100,
) -> dict:
    """Run the real fuzzer for `seconds` of virtual time at FUZZ_PPS (its default shares
    for sFlow sampling 1/sampling, or `shares`); for every fault, the (time, ingress,
    header) of its probes inside the fault's match.

    Fuzzer.record is left out: it keeps coverage metrics and nothing the schedule reads
    (tests/pazzlab/test_papersim.py checks that the probes are the same with it)."""
    now = [0.0]
    fz = Fuzzer(
        net.model,
        seed=seed,
        subscribe=False,
        clock=lambda: now[0],
        random_share=random_share,
        shares=shares,
        sampling=sampling,
    )
    batch = 50
    hits: dict[str, list] = {f.name: [] for f in faults}
    # Every fault's match fixes a prefix of ipv4_dst: test it first, the whole match after.
    checks = []
    for f in faults:
        v, m = f.match.get("ipv4_dst") or (0, 0)
        checks.append((v, m, f.match.contains, hits[f.name]))
    by_area: dict[str, int] = {}
    n = 0
    total = int(seconds * FUZZ_PPS)
    while n < total:
        now[0] = n / FUZZ_PPS
        probes = fz.next_probes(batch)
        if not probes:
            break
        for j, pr in enumerate(probes):
            by_area[pr.area] = by_area.get(pr.area, 0) + 1
            h, port = pr.header, pr.ingress[1]
            dst = h.get("ipv4_dst", 0)
            for v, m, contains, out in checks:
                if dst & m == v and contains(h, port):
                    out.append(((n + j) / FUZZ_PPS, pr.ingress, h))
        n += len(probes)
    return {"hits": hits, "probes": n, "sent_by_area": by_area}


def atpg_probes(net: Net, seed: int) -> list[tuple]:
    """One probe per intended rule: a header inside its match, from an ingress whose
    shortest path towards the destination crosses the rule's switch."""
    wl, rng = net.wl, random.Random(seed)
    topo = wl.topo
    owned: dict[str, list[int]] = {}
    for n, h in wl.prefixes.items():
        owned.setdefault(h, []).append(n)
    sw_hosts: dict[int, list[str]] = {}
    for h, (d, _) in wl.hosts.items():
        sw_hosts.setdefault(d, []).append(h)
    dist = {d: _bfs(topo, d) for d in topo.switches}
    crossing: dict[tuple[int, int], list[str]] = {}

    def hosts_via(s: int, d: int) -> list[str]:
        key = (s, d)
        if key not in crossing:
            crossing[key] = [
                h
                for a, hs in sw_hosts.items()
                if a != d and dist[a][s] + dist[s][d] == dist[a][d]
                for h in hs
            ]
        return crossing[key]

    out = []
    for e in wl.entries:
        dst, _ = e.match.get("ipv4_dst")
        if e.priority == ACL_PRIORITY:
            src, _ = e.match.get("ipv4_src")
            host = rng.choice([h for h in wl.hosts if wl.hosts[h][0] != e.dpid] or list(wl.hosts))
            proto, tp = e.match.get("ip_proto")[0], e.match.get("tp_dst")[0]
            hdr = _header(dst + rng.randrange(1, 255), src + rng.randrange(1, 255), proto, tp, rng)
        else:
            owner = wl.prefixes[dst]
            d = wl.hosts[owner][0]
            cands = hosts_via(e.dpid, d) if e.dpid != d else sorted(set(wl.hosts) - {owner})
            if not cands:
                continue
            host = rng.choice(cands)
            s = rng.choice(owned[host])
            hdr = _header(dst + rng.randrange(1, 255), s + rng.randrange(1, 255), 6, 80, rng)
        out.append((wl.hosts[host], hdr))
    rng.shuffle(out)
    return out


def _bfs(topo, src: int) -> dict[int, int]:
    adj: dict[int, list[int]] = {}
    for (a, _), (b, _) in topo.links.items():
        adj.setdefault(a, []).append(b)
    dist, q = {src: 0}, deque([src])
    while q:
        u = q.popleft()
        for v in adj.get(u, ()):
            if v not in dist:
                dist[v] = dist[u] + 1
                q.append(v)
    return dist


def _header(dst: int, src: int, proto: int, tp_dst: int, rng: random.Random) -> dict:
    return {
        "ipv4_dst": dst,
        "ipv4_src": src,
        "ip_proto": proto,
        "tp_dst": tp_dst,
        "tp_src": rng.randrange(1024, 65536),
        "eth_type": 0x0800,
        "vlan_vid": 0,
        "eth_dst": MAC_DST,
        "eth_src": MAC_SRC,
    }


# ------------------------------------------------------------------ one run


def _poisson(rate: float, t0: float, end: float, rng) -> Iterator[float]:
    t = t0
    while rate > 0:
        t += rng.expovariate(rate)
        if t > end:
            return
        yield t


def _geometric_times(p: float, pps: float, t0: float, end: float, rng) -> Iterator[float]:
    """Times of the successes of Bernoulli(p) trials at pps trials per second after t0."""
    if p <= 0:
        return
    t, lq = t0, math.log1p(-p) if p < 1 else None
    while True:
        k = 1 if lq is None else 1 + int(math.log(1.0 - rng.random()) / lq)
        t += k / pps
        if t > end:
            return
        yield t


def _sampled(items, n: int, rng) -> Iterator:
    for it in items:
        if rng.random() * n < 1:
            yield it


def simulate(
    sc: Scenario,
    system: str,
    sampling: int,
    t0: float,
    horizon: float,
    seed: int,
    fuzz_hits: list | None = None,
    atpg: tuple | None = None,
) -> dict:
    """Detection time of one run (None: not within horizon): when the tester opens the
    fault (detect_s) and the time of its first evidence (first_s), and what led to it."""
    rng = random.Random(seed)
    end = t0 + horizon
    now = [t0]
    tester = sc.net.tester(lambda: now[0])
    emitter = ReferenceEmitter(sampling_rate=sampling)
    reprobes: list = []
    tick = itertools.count()
    current: list = [None]  # the ingress of the sample being judged (None: production)
    copies = min(CORROBORATE_MAX, 3 * sampling)

    def on_suspect(egress, hdr, expected) -> None:
        # pazzd: the fuzzer sends the header again in 3N copies (Fuzzer.corroborate) from
        # the probe's ingress (Fuzzer.sender), or, for production traffic, from the
        # ingresses the model expects; the copies take CONFIRM_SHARE of the probe rate
        # and are sampled like any probe: only the sampled ones are events.
        ings = [current[0]] if current[0] is not None else [e.ingress for e in expected]
        ings = list(dict.fromkeys(ings))[:4]
        pps = FUZZ_PPS * CONFIRM_SHARE / max(len(ings), 1)
        for ing in ings:
            for t in _geometric_times(1 / sampling, pps, now[0], now[0] + copies / pps, rng):
                heapq.heappush(reprobes, (t, next(tick), ing, dict(hdr)))

    tester.on_suspect = on_suspect
    srcs = []
    if sc.prod_rate > 0:
        srcs.append(
            (t, "prod", None, None) for t in _poisson(sc.prod_rate / sampling, t0, end, rng)
        )
    if system.startswith("pazz"):  # the fuzzer, or a variant of its shares
        srcs.append(
            (t, "fuzz", ing, h)
            for t, ing, h in _sampled((x for x in fuzz_hits if t0 <= x[0] <= end), sampling, rng)
        )
    if system in ("random", "atpg") and sc._uniform_smp is not None:
        pps = FUZZ_PPS if system == "random" else FUZZ_PPS / 2
        srcs.append(
            (t, "uniform", None, None)
            for t in _geometric_times(sc.uniform_p / sampling, pps, t0, end, rng)
        )
    if system == "atpg" and atpg is not None:
        srcs.append(_atpg_events(atpg, sampling, t0, end, rng))
    events = heapq.merge(*srcs, key=lambda e: e[0])
    n = 0
    sources: dict[str, int] = {}
    for ev in _with_reprobes(events, reprobes):
        t, kind, ing, h = ev
        n += 1
        if n > MAX_EVENTS or t > end:
            break
        if kind == "prod":
            ing, h = sc.prod_header(rng)
        elif kind == "uniform":
            ing, h = sc.uniform_header(rng)
        current[0] = None if kind == "prod" else ing
        # Every copy the packet leaves by (a SELECT group picks one bucket per flow, as
        # OVS does). The event is a sampled packet and its copies are sampled with it:
        # each at 1/N, though not independently (no network here makes copies).
        outs = [(d, hf) for d, hf in sc.ovs.send_with_headers(ing, h) if d.kind == "egress"]
        if not outs:
            continue
        for d, final in outs:
            emitter.add(d.egress, final, d.verify_port, d.verify_rule)
        now[0] = math.ceil(t / POLL_S) * POLL_S  # the sample arrives at the next poll
        for dg in emitter.flush():
            tester.process_datagram(dg, now=now[0])
        sources[kind] = sources.get(kind, 0) + 1
        if tester.stats.faults_opened:
            rows = tester.store.faults("open")
            return {
                "detect_s": round(now[0] - t0, 3),
                # The fault's first evidence: the first of its corroborated samples.
                "first_s": round(min(r.first_seen for r in rows) - t0, 3),
                "verdicts": sorted({r.kind for r in rows}),
                "samples": sources,
            }
    return {"detect_s": None, "first_s": None, "verdicts": [], "samples": sources, "events": n}


def _with_reprobes(events, reprobes: list) -> Iterator:
    for ev in events:
        while reprobes and reprobes[0][0] <= ev[0]:
            t, _, ing, h = heapq.heappop(reprobes)
            yield t, "reprobe", ing, h
        yield ev
    while reprobes:
        t, _, ing, h = heapq.heappop(reprobes)
        yield t, "reprobe", ing, h


def _atpg_events(atpg: tuple, sampling: int, t0: float, end: float, rng) -> Iterator:
    """(positions in the cycle inside the match, cycle length, probes/s, [(ingress, hdr)])."""
    positions, length, pps, probes = atpg
    if not positions:
        return
    period = length / pps
    c = int(t0 // period)
    while True:
        base = c * period
        if base > end:
            return
        for j in positions:
            t = base + j / pps
            if t < t0:
                continue
            if t > end:
                return
            if rng.random() * sampling < 1:
                ing, h = probes[j]
                yield (t, "atpg", ing, h)
        c += 1


def build_scenarios(net: Net, seed: int = 1, hard: bool = True) -> list[Scenario]:
    return [Scenario(net, f) for f in paper_faults(net.wl, seed=seed, hard=hard)]
