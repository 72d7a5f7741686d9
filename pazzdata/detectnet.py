"""Random networks, faults and benign churn for the steady-state detection harness
(bench/detect.py). Pure Python and seeded: the same seed gives the same network, faults
and churn. Not the demo's grids and fat-trees, nor pazzlab.steady's single-table networks.

A network (`random_network(seed)`):
- a random connected graph of 4-7 switches (a random tree plus extra links), with hosts on
  3-5 edge ports and some switches that carry no host (transit only);
- host k has the lab's default address 10.0.(k-1).1 (pazzlab.lab.default_addr) and MAC;
- a two-table pipeline. Table 0 holds drop ACLs on TCP/UDP services (priority 1000) at the
  destination's switch and a table-miss `goto_table:1`. Table 1 routes overlapping
  destination prefixes, from the covering 10.0.0.0/8 to /26 (priority 100 + prefix length,
  so the more specific wins), on shortest paths: one output, a SELECT group over
  equal-cost ports, or at the owner's switch a MAC rewrite (set_field eth_dst) and the
  host port;
- one critical flow between two hosts, on the longest single path.

A fault (`make_faults`) is a change behind the controller's back on one switch, of one of
the classes in FAULT_KINDS, with a witness: a header and an ingress for which the
reference data plane (cpc.refdp) with the fault delivers other than the intended rules do.
Churn (`Churn`) is a stream of benign controller updates: routes for fresh 172.16/12
prefixes on one switch, and /32 host routes along a whole path with the same outputs as
the route they refine (production traffic then carries other rule tags).
"""

from __future__ import annotations

import dataclasses
import random
from dataclasses import dataclass, field
from pathlib import Path

from cpc.fields import parse_header
from cpc.ofctl import format_flow, write_rules
from cpc.refdp import RefDataPlane
from cpc.rules import FlowEntry, Group, Instructions, Match
from cpc.topology import Topology

from .workloads import next_hops, random_links

__all__ = ["DetectNet", "FaultSpec", "Churn", "FAULT_KINDS", "random_network", "make_faults"]

FAULT_KINDS = (
    "hidden_subprefix",  # a hidden more specific entry in table 0, same actions as the route
    "hidden_table1",  # a hidden more specific route in table 1 (same or another output)
    "misroute",  # a route on a transit switch sent out of another link
    "acl_bypass",  # a hidden entry admitting what an ACL drops: only probes go there
    "delete_critical",  # a route under the critical flow deleted
    "delete_route",  # a route not under the critical flow deleted
    "rewrite_changed",  # the MAC rewrite of a table-1 route changed
    "fat_finger_mask",  # a route installed with a mask a few bits off
)
ACL_PRIORITY = 1000
HIDDEN_PRIORITY = 2000
HIDDEN_COOKIE = 0xBAD
ROUTE_BASE = 100  # table-1 route priority = ROUTE_BASE + prefix length
CHURN_PRIORITY = 140
SERVICES = (22, 23, 445, 3389, 5432)  # ACL'd services; production traffic uses 80 and 53
CHURN_HOST = 77  # production traffic also goes to .77 of each host's /24: host routes
_IP = {"eth_type": (0x0800, 0xFFFF)}
_HDR = {"eth_type": 0x0800, "ipv4_src": 0x0A0000FE, "ip_proto": 6, "tp_src": 7400, "tp_dst": 8080}


def mask(n: int) -> int:
    return (0xFFFFFFFF << (32 - n)) & 0xFFFFFFFF


def dotted(ip: int) -> str:
    return ".".join(str(ip >> s & 0xFF) for s in (24, 16, 8, 0))


def host_addr(k: int) -> tuple[int, str]:
    """Host k's address and MAC, as pazzlab.lab.default_addr gives them."""
    return 0x0A000001 | (k - 1) << 8, f"02:00:00:00:{k >> 8 & 0xFF:02x}:{k & 0xFF:02x}"


@dataclass(frozen=True)
class Route:
    net: int
    length: int
    owner: str  # host name


