"""Paper-rate detection simulation: the real fuzzer and tester on a virtual clock.

The network is the reference data plane (cpc.refdp) with a fault's hidden entries; the
tester is tester.engine.Tester (pazzd's defaults: a fault opens on its second sample
within 60 s, the first asks for re-probes), fed sFlow v5 datagrams that tester.emit
packs from the reference's deliveries, exactly as patched OVS reports them. Probes come
from the systems compared, at the paper's rates:

  pazz           fuzzer.engine.Fuzzer (endless plans), 1000 probes/s, its default shares
                 for the sFlow sampling (as pazzd picks them); pazz_rNN the same with
                 random_share NN %; pazz_dense the same with the shares for dense sampling;
  random         the paper's baseline: uniformly random valid headers from random edge
                 ports, 1000 probes/s;
  acl_uncovered  uniform over the model's ACL deny sets (500 probes/s) and uniform over
                 its uncovered space, the valid headers no intended entry matches (500/s).

Two observation modes (simulate's `mode`), every prober under both: U, the paper's (each
packet reported at its exit with probability 1/N), and P, ours (probes marked and
reported 1/1 at their exits, production at 1/N, and each packet sampled at 1/N at every
switch it enters over a link, the per-hop samples the tester judges).

All share production traffic: 10^6 packets/s, spread evenly over the edge ports, each
uniform over the TCP/UDP port 80/443 flows from the host's own prefixes to every other
host's prefixes. A SELECT group sends a packet down one bucket, picked by a hash of its
flow as Open vSwitch does (pazzlab.flowhash): every copy of a header from one ingress
takes the same path. The collector sees a sample at the next whole second (the agent's
1 s polling).

10^6 packets/s are not generated one by one: only packets inside the fault's match can
differ from the model, and in-match sampled packets form a Poisson stream of rate
10^6 * p / N (U), where p (the in-match share of production traffic) comes from BDD
counts; in P the in-match packets with at least one sampled point (exit or arrival) are
drawn from a Poisson stream bounded by the most points a packet has, thinned to each
packet's own count, and which of its points are sampled is drawn given that one is.
Likewise the baselines' in-match probes are geometric streams. Every such packet is still
drawn as a concrete header, sent through the reference, and judged by the tester. The
fuzzer's probes are generated one by one (its schedule is not uniform).
"""

from __future__ import annotations

import heapq
import itertools
import math
import random
from collections.abc import Iterator
from dataclasses import dataclass, field

from cpc.model import Model
from cpc.refdp import RefDataPlane
from cpc.selecthash import group_bucket
from fuzzer.engine import CONFIRM_SHARE, CORROBORATE_MAX, Fuzzer
from fuzzer.hspace import Sampler, range_bdd, valid_headers
from pazzdata.workloads import ACL_PRIORITY, Workload, generate
from pazzlab.flowhash import select_bucket
from pazzlab.paperfaults import PaperFault, paper_faults
from tester.detect import in_filter
from tester.emit import ReferenceEmitter, synthetic_ifmap
from tester.engine import MAX_REPLAY_INGRESSES, Tester
from tester.store import FaultStore

__all__ = [
    "PROD_PPS",
    "FUZZ_PPS",
    "MODES",
    "SYSTEMS",
    "POLL_S",
    "Net",
    "Scenario",
    "build_scenarios",
    "production_packets",
    "fuzz_stream",
    "simulate",
]

PROD_PPS = 1e6
FUZZ_PPS = 1000.0
POLL_S = 1.0
PROD_PORTS = (80, 443)
MAC_DST, MAC_SRC = 0x020000000001, 0x020000000002
MAX_EVENTS = 200000  # sampled packets per run: a bound, never reached in the paper's scenarios
MODES = ("U", "P")  # the observation: see simulate
SYSTEMS = ("pazz", "random", "acl_uncovered")  # the probers (pazz_* are variants of pazz)


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
        self.model.select = group_bucket  # as pazzd judges OVS (ovs.select_hash)
        self.build_s = time.perf_counter() - t
        self.space = self.model.space
        topo = self.wl.topo
        self.ports = [(d, p) for d in sorted(topo.switches) for p in topo.ports_of(d)]
        self.ifmap = synthetic_ifmap(self.ports)
        self.edges = topo.edge_ports()
        self.valid = valid_headers(self.space)
        self._prod()
        sp = self.space
        # The ACL baseline's two sets: what the model's ACLs drop, and what no intended
        # entry matches (distinct matches only: every route is on every switch).
        acls = {e.match.fields for e in self.wl.entries if e.priority == ACL_PRIORITY}
        every = {e.match.fields for e in self.wl.entries}
        self.deny = self.valid & sp.union(sp.match_bdd(f) for f in acls)
        self.uncovered = self.valid & ~sp.union(sp.match_bdd(f) for f in every)
        # The most points a packet is sampled at in mode P: each switch it enters over a
        # link, and its exit (no packet here is copied, and none loops).
        self.max_points = len(topo.switches) + 1

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


