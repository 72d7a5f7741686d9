"""Steady-state detection on the reference data plane: random networks, hidden rules
installed at a random moment long after the last intended change, benign churn running.

A network (`random_network(seed)`): a random connected graph of switches (a random tree
plus extra links, some switches without hosts), hosts on edge ports, overlapping
destination prefixes from /8 to /26 (more specific wins by priority), shortest-path routes
and drop ACLs on TCP/UDP services at the destination's switch. Not the workload
generator's grids or fat-trees.

A fault (`make_fault`) is a set of flow entries the model does not know, placed in the
reference data plane only:
  acl_bypass  the headers of one ACL, admitted and forwarded at the ACL's switch;
  acl_bypass_24 / acl_bypass_32  the same, for one /24 or /32 inside the ACL's destination;
  fat_finger  a route whose prefix has one network bit flipped, on every switch of the path;
  wide        a /8 far from every intended prefix, routed to a random host on every switch.
  mask        a route installed with its mask 1 to 3 bits wider or narrower on one switch
              of its path (the intended entry replaced: same priority, cookie and rule ID).

A case runs the real Fuzzer (fuzzer.engine) at `rate` probes/s on a simulated clock:
warm-up until the fault's moment (uniform in [t_min, t_max] s), then probes until the
first one that the reference data plane (with the fault) delivers other than the model
expects. Benign churn (a route for a fresh prefix added or removed every `churn_s`
seconds, in the model and the reference alike) runs throughout.
"""

from __future__ import annotations

import dataclasses
import random
from dataclasses import dataclass, field

from cpc.model import Model
from cpc.refdp import RefDataPlane
from cpc.rules import FlowEntry, FlowMod, Instructions, Match
from cpc.topology import Topology
from fuzzer.engine import Fuzzer
from pazzdata.workloads import next_hops, random_links

from .sim import detects

__all__ = [
    "Net",
    "random_links",
    "random_network",
    "make_fault",
    "fault_plane",
    "run_case",
    "FAULT_KINDS",
]

FAULT_KINDS = ("acl_bypass", "acl_bypass_24", "acl_bypass_32", "fat_finger", "wide", "mask")
ACL_PRIORITY = 1000
_IP = {"eth_type": (0x0800, 0xFFFF)}


@dataclass
class Net:
    topo: Topology
    entries: list[FlowEntry] = field(default_factory=list)
    routes: list[tuple[int, int, tuple[int, int]]] = field(default_factory=list)  # net, len, port
    acls: list[FlowEntry] = field(default_factory=list)
    next_hop: dict[int, dict[int, list[int]]] = field(default_factory=dict)  # dst -> dpid -> ports
    cookie: int = 0x100

    def port_towards(self, dpid: int, owner: tuple[int, int]) -> int | None:
        """The port dpid sends traffic for the edge port owner out of (None: no path)."""
        if dpid == owner[0]:
            return owner[1]
        ports = self.next_hop[owner[0]].get(dpid)
        return ports[0] if ports else None


def _mask(n: int) -> int:
    return (0xFFFFFFFF << (32 - n)) & 0xFFFFFFFF