@dataclass
class DetectNet:
    topo: Topology
    hosts: dict[str, tuple[int, int]]  # name -> edge port
    ips: dict[str, int]
    macs: dict[str, str]
    routes: list[Route] = field(default_factory=list)
    entries: list[FlowEntry] = field(default_factory=list)
    groups: list[Group] = field(default_factory=list)
    acls: list[FlowEntry] = field(default_factory=list)
    critical: tuple[str, str] | None = None  # (from host, to host)
    next_hop: dict[int, dict[int, list[int]]] = field(default_factory=dict)

    # --- what the network intends --------------------------------------------------------------
    def lpm(self, dst: int) -> Route | None:
        best = None
        for r in self.routes:
            if dst & mask(r.length) == r.net and (best is None or r.length > best.length):
                best = r
        return best

    def route_entry(self, dpid: int, r: Route) -> FlowEntry | None:
        for e in self.entries:
            if (
                e.dpid == dpid
                and e.table == 1
                and e.match.get("ipv4_dst") == (r.net, mask(r.length))
            ):
                return e
        return None

    def ref(self, entries: list[FlowEntry] | None = None) -> RefDataPlane:
        return RefDataPlane(self.topo, self.entries if entries is None else entries, self.groups)

    def critical_header(self) -> dict:
        a, b = self.critical
        return parse_header(
            f"ipv4_src={dotted(self.ips[a])},ipv4_dst={dotted(self.ips[b])},tcp_src=7300,tcp_dst=80"
        )

    def critical_flow(self) -> dict:
        """The critical flow as pazzd.yaml's critical_flows take it."""
        a, b = self.critical
        return {
            "name": f"{a}-{b}",
            "from": self.topo.port_name(self.hosts[a]),
            "to": self.topo.port_name(self.hosts[b]),
            "header": f"ipv4_src={dotted(self.ips[a])},ipv4_dst={dotted(self.ips[b])},"
            "tcp_src=7300,tcp_dst=80",
            "timeout": 3.0,
        }

    def traffic(self) -> dict[str, list[tuple]]:
        """Production flows per source host, as pazzlab.demo.write_pcaps takes them:
        (dst, sport, proto, dport, src, dst host). Every ordered pair gets TCP/80 and UDP/53
        to the host's address and to .77 of its /24, the critical pair also its own flow."""
        out: dict[str, list[tuple]] = {h: [] for h in self.hosts}
        for a in sorted(self.hosts):
            for b in sorted(self.hosts):
                if a != b:
                    for dst in (self.ips[b], self.ips[b] - 1 + CHURN_HOST):
                        n = len(out[a])
                        out[a] += [
                            (dst, 5000 + n, 6, 80, None, b),
                            (dst, 5001 + n, 17, 53, None, b),
                        ]
        a, b = self.critical
        out[a] += [(self.ips[b], 7300, 6, 80, None, b)] * 4
        return out

    def write(self, topology: Path, rules: Path) -> None:
        """The daemon's files: topology YAML (edge ports named after the hosts) and a rule
        file of JSON lines, groups first."""
        topology.write_text(self.topo.to_yaml())
        write_rules(rules, self.entries, self.groups)