def production_packets(wl: Workload, host: str, n: int, rng: random.Random) -> list[tuple]:
    """n packets of `host`'s production traffic drawn as Net defines it (each field
    uniform, as a uniform header of Net.prod is): from one of the host's own /24s to one of
    every other host's, TCP or UDP, to port 80 or 443 from a port of 1024 and up.
    (src, dst, ip_proto, tp_src, tp_dst) tuples; none if the host owns no prefix."""
    mine = sorted(p for p, o in wl.prefixes.items() if o == host)
    theirs = sorted(p for p, o in wl.prefixes.items() if o != host)
    if not mine or not theirs:
        return []
    return [
        (
            (rng.choice(mine) & 0xFFFFFF00) | rng.randrange(256),
            (rng.choice(theirs) & 0xFFFFFF00) | rng.randrange(256),
            rng.choice((6, 17)),
            rng.randrange(1024, 65536),
            rng.choice(PROD_PORTS),
        )
        for _ in range(n)
    ]


@dataclass
class Scenario:
    """One fault on one network: its reference data plane and its in-match shares."""

    net: Net
    fault: PaperFault
    ref: RefDataPlane = field(init=False)  # every outcome, each SELECT bucket an alternative
    ovs: RefDataPlane = field(init=False)  # the outcomes OVS gives: one bucket per flow
    prod_rate: float = field(init=False)  # in-match production packets per second
    probe_ingresses: list | None = None  # where the baselines probe from (None: every edge)
    prod_pps: float = PROD_PPS  # the network's production packets per second, all hosts
    uniform_p: float = field(init=False)  # in-match share of uniform valid headers
    deny_p: float = field(init=False)  # in-match share of the model's ACL deny sets
    uncovered_p: float = field(init=False)  # in-match share of the model's uncovered space

    def __post_init__(self) -> None:
        wl, m = self.net.wl, self.fault.match
        # Entries that cannot match any header of the fault's match never decide one (no
        # entry of these workloads rewrites a header), so the reference keeps the rest.
        keep = [e for e in self.fault.entries + wl.entries if e.match.overlaps(m)]
        self.ref = RefDataPlane(wl.topo, keep, wl.groups)
        self.ovs = RefDataPlane(wl.topo, keep, wl.groups, select=select_bucket)
        sp = self.net.space
        mb = sp.match_bdd(m.fields)
        per = self.prod_pps / len(self.net.prod)
        self._prod = []
        for ingress, u in self.net.prod.items():
            cell = u & mb
            if cell != sp.false:
                share = sp.count(cell) / sp.count(u)
                self._prod.append((ingress, per * share, cell))
        self.prod_rate = sum(r for _, r, _ in self._prod)
        self._prod_smp = {}
        self._smp = {}
        for kind, whole in (
            ("uniform", self.net.valid),
            ("deny", self.net.deny),
            ("uncovered", self.net.uncovered),
        ):
            inside = whole & mb
            share = sp.count(inside) / sp.count(whole) if whole != sp.false else 0.0
            setattr(self, f"{kind}_p", share)
            self._smp[kind] = Sampler(sp, inside) if inside != sp.false else None
        if self.probe_ingresses is None:
            self.probe_ingresses = list(self.net.edges)

    def prod_header(self, rng: random.Random):
        ingress, _, cell = rng.choices(self._prod, weights=[r for _, r, _ in self._prod])[0]
        smp = self._prod_smp.get(ingress)
        if smp is None:
            smp = self._prod_smp[ingress] = Sampler(self.net.space, cell)
        return ingress, smp.uniform(rng)

    def probe_header(self, kind: str, rng: random.Random):
        """A baseline's in-match probe: uniform over valid headers ("uniform"), the ACL deny
        sets ("deny") or the uncovered space ("uncovered"), from one of its ingresses."""
        return rng.choice(self.probe_ingresses), self._smp[kind].uniform(rng)

    def uniform_header(self, rng: random.Random):
        return self.probe_header("uniform", rng)


# ------------------------------------------------------------------ probe streams


