"""Deterministic generator of the paper's evaluation networks.

Grids of n x n switches (4, 9, 16) and k-ary fat-trees (k=4: 20 switches), each
with hosts on edge ports, destination-based multipath routing (SELECT groups
over equal-cost next hops) for as many /24 destination prefixes as the rule
count asks for, and ACL-style rules over several fields at the edge. The files
it writes are the topology YAML and rule JSON lines that pazzctl reads.
"""

from __future__ import annotations

import dataclasses
import random
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

from cpc.ofctl import write_rules
from cpc.rules import FlowEntry, Group, Instructions, Match
from cpc.topology import Topology

ROUTE_PRIORITY = 24
ROUTE_COOKIE = 0x10
ACL_PRIORITY = 1000
WIDE_ACL_PRIORITY = 2000
WIDE_ACL_COOKIE = 0x30  # the lines generate(wide_acls=...) adds


@dataclass
class Workload:
    topo: Topology
    hosts: dict[str, tuple[int, int]]  # host name -> edge port
    entries: list[FlowEntry] = field(default_factory=list)
    groups: list[Group] = field(default_factory=list)
    prefixes: dict[int, str] = field(default_factory=dict)  # /24 network -> owning host

    def write(self, topo_path: str | Path, rules_path: str | Path) -> None:
        Path(topo_path).write_text(self.topo.to_yaml())
        write_rules(rules_path, self.entries, self.groups)


def grid(n: int) -> tuple[Topology, dict[str, tuple[int, int]]]:
    """n x n switches; port 1..4 = N, E, S, W links; port 5 = the host."""
    topo = Topology()
    dp = lambda r, c: r * n + c + 1  # noqa: E731
    for r in range(n):
        for c in range(n):
            topo.add_switch(dp(r, c), f"s{dp(r, c)}", [1, 2, 3, 4, 5])
    for r in range(n):
        for c in range(n):
            if c + 1 < n:
                topo.add_link((dp(r, c), 2), (dp(r, c + 1), 4))
            if r + 1 < n:
                topo.add_link((dp(r, c), 3), (dp(r + 1, c), 1))
    hosts = {}
    for d in sorted(topo.switches):
        topo.add_edge((d, 5), f"h{d}")
        hosts[f"h{d}"] = (d, 5)
    return topo, hosts


def fattree(k: int = 4) -> tuple[Topology, dict[str, tuple[int, int]]]:
    """k-ary fat-tree: (k/2)^2 core, k pods of k/2 aggregation and k/2 edge switches."""
    half = k // 2
    # dpids: core 100+i, aggregation 200+i, edge 300+i; from k=16 on (128 aggregation
    # switches) 1000+i, 2000+i, 3000+i so that the layers do not overlap.
    base = 100 if k * half <= 100 else 1000
    topo = Topology()
    core = [base + i for i in range(half * half)]
    for c in core:
        topo.add_switch(c, f"c{c - base}", range(1, k + 1))
    hosts = {}
    for p in range(k):
        aggs = [2 * base + p * half + i for i in range(half)]
        edges = [3 * base + p * half + i for i in range(half)]
        for a in aggs:
            topo.add_switch(a, f"a{a - 2 * base}", range(1, k + 1))
        for e in edges:
            topo.add_switch(e, f"e{e - 3 * base}", range(1, k + 1))
        for i, a in enumerate(aggs):
            for j in range(half):  # agg uplink j (port half+1+j) -> core i*half+j, port p+1
                topo.add_link((a, half + 1 + j), (core[i * half + j], p + 1))
            for j, e in enumerate(edges):  # agg downlink j (port 1+j) -> edge j uplink i
                topo.add_link((a, 1 + j), (e, half + 1 + i))
        for e in edges:
            for h in range(half):
                name = f"h{len(hosts) + 1}"
                topo.add_edge((e, 1 + h), name)
                hosts[name] = (e, 1 + h)
    return topo, hosts


def next_hops(topo: Topology, dst: int) -> dict[int, list[int]]:
    """For each switch, the ports on shortest paths towards switch dst."""
    dist = {dst: 0}
    q = deque([dst])
    adj: dict[int, list[tuple[int, int]]] = {d: [] for d in topo.switches}
    for (a, pa), (b, _) in topo.links.items():
        adj[a].append((pa, b))
    while q:
        u = q.popleft()
        for _, v in adj[u]:
            if v not in dist:
                dist[v] = dist[u] + 1
                q.append(v)
    return {
        u: sorted(p for p, v in adj[u] if dist.get(v, -1) == dist[u] - 1)
        for u in topo.switches
        if u != dst
    }


def random_links(rng: random.Random, switches: int, extra: tuple[int, int], ports: int = 8):
    """A random connected graph of switches 1..switches: a random tree, then
    rng.randrange(*extra) more links between random pairs. Returns the links
    (((dpid, port), (dpid, port)), ...) and each switch's ports still free."""
    free = {d: list(range(1, ports + 1)) for d in range(1, switches + 1)}
    links = []
    for d in range(2, switches + 1):
        peer = rng.randrange(1, d)
        links.append(((peer, free[peer].pop(0)), (d, free[d].pop(0))))
    for _ in range(rng.randrange(*extra)):
        a, b = rng.sample(range(1, switches + 1), 2)
        links.append(((a, free[a].pop(0)), (b, free[b].pop(0))))
    return links, free