def random_network(seed: int) -> DetectNet:
    rng = random.Random(seed)
    n_sw = rng.randint(4, 7)
    links, free = random_links(rng, n_sw, (1, n_sw // 2 + 2))
    n_hosts = rng.randint(3, 5)
    # Hosts on at most n_sw - 1 switches: at least one switch is transit only.
    host_sw = [rng.randrange(1, n_sw + 1) for _ in range(n_hosts)]
    if len(set(host_sw)) == n_sw:
        # Move a host whose switch has no other (the first host, where it can be: moving
        # one that shares its switch would free none) to the second host's switch, or the
        # first after it with a free port.
        i = next(i for i, d in enumerate(host_sw) if host_sw.count(d) == 1 and d != host_sw[1])
        to = [host_sw[1], *sorted(set(host_sw))]
        host_sw[i] = next(d for d in to if d != host_sw[i] and host_sw.count(d) < len(free[d]))
    for i, d in enumerate(host_sw):
        if host_sw[: i + 1].count(d) > len(free[d]):  # no port left: another host switch
            host_sw[i] = next(e for e in sorted(set(host_sw)) if host_sw.count(e) < len(free[e]))
    edge = sorted((d, free[d].pop(0)) for d in host_sw)
    topo = Topology()  # every switch with the ports it uses, no more
    for d in range(1, n_sw + 1):
        topo.add_switch(d, f"s{d}", [p for p in range(1, 9) if p not in free[d]])
    for a, b in links:
        topo.add_link(a, b)
    hosts, ips, macs = {}, {}, {}
    for k, p in enumerate(edge, 1):
        name = f"h{k}"
        topo.add_edge(p, name)
        hosts[name] = p
        ips[name], macs[name] = host_addr(k)
    net = DetectNet(topo, hosts, ips, macs)
    net.next_hop = {d: next_hops(topo, d) for d in topo.switches}
    names = sorted(hosts)
    # Each host's own /24, the covering /8, and overlapping prefixes /12 to /26 that hold
    # no host address (a host is always reached through its own /24).
    routes = [Route(ip & mask(24), 24, h) for h, ip in ips.items()]
    routes.append(Route(0x0A000000, 8, rng.choice(names)))
    while len(routes) < len(names) + 1 + rng.randint(8, 14):
        n = rng.choice((12, 16, 20, 24, 24, 25, 26))
        v = (0x0A000000 | rng.getrandbits(24)) & mask(n)
        if any(r.net == v and r.length == n for r in routes):
            continue
        if n > 24 and any(ip & mask(n) == v for ip in ips.values()):
            continue
        routes.append(Route(v, n, rng.choice(names)))
    net.routes = routes
    gids: dict[tuple, int] = {}
    for r in routes:
        for d in sorted(topo.switches):
            acts = _route_actions(net, d, r.owner, gids)
            if acts is not None:
                net.entries.append(
                    FlowEntry(
                        d,
                        1,
                        ROUTE_BASE + r.length,
                        Match.build({**_IP, "ipv4_dst": (r.net, mask(r.length))}),
                        Instructions(acts),
                        cookie=0x10,
                    )
                )
    # ACLs at the destination's switch: one service towards a part of a route's region.
    for r in rng.sample(routes, min(len(routes), rng.randint(3, 5))):
        sub = rng.choice([n for n in (24, 28, 32) if n >= r.length])
        dst = (r.net | rng.getrandbits(32 - r.length) & ~mask(r.length)) & mask(sub)
        owner = hosts[r.owner][0]
        m = Match.build(
            {
                **_IP,
                "ipv4_dst": (dst, mask(sub)),
                "ip_proto": (rng.choice((6, 17)), 0xFF),
                "tp_dst": (rng.choice(SERVICES), 0xFFFF),
            }
        )
        if any(a.dpid == owner and a.match == m for a in net.acls):
            continue
        acl = FlowEntry(owner, 0, ACL_PRIORITY, m, Instructions(()), cookie=0x20)
        net.acls.append(acl)
        net.entries.append(acl)
    for d in sorted(topo.switches):
        net.entries.append(
            FlowEntry(d, 0, 0, Match.build({}), Instructions((), goto=1), cookie=0x30)
        )
    # The critical flow: the pair delivered on one path with the most hops.
    best = None
    ref = net.ref()
    for a in names:
        for b in names:
            if a == b:
                continue
            net.critical = (a, b)
            ds = ref.send(hosts[a], net.critical_header())
            if ds and all(x.kind == "egress" and x.egress == hosts[b] for x in ds):
                score = (len(ds) == 1, len(ds[0].hops))
                if best is None or score > best[0]:
                    best = (score, (a, b))
    if best is None:
        raise RuntimeError(f"seed {seed}: no host pair is delivered")
    net.critical = best[1]
    return net


def _route_actions(net: DetectNet, dpid: int, owner: str, gids: dict) -> tuple | None:
    """The actions of a route towards host owner at dpid (None: no path)."""
    edge = net.hosts[owner]
    if dpid == edge[0]:
        return (("set_field", "eth_dst", _mac_int(net.macs[owner])), ("output", edge[1]))
    ports = net.next_hop[edge[0]].get(dpid)
    if not ports:
        return None
    if len(ports) == 1:
        return (("output", ports[0]),)
    key = (dpid, tuple(ports))
    if key not in gids:
        gids[key] = sum(1 for k in gids if k[0] == dpid) + 1
        r = dpid % len(ports)
        order = ports[r:] + ports[:r]
        net.groups.append(Group(dpid, gids[key], "select", tuple((("output", p),) for p in order)))
    return (("group", gids[key]),)


def _mac_int(mac: str) -> int:
    return int(mac.replace(":", ""), 16)


@dataclass
class FaultSpec:
    """One fault: entries to add (`add`, hidden or changed, FlowEntry) and entries to
    delete (`delete`) on switch `dpid`, and a witness (ingress, header) for which the
    reference data plane with the fault delivers other than the intended rules.
    `keys` are the (table, priority, match) of every entry the fault touches: localization
    is right when it names one of them on `dpid`. Entries in `add` that replace an intended
    one keep its cookie; the harness gives them the rule ID the switch holds."""

    kind: str
    dpid: int
    title: str
    add: list[FlowEntry] = field(default_factory=list)
    delete: list[FlowEntry] = field(default_factory=list)
    witness: tuple[tuple[int, int], dict] | None = None

    @property
    def keys(self) -> set[tuple]:
        return {(e.table, e.priority, e.match) for e in [*self.add, *self.delete]}

    def apply(self, entries: list[FlowEntry]) -> list[FlowEntry]:
        """The switch's entries with the fault: deleted ones gone, added ones in (an
        added entry replaces one with the same table, priority and match)."""
        drop = {(e.dpid, e.table, e.priority, e.match) for e in [*self.delete, *self.add]}
        return [e for e in entries if (e.dpid, e.table, e.priority, e.match) not in drop] + self.add


def _differs(intended: RefDataPlane, faulty: RefDataPlane, ingress, header) -> bool:
    """Does the faulty network deliver header other than the intended one does (another
    outcome, path, egress header or tag)?"""

    def outcomes(ref):
        return sorted(
            repr((d.kind, d.egress, d.hops, d.verify_port, d.verify_rule, sorted(h.items())))
            for d, h in ref.send_with_headers(ingress, header)
        )

    return outcomes(intended) != outcomes(faulty)


def _witness(
    net: DetectNet,
    fault: FaultSpec,
    dsts: list[int],
    rng,
    extra: dict | None = None,
    exits: bool = False,
):
    """The first (ingress, header) among the hosts and destinations that shows the fault;
    with `exits`, only one that the faulty network still delivers (to some exit), so that
    its reports show it (a misroute that loops shows as a drop, or not at all)."""
    intended, faulty = net.ref(), net.ref(fault.apply(net.entries))
    ingresses = sorted(net.hosts.values())
    rng.shuffle(ingresses)
    for dst in dsts:
        for ing in ingresses:
            h = {**_HDR, "ipv4_dst": dst, **(extra or {})}
            if exits and not all(d.kind == "egress" for d in faulty.send(ing, h)):
                continue
            if _differs(intended, faulty, ing, h):
                return ing, h
    return None


def _inside(rng, net_: int, n: int, count: int = 6) -> list[int]:
    """A few addresses of net_/n at random."""
    return [(net_ | rng.getrandbits(32 - n) & ~mask(n)) & 0xFFFFFFFF for _ in range(count)]


def _sub_prefix(net: DetectNet, rng, r: Route) -> tuple[int, int] | None:
    """A /24-/30 inside route r's region that r decides (no more specific route in it)."""
    for _ in range(40):
        n = rng.randint(max(24, r.length), 30)
        v = (r.net | rng.getrandbits(32 - r.length) & ~mask(r.length)) & mask(n)
        if all(
            not (o.length > r.length and (o.net ^ v) & mask(min(o.length, n)) == 0)
            for o in net.routes
        ):
            return v, n
    return None


def make_faults(net: DetectNet, seed: int, kinds=FAULT_KINDS) -> list[FaultSpec]:
    """One fault of each kind, each with a witness; a kind this network has no place for is
    left out."""
    out = []
    for kind in kinds:
        rng = random.Random(f"{seed}:{kind}")
        for _ in range(30):
            f = _FAULTS[kind](net, rng)
            if f is not None and f.witness is not None:
                out.append(f)
                break
    return out


def _hidden(net: DetectNet, rng, table: int) -> FaultSpec | None:
    """A hidden entry for a /24-/30 inside a route's region, on a random switch: in table 0
    above the ACLs with the route's actions, or in table 1 as a more specific route with
    the same or (half the time) another output."""
    r = rng.choice(net.routes)
    sp = _sub_prefix(net, rng, r)
    d = rng.choice(sorted(net.topo.switches))
    e = net.route_entry(d, r)
    if sp is None or e is None:
        return None
    acts = e.instructions
    if table == 1 and rng.random() < 0.5:  # another output of the switch
        acts = Instructions((("output", rng.choice(sorted(net.topo.switches[d].ports))),))
    m = Match.build({**_IP, "ipv4_dst": (sp[0], mask(sp[1]))})
    if table == 0:
        hid = FlowEntry(d, 0, HIDDEN_PRIORITY, m, acts, cookie=HIDDEN_COOKIE)
        f = FaultSpec(
            "hidden_subprefix",
            d,
            f"s{d} table 0: hidden {dotted(sp[0])}/{sp[1]} "
            f"with the actions of the route to {dotted(r.net)}/{r.length}",
            add=[hid],
        )
    else:
        hid = FlowEntry(d, 1, ROUTE_BASE + sp[1], m, acts, cookie=HIDDEN_COOKIE)
        f = FaultSpec(
            "hidden_table1", d, f"s{d} table 1: hidden route {dotted(sp[0])}/{sp[1]}", add=[hid]
        )
    f.witness = _witness(net, f, _inside(rng, *sp), rng)
    return f


def _misroute(net: DetectNet, rng) -> FaultSpec | None:
    """A route sent out of another port, on a switch that host traffic crosses, where the
    packets still leave the network (a misroute that loops shows only as a drop). Switches
    with no host come first; where none has such a route, any other, to a link or host."""
    topo = net.topo
    host_sw = {p[0] for p in net.hosts.values()}
    ref = net.ref()
    crossed = {
        h.dpid
        for a in net.hosts
        for b in net.hosts
        if a != b
        for x in ref.send(net.hosts[a], {**_HDR, "ipv4_dst": net.ips[b]})
        for h in x.hops
    }
    transit = sorted(crossed - host_sw)
    others = sorted(crossed & host_sw)
    rng.shuffle(transit)
    rng.shuffle(others)
    for d in [*transit, *others]:
        entries = [e for e in net.entries if e.dpid == d and e.table == 1]
        rng.shuffle(entries)
        for e in entries[:8]:
            now = {a[1] for a in e.instructions.apply if a[0] == "output"}
            for a in e.instructions.apply:
                if a[0] == "group":
                    g = next(g for g in net.groups if (g.dpid, g.group_id) == (d, a[1]))
                    now |= {b[0][1] for b in g.buckets}
            for port in [p for p in topo.ports_of(d) if p not in now]:
                bad = dataclasses.replace(e, instructions=Instructions((("output", port),)))
                v, m = e.match.get("ipv4_dst")
                n = bin(m).count("1")
                f = FaultSpec(
                    "misroute",
                    d,
                    f"s{d}{'' if d in host_sw else ' (transit)'}: "
                    f"route to {dotted(v)}/{n} sent out of port {port}",
                    add=[bad],
                )
                f.witness = _witness(net, f, _inside(rng, v, n, 3), rng, exits=True)
                if f.witness is not None:
                    return f
    return None


def _acl_bypass(net: DetectNet, rng) -> FaultSpec | None:
    acl = rng.choice(net.acls)
    fields = {name: (v, m) for name, v, m in acl.match.fields}
    v, m = fields["ipv4_dst"]
    n = bin(m).count("1")
    if n < 32 and rng.random() < 0.5:  # a part of the ACL's destination only
        k = rng.randint(n + 1, 32)
        v = (v | rng.getrandbits(32 - n) & ~m) & mask(k)
        fields["ipv4_dst"], n = (v, mask(k)), k
    hid = FlowEntry(
        acl.dpid,
        0,
        HIDDEN_PRIORITY,
        Match.build(fields),
        Instructions((), goto=1),
        cookie=HIDDEN_COOKIE,
    )
    proto, port = fields["ip_proto"][0], fields["tp_dst"][0]
    f = FaultSpec(
        "acl_bypass",
        acl.dpid,
        f"s{acl.dpid}: hidden entry admitting the ACL-dropped "
        f"{dotted(v)}/{n} proto {proto} port {port}",
        add=[hid],
    )
    f.witness = _witness(net, f, _inside(rng, v, n), rng, {"ip_proto": proto, "tp_dst": port})
    return f


def _delete_critical(net: DetectNet, rng) -> FaultSpec | None:
    a, _b = net.critical
    hdr = net.critical_header()
    (d0,) = net.ref().send(net.hosts[a], hdr)[:1] or (None,)
    if d0 is None:
        return None
    hop = rng.choice(d0.hops)
    e = next(
        (
            x
            for x in net.entries
            if x.dpid == hop.dpid and x.table == 1 and x.match.contains(hdr, hop.in_port)
        ),
        None,
    )
    if e is None:
        return None
    v, m = e.match.get("ipv4_dst")
    f = FaultSpec(
        "delete_critical",
        e.dpid,
        f"s{e.dpid}: route to {dotted(v)}/{bin(m).count('1')} deleted (critical flow {a}->{_b})",
        delete=[e],
    )
    if _differs(net.ref(), net.ref(f.apply(net.entries)), net.hosts[a], hdr):
        f.witness = (net.hosts[a], hdr)
    return f


def _delete_route(net: DetectNet, rng) -> FaultSpec | None:
    hdr = net.critical_header()
    path = {
        (h.dpid, h.in_port) for d in net.ref().send(net.hosts[net.critical[0]], hdr) for h in d.hops
    }
    cands = [
        e
        for e in net.entries
        if e.table == 1 and not any(e.dpid == dp and e.match.contains(hdr, ip) for dp, ip in path)
    ]
    if not cands:
        return None
    e = rng.choice(cands)
    v, m = e.match.get("ipv4_dst")
    n = bin(m).count("1")
    f = FaultSpec(
        "delete_route", e.dpid, f"s{e.dpid}: route to {dotted(v)}/{n} deleted", delete=[e]
    )
    f.witness = _witness(net, f, _inside(rng, v, n), rng)
    return f


def _rewrite_changed(net: DetectNet, rng) -> FaultSpec | None:
    cands = [
        e
        for e in net.entries
        if e.table == 1 and any(a[0] == "set_field" for a in e.instructions.apply)
    ]
    e = rng.choice(cands)
    wrong = 0x020000EE0000 | rng.getrandbits(16)
    acts = tuple(
        ("set_field", "eth_dst", wrong) if a[0] == "set_field" else a for a in e.instructions.apply
    )
    bad = dataclasses.replace(e, instructions=Instructions(acts))
    v, m = e.match.get("ipv4_dst")
    n = bin(m).count("1")
    f = FaultSpec(
        "rewrite_changed",
        e.dpid,
        f"s{e.dpid} table 1: route to {dotted(v)}/{n} rewrites eth_dst to {wrong:012x}",
        add=[bad],
    )
    f.witness = _witness(net, f, _inside(rng, v, n), rng)
    return f


def _fat_finger_mask(net: DetectNet, rng) -> FaultSpec | None:
    e = rng.choice([x for x in net.entries if x.table == 1])
    v, m = e.match.get("ipv4_dst")
    n = bin(m).count("1")
    k = n + rng.choice((-3, -2, -1, 1, 2)) if n > 8 else n + rng.choice((1, 2))
    k = max(8, min(32, k))
    if k == n:
        return None
    fields = {name: (val, mk) for name, val, mk in e.match.fields}
    fields["ipv4_dst"] = (v & mask(k), mask(k))
    bad = dataclasses.replace(e, match=Match.build(fields))
    f = FaultSpec(
        "fat_finger_mask",
        e.dpid,
        f"s{e.dpid} table 1: route to {dotted(v)}/{n} installed as /{k}",
        add=[bad],
        delete=[e],
    )
    wide = min(n, k)
    f.witness = _witness(net, f, _inside(rng, v & mask(wide), wide, 18), rng)
    return f


_FAULTS = {
    "hidden_subprefix": lambda net, rng: _hidden(net, rng, 0),
    "hidden_table1": lambda net, rng: _hidden(net, rng, 1),
    "misroute": _misroute,
    "acl_bypass": _acl_bypass,
    "delete_critical": _delete_critical,
    "delete_route": _delete_route,
    "rewrite_changed": _rewrite_changed,
    "fat_finger_mask": _fat_finger_mask,
}


class Churn:
    """Benign controller updates, as lines for examples/controller_app.py --updates:
    alternately a route for a fresh 172.16/12 /24 on one switch (forwarding that only
    probes reach changes) and a /32 host route for .77 of a host's /24 on every switch
    of its paths, with the outputs of the route it refines (production traffic's rule tags
    change, its paths do not). At most `live` of each are kept; the oldest goes first."""

    def __init__(self, net: DetectNet, seed: int, live: int = 4) -> None:
        self.net, self.rng, self.live = net, random.Random(f"{seed}:churn"), live
        self.cold: list[FlowEntry] = []
        self.hot: list[list[FlowEntry]] = []
        self.cookie = 0x5000
        self.turn = 0
        self.count = 0  # FlowMods so far

    def batch(self) -> list[dict]:
        self.turn += 1
        lines = self._cold() if self.turn % 2 else self._hot()
        self.count += len(lines)
        return lines

    @staticmethod
    def _line(e: FlowEntry, command: str) -> dict:
        return {"dpid": e.dpid, "flow": format_flow(e), "command": command}

    def _cold(self) -> list[dict]:
        if len(self.cold) >= self.live:
            return [self._line(self.cold.pop(0), "delete_strict")]
        rng = self.rng
        d = rng.choice(sorted(self.net.topo.switches))
        v = 0xAC100000 | rng.getrandbits(12) << 8
        while any(e.match.get("ipv4_dst")[0] == v for e in self.cold):
            v = 0xAC100000 | rng.getrandbits(12) << 8
        self.cookie += 1
        e = FlowEntry(
            d,
            1,
            ROUTE_BASE + 24,
            Match.build({**_IP, "ipv4_dst": (v, mask(24))}),
            Instructions((("output", rng.choice(self.net.topo.ports_of(d))),)),
            cookie=self.cookie,
        )
        self.cold.append(e)
        return [self._line(e, "add")]

    def _hot(self) -> list[dict]:
        if len(self.hot) >= self.live:
            return [self._line(e, "delete_strict") for e in self.hot.pop(0)]
        net = self.net
        busy = {g[0].match for g in self.hot}
        dst = None
        for b in self.rng.sample(sorted(net.hosts), len(net.hosts)):
            dst = net.ips[b] - 1 + CHURN_HOST
            if Match.build({**_IP, "ipv4_dst": (dst, mask(32))}) not in busy:
                break
        else:  # every host has its host route: the oldest goes first
            return [self._line(e, "delete_strict") for e in self.hot.pop(0)]
        r = net.lpm(dst)
        self.cookie += 1
        m = Match.build({**_IP, "ipv4_dst": (dst, mask(32))})
        group = []
        for d in sorted(net.topo.switches):
            e = net.route_entry(d, r)
            if e is not None:
                group.append(FlowEntry(d, 1, CHURN_PRIORITY, m, e.instructions, cookie=self.cookie))
        self.hot.append(group)
        return [self._line(e, "add") for e in group]