def fuzz_stream(
    net: Net,
    faults: list[PaperFault],
    seconds: float,
    seed: int,
    random_share: float | None = None,
    shares: dict | None = None,
    sampling: int = 100,
    pairs: list | None = None,
) -> dict:
    """Run the real fuzzer for `seconds` of virtual time at FUZZ_PPS (its default shares
    for sFlow sampling 1/sampling, or `shares`); for every fault, the (time, ingress,
    header) of its probes inside the fault's match. pairs: the fuzzer's (ingress,
    egress) pairs (None: every pair of edge ports; one for the paper's single-pair setting).

    Fuzzer.record is left out: it keeps coverage metrics and nothing the schedule reads
    (tests/pazzlab/test_papersim.py checks that the probes are the same with it)."""
    now = [0.0]
    fz = Fuzzer(
        net.model,
        pairs,
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


def _q(m: int, p: float) -> float:
    """P(at least one of m points sampled), each independently with probability p."""
    return 1.0 - (1.0 - p) ** m


def _points_given_one(m: int, p: float, rng) -> list[int]:
    """Which of m points are sampled (each with probability p), given that one is: the
    first by its truncated geometric law, the ones after it independently."""
    if p >= 1:
        return list(range(m))
    u = rng.random() * _q(m, p)
    j = min(int(math.log1p(-u) / math.log1p(-p)), m - 1)
    return [j] + [k for k in range(j + 1, m) if rng.random() < p]


def simulate(
    sc: Scenario,
    system: str,
    sampling: int,
    t0: float,
    horizon: float,
    seed: int,
    fuzz_hits: list | None = None,
    mode: str = "U",
) -> dict:
    """Detection time of one run (None: not within horizon): when the tester opens the
    fault (detect_s) and the time of its first evidence (first_s), and what led to it.

    mode U (the paper's observation): every packet, probe or production, is reported at
    its exit with probability 1/sampling, and nothing else is seen.
    mode P (ours): probes are marked and every one that leaves the network is reported
    (sampling rate 1, docs/verify-header.md "The probe mark"); production traffic is
    reported at 1/sampling; and every packet, probe or production, is also sampled at
    1/sampling at each switch it enters over a link (the per-hop ingress samples, judged
    by Tester.handle_hop_sample). Each packet's points are sampled independently."""
    if mode not in MODES:
        raise ValueError(f"mode {mode!r} not in {MODES}")
    marked = mode == "P"
    p = 1.0 / sampling
    probe_n = 1 if marked else sampling  # a probe's exit reports it with probability 1/probe_n
    rng = random.Random(seed)
    end = t0 + horizon
    now = [t0]
    tester = sc.net.tester(lambda: now[0])
    emitter = ReferenceEmitter(sampling_rate=sampling, ovs_marking=True)
    reprobes: list = []
    tick = itertools.count()
    current: list = [None]  # the ingress of the sample being judged (None: production)
    # pazzd corroborates with 3N copies at sampling 1/N, 3 with marked reports (probe_sampling)
    copies = min(CORROBORATE_MAX, 3 * probe_n)

    def on_suspect(egress, hdr, expected) -> None:
        # pazzd: the fuzzer sends the header again (Fuzzer.corroborate) from the probe's
        # ingress (Fuzzer.sender), or, for production traffic, from the ingresses the
        # model expects; the copies take CONFIRM_SHARE of the probe rate. In U only the
        # sampled copies are events; in P every copy is (each is reported).
        ings = [current[0]] if current[0] is not None else [e.ingress for e in expected]
        resend(list(dict.fromkeys(ings))[:MAX_REPLAY_INGRESSES], hdr)

    def on_unexplained(egress, hdr, verify_port) -> None:
        # pazzd (FaultEvents.unexplained): a production sample no ingress explains is
        # replayed from the edge ports whose Bloom bits its Verify_Port holds.
        if current[0] is not None:
            return  # a probe: on_suspect sent it again from its own ingress
        came = [p for p in sc.net.edges if p != tuple(egress) and in_filter(verify_port, p)]
        resend(came[:MAX_REPLAY_INGRESSES], hdr)

    def resend(ings, hdr) -> None:
        pps = FUZZ_PPS * CONFIRM_SHARE / max(len(ings), 1)
        for ing in ings:
            if marked:
                times = (now[0] + k / pps for k in range(1, copies + 1))
            else:
                times = _geometric_times(p, pps, now[0], now[0] + copies / pps, rng)
            for t in times:
                heapq.heappush(reprobes, (t, next(tick), ing, dict(hdr)))

    tester.on_suspect = on_suspect
    tester.on_unexplained = on_unexplained
    # In P a production packet is seen when one of its points (each link it arrives over,
    # each exit) is sampled: the packets with at least one are drawn from a Poisson stream
    # bounded by the most points a packet can have, and thinned to their own count.
    most = sc.net.max_points
    srcs = []
    if sc.prod_rate > 0:
        rate = sc.prod_rate * (_q(most, p) if marked else p)
        srcs.append((t, "prod", None, None) for t in _poisson(rate, t0, end, rng))
    if system.startswith("pazz"):  # the fuzzer, or a variant of its shares
        hits = (x for x in fuzz_hits if t0 <= x[0] <= end)
        srcs.append((t, "fuzz", ing, h) for t, ing, h in _sampled(hits, probe_n, rng))
    if system == "random":
        srcs.append(
            (t, "uniform", None, None)
            for t in _geometric_times(sc.uniform_p / probe_n, FUZZ_PPS, t0, end, rng)
        )
    if system == "acl_uncovered":
        for kind, share in (("deny", sc.deny_p), ("uncovered", sc.uncovered_p)):
            srcs.append(
                _tagged(kind, _geometric_times(share / probe_n, FUZZ_PPS / 2, t0, end, rng))
            )
    events = heapq.merge(*srcs, key=lambda e: e[0])
    n = 0
    sources: dict[str, int] = {}
    seen = {"probe_exits": 0, "probe_reports": 0, "prod_reports": 0, "hop_samples": 0}
    for ev in _with_reprobes(events, reprobes):
        t, kind, ing, h = ev
        if t > end:
            break
        prod = kind == "prod"
        if prod:
            ing, h = sc.prod_header(rng)
        elif kind in ("uniform", "deny", "uncovered"):
            ing, h = sc.probe_header(kind, rng)
        current[0] = None if prod else ing
        # Every copy the packet leaves by (a SELECT group picks one bucket per flow, as
        # OVS does) and, in P, every arrival over a link.
        outs, arrived = sc.ovs.walk(ing, h) if marked else (sc.ovs.send_with_headers(ing, h), [])
        exits = [(d, hf) for d, hf in outs if d.kind == "egress"]
        if prod and marked:
            pts = len(arrived) + len(exits)
            if pts > most:
                raise RuntimeError(f"a packet with {pts} points, more than the bound {most}")
            if rng.random() * _q(most, p) >= _q(pts, p):
                continue  # none of its points sampled
            picked = _points_given_one(pts, p, rng)
            arrived_s = [arrived[i] for i in picked if i < len(arrived)]
            exits = [exits[i - len(arrived)] for i in picked if i >= len(arrived)]
        else:
            # U: the event is a packet sampled at its exit, its copies with it (each at
            # 1/N, though not independently: no network here makes copies). P: a probe,
            # reported at every exit; its arrivals sampled at 1/N each.
            arrived_s = [a for a in arrived if rng.random() < p]
        if not prod and exits:
            seen["probe_exits"] += 1
        if not exits and not arrived_s:
            continue
        n += 1
        if n > MAX_EVENTS:
            raise RuntimeError(f"more than {MAX_EVENTS} sampled packets in one run")
        for d, final in exits:
            emitter.add(d.egress, final, d.verify_port, d.verify_rule, marked=marked and not prod)
        seen["prod_reports" if prod else "probe_reports"] += len(exits)
        seen["hop_samples"] += emitter.add_arrivals(arrived_s)
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
                "by_hop": any((r.localization or {}).get("sampled_at") == "hop" for r in rows),
                "samples": sources,
                "seen": seen,
                "tester": _tester_counts(tester),
            }
    return {
        "detect_s": None,
        "first_s": None,
        "verdicts": [],
        "by_hop": False,
        "samples": sources,
        "events": n,
        "seen": seen,
        "tester": _tester_counts(tester),
    }