def generate(
    kind: str,
    size: int,
    rules: int,
    seed: int = 1,
    rule_ids: bool = False,
    acls: int = 8,
    wide_acls: str | None = None,
) -> Workload:
    """A workload of about `rules` flow entries on the grid (size=n) or fat-tree (size=k).

    wide_acls adds `acls` lines over every destination at each edge switch that has
    hosts (sources and services, as a firewall at the edge has them): "inline" in the
    routing table, above the routes; "stage" in a table of their own (table 0: drop, else
    goto table 1, where the routes then are), as an ACL pipeline stage.
    """
    if wide_acls not in (None, "inline", "stage"):
        raise ValueError(f"wide_acls: {wide_acls!r} is not inline or stage")
    topo, hosts = grid(size) if kind == "grid" else fattree(size)
    rng = random.Random(seed)
    wl = Workload(topo, hosts)
    host_names = sorted(hosts, key=lambda h: int(h[1:]))
    nsw = len(topo.switches)
    nprefix = max(len(host_names), (rules - acls * len(host_names)) // nsw)
    # Group table: one SELECT group per (switch, next-hop set), created on demand.
    gids: dict[tuple[int, tuple[int, ...]], int] = {}
    hops_to = {d: next_hops(topo, d) for d in {p[0] for p in hosts.values()}}
    ident = 0

    def action_for(dpid: int, ports: list[int]):
        if len(ports) == 1:
            return (("output", ports[0]),)
        key = (dpid, tuple(ports))
        if key not in gids:
            gid = sum(1 for k in gids if k[0] == dpid) + 1
            gids[key] = gid
            # Buckets rotated by dpid: OVS picks a SELECT bucket by a hash of the flow with
            # the same basis on every switch (pazzlab.flowhash), so one bucket order
            # everywhere would send a flow through bucket i at every tier (ECMP polarization).
            r = dpid % len(ports)
            order = ports[r:] + ports[:r]
            wl.groups.append(Group(dpid, gid, "select", tuple((("output", p),) for p in order)))
        return (("group", gids[key]),)

    for i in range(nprefix):
        net = 0x0A000000 + (i << 8)  # 10.0.0.0/24, 10.0.1.0/24, ...
        owner = host_names[i % len(host_names)]
        wl.prefixes[net] = owner
        hdpid, hport = hosts[owner]
        for dpid in sorted(topo.switches):
            ident += 1
            ports = [hport] if dpid == hdpid else hops_to[hdpid][dpid]
            wl.entries.append(
                FlowEntry(
                    dpid,
                    0,
                    ROUTE_PRIORITY,
                    Match.build({"eth_type": (0x0800, 0xFFFF), "ipv4_dst": (net, 0xFFFFFF00)}),
                    Instructions(action_for(dpid, ports)),
                    cookie=ROUTE_COOKIE,
                    rule_id=ident if rule_ids else 0,
                )
            )
    # ACL-style rules at each host's edge switch: protect some of the host's own prefixes
    # from some sources and services (an ACL over any destination would cut every
    # destination class in two: the cross-product that atomic predicates pay for).
    nets = sorted(wl.prefixes)
    for h in host_names:
        dpid = hosts[h][0]
        own = [n for n in nets if wl.prefixes[n] == h]
        for _ in range(acls):
            ident += 1
            src = nets[rng.randrange(len(nets))]
            fields = {
                "ipv4_dst": (own[rng.randrange(len(own))], 0xFFFFFF00),
                "eth_type": (0x0800, 0xFFFF),
                "ipv4_src": (src, 0xFFFFFF00),
                "ip_proto": (rng.choice([6, 17]), 0xFF),
                "tp_dst": (rng.choice([22, 23, 53, 445, 3389]), 0xFFFF),
            }
            wl.entries.append(
                FlowEntry(
                    dpid,
                    0,
                    ACL_PRIORITY,
                    Match.build(fields),
                    Instructions(()),
                    cookie=0x20,
                    rule_id=ident if rule_ids else 0,
                )
            )
    if wide_acls is not None:
        _add_wide_acls(wl, rng, acls, wide_acls == "stage", ident, rule_ids)
    return wl


WIDE_SERVICES = (22, 23, 445, 3389)


def _add_wide_acls(
    wl: Workload, rng: random.Random, acls: int, stage: bool, ident: int, rule_ids: bool
) -> None:
    """The lines of generate(wide_acls=...), in table 0; rule IDs after `ident`."""
    nets = sorted(wl.prefixes)
    if stage:  # the routes move to the next stage
        wl.entries[:] = [
            dataclasses.replace(e, table=1) if e.cookie == ROUTE_COOKIE else e for e in wl.entries
        ]
    edge_switches = sorted({dpid for dpid, _ in wl.hosts.values()})
    for dpid in edge_switches:
        for i in range(acls):
            ident += 1
            mask = rng.choice((0xFFFF0000, 0xFFFFFF00))
            fields = {
                "eth_type": (0x0800, 0xFFFF),
                "ipv4_src": (nets[rng.randrange(len(nets))] & mask, mask),
                "ip_proto": (6, 0xFF),
                "tp_dst": (rng.choice(WIDE_SERVICES), 0xFFFF),
            }
            permit = stage and i % 4 == 3  # a permit above the drops, as firewalls have
            wl.entries.append(
                FlowEntry(
                    dpid,
                    0,
                    WIDE_ACL_PRIORITY + (acls - i),
                    Match.build(fields),
                    Instructions(goto=1) if permit else Instructions(()),
                    cookie=WIDE_ACL_COOKIE,
                    rule_id=ident if rule_ids else 0,
                )
            )
    if stage:
        for dpid in sorted(wl.topo.switches):
            ident += 1
            wl.entries.append(
                FlowEntry(
                    dpid,
                    0,
                    0,
                    Match.build({}),
                    Instructions(goto=1),
                    cookie=WIDE_ACL_COOKIE,
                    rule_id=ident if rule_ids else 0,
                )
            )