def random_network(seed: int, switches: int = 6, hosts: int = 4, prefixes: int = 24) -> Net:
    rng = random.Random(seed)
    topo = Topology()
    for d in range(1, switches + 1):
        topo.add_switch(d, f"s{d}", list(range(1, 9)))
    links, free = random_links(rng, switches, (0, switches // 2 + 1))
    for a, b in links:
        topo.add_link(a, b)
    # Hosts on a random subset of switches: some switches are transit only.
    host_sw = [rng.randrange(1, switches + 1) for _ in range(hosts)]
    net = Net(topo)
    for d in host_sw:
        p = (d, free[d].pop(0))
        topo.add_edge(p, f"h{d}-{p[1]}")
    edges = topo.edge_ports()
    net.next_hop = {d: next_hops(topo, d) for d in topo.switches}
    ident = 0
    # Overlapping prefixes inside 10.0.0.0/8 (and the /8 itself): /8 to /26.
    nets: list[tuple[int, int]] = [(0x0A000000, 8)]
    while len(nets) < prefixes:
        n = rng.choice((12, 16, 20, 24, 24, 24, 26))
        v = (0x0A000000 | rng.getrandbits(24)) & _mask(n)
        if (v, n) not in nets:
            nets.append((v, n))
    for v, n in nets:
        owner = rng.choice(edges)
        net.routes.append((v, n, owner))
        for dpid in topo.switches:
            port = net.port_towards(dpid, owner)
            if port is None:
                continue
            ident += 1
            m = Match.build({**_IP, "ipv4_dst": (v, _mask(n))})
            net.entries.append(
                FlowEntry(
                    dpid,
                    0,
                    100 + n,
                    m,
                    Instructions((("output", port),)),
                    cookie=0x10,
                    rule_id=ident,
                )
            )
    # ACLs at the destination's switch: drop one service towards one route's prefix.
    for v, n, owner in rng.sample(net.routes, min(6, len(net.routes))):
        sub = max(n, 24)
        dst = (v | (rng.getrandbits(32 - n) & ~_mask(n) & 0xFFFFFFFF)) & _mask(sub)
        fields = {
            **_IP,
            "ipv4_dst": (dst, _mask(sub)),
            "ip_proto": (rng.choice((6, 17)), 0xFF),
            "tp_dst": (rng.choice((22, 23, 445, 3389, 5432)), 0xFFFF),
        }
        ident += 1
        acl = FlowEntry(
            owner[0],
            0,
            ACL_PRIORITY,
            Match.build(fields),
            Instructions(()),
            cookie=0x20,
            rule_id=ident,
        )
        net.entries.append(acl)
        net.acls.append(acl)
    return net


def _route_port(net: Net, dpid: int, dst: int) -> int | None:
    """The port the intended routes send dst out of at dpid (longest prefix)."""
    best = None
    for v, n, owner in net.routes:
        if dst & _mask(n) == v and (best is None or n > best[0]):
            best = (n, net.port_towards(dpid, owner))
    return None if best is None else best[1]


def _overlap(q: int, n: int, w: int, k: int) -> bool:
    """Whether the prefixes q/n and w/k share an address (one holds the other)."""
    return (q ^ w) & _mask(min(n, k)) == 0


def _hidden(dpid: int, fields: dict, port: int, priority: int = 2000) -> FlowEntry:
    return FlowEntry(
        dpid, 0, priority, Match.build(fields), Instructions((("output", port),)), cookie=0x99
    )


def _route_everywhere(net: Net, v: int, n: int, owner) -> list[FlowEntry]:
    """A hidden route for v/n towards the edge port owner, on every switch on the way."""
    out = []
    for dpid in net.topo.switches:
        port = net.port_towards(dpid, owner)
        if port is not None:
            out.append(_hidden(dpid, {**_IP, "ipv4_dst": (v, _mask(n))}, port, 100 + n))
    return out


def make_fault(net: Net, kind: str, rng: random.Random) -> list[FlowEntry]:
    """The hidden entries of one fault (see the module docstring)."""
    if kind.startswith("acl_bypass"):
        acl = rng.choice(net.acls)
        fields = {f: (v, m) for f, v, m in acl.match.fields}
        v, m = fields["ipv4_dst"]
        if kind != "acl_bypass":
            n = 24 if kind.endswith("24") else 32
            n = max(n, bin(m).count("1"))
            fields["ipv4_dst"] = (
                (v | (rng.getrandbits(32) & ~m & 0xFFFFFFFF)) & _mask(n),
                _mask(n),
            )
        port = _route_port(net, acl.dpid, fields["ipv4_dst"][0])
        return [_hidden(acl.dpid, fields, port)]
    if kind == "fat_finger":
        while True:
            v, n, owner = rng.choice(net.routes)
            if n < 12:
                continue
            q = v ^ (1 << rng.randrange(32 - n, 32))
            # Outside every intended prefix: what production traffic never reaches.
            if not any(_overlap(q, n, w, k) for w, k, _ in net.routes):
                break
        return _route_everywhere(net, q, n, owner)
    if kind == "mask":
        v, n, _ = rng.choice([r for r in net.routes if r[1] < 32])
        e = rng.choice([x for x in net.entries if x.match.get("ipv4_dst") == (v, _mask(n))])
        k = min(n + rng.choice((-3, -2, -1, 1, 2, 3)), 32)
        fields = {f: (val, m) for f, val, m in e.match.fields}
        fields["ipv4_dst"] = (v & _mask(k), _mask(k))
        return [dataclasses.replace(e, match=Match.build(fields))]
    if kind == "wide":
        while True:
            q = rng.getrandbits(8) << 24
            if q >> 24 not in (0, 10, 127) and q >> 24 < 224:
                break
        return _route_everywhere(net, q, 8, rng.choice(net.topo.edge_ports()))
    raise ValueError(f"unknown fault kind {kind!r}")


def _replaced(entries: list[FlowEntry], fault: list[FlowEntry]) -> list[FlowEntry]:
    """The intended entries a fault's entries replace: same switch, table, priority,
    cookie and rule ID (a route typed wrong)."""
    keys = {(e.dpid, e.table, e.priority, e.cookie, e.rule_id) for e in fault}
    return [e for e in entries if (e.dpid, e.table, e.priority, e.cookie, e.rule_id) in keys]


def fault_plane(entries: list[FlowEntry], fault: list[FlowEntry]) -> list[FlowEntry]:
    """The network's entries with the fault: its entries first, the ones they replace out."""
    gone = {id(e) for e in _replaced(entries, fault)}
    return fault + [e for e in entries if id(e) not in gone]


class _Clock:
    t = 0.0

    def __call__(self) -> float:
        return self.t


def _churn(net: Net, model: Model, rng: random.Random, live: list[FlowEntry]) -> None:
    """One benign change, in the model and the reference alike: add a route for a fresh
    /24 in 172.16/12 at one switch, or remove the oldest such route."""
    if live and (len(live) > 4 or rng.random() < 0.4):
        e = live.pop(0)
        model.apply(FlowMod("delete_strict", e.dpid, e.table, e.priority, e.match))
        net.entries.remove(e)
        return
    dpid = rng.choice(sorted(net.topo.switches))
    v = 0xAC100000 | (rng.getrandbits(12) << 8)
    port = rng.choice(list(net.topo.switches[dpid].ports))
    net.cookie += 1
    e = FlowEntry(
        dpid,
        0,
        124,
        Match.build({**_IP, "ipv4_dst": (v, _mask(24))}),
        Instructions((("output", port),)),
        cookie=net.cookie,
    )
    model.apply(FlowMod("add", e.dpid, e.table, e.priority, e.match, e.instructions, e.cookie))
    net.entries.append(e)
    live.append(e)


def run_case(
    seed: int,
    kind: str,
    *,
    rate: float = 1000.0,
    t_min: float = 20.0,
    t_max: float = 40.0,
    horizon: float = 60.0,
    churn_s: float = 2.0,
    batch: int = 50,
    network: dict | None = None,
    shares: dict | None = None,
) -> dict:
    """One case; returns {detected, seconds (from the fault to the first detecting probe),
    probes, t_fault}. shares: the fuzzer's group shares (None: its defaults)."""
    rng = random.Random(seed)
    net = random_network(seed, **(network or {}))
    model = Model(net.topo)
    model.add_entries(net.entries)
    clock = _Clock()
    fz = Fuzzer(model, rate=rate, burst=batch, clock=clock, seed=seed, batch=batch, shares=shares)
    fault = make_fault(net, kind, rng)
    # a probe can reveal the fault only where one of these matches it
    watch = fault + _replaced(net.entries, fault)
    t_fault = rng.uniform(t_min, t_max)
    live: list[FlowEntry] = []
    next_churn = rng.uniform(0, churn_s)
    ref = None
    dt = batch / rate
    sent = 0
    while clock.t < t_fault + horizon:
        clock.t += dt
        while clock.t >= next_churn:
            _churn(net, model, rng, live)
            next_churn += churn_s
            ref = None
        probes = fz.next_probes(batch)
        fz.record(probes)
        if clock.t < t_fault:
            continue
        if ref is None:
            ref = RefDataPlane(net.topo, fault_plane(net.entries, fault))
        for pr in probes:
            sent += 1
            if any(e.match.contains(pr.header, pr.ingress[1]) for e in watch) and detects(
                model, ref, pr.ingress, pr.header
            ):
                return {
                    "detected": True,
                    "seconds": clock.t - t_fault,
                    "probes": sent,
                    "t_fault": t_fault,
                }
    return {"detected": False, "seconds": None, "probes": sent, "t_fault": t_fault}