def _tagged(kind: str, times) -> Iterator:
    return ((t, kind, None, None) for t in times)


def _tester_counts(tester: Tester) -> dict:
    st = tester.stats
    keys = ("reports", "consistent", "fault_samples", "hop_samples_judged", "hop_consistent")
    keys += ("hop_fault_samples", "hop_explained", "hop_unjudged", "faults_opened")
    return {k: getattr(st, k) for k in keys}


def _with_reprobes(events, reprobes: list) -> Iterator:
    for ev in events:
        while reprobes and reprobes[0][0] <= ev[0]:
            t, _, ing, h = heapq.heappop(reprobes)
            yield t, "reprobe", ing, h
        yield ev
    while reprobes:
        t, _, ing, h = heapq.heappop(reprobes)
        yield t, "reprobe", ing, h


def build_scenarios(
    net: Net, seed: int = 1, hard: bool = True, pair: tuple[str, str] | None = None
) -> list[Scenario]:
    """The faults of one network; with `pair` (source host, destination host), the
    paper's single-pair setting: faults on that pair's paths, probes from its source."""
    ings = [net.wl.hosts[pair[0]]] if pair else None
    faults = paper_faults(net.wl, seed=seed, hard=hard, heldout=pair is None, pair=pair)
    return [Scenario(net, f, probe_ingresses=ings) for f in faults]
