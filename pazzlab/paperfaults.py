"""The faults of the paper-scale evaluation (bench/paper.py), on pazzdata.workloads networks.

28 per network in the paper's proportions: 10 Type-p (inside the header space that
production traffic uses, so production traffic reveals them) and 18 Type-a (outside it:
only probes reach them). Each is a set of hidden flow entries the model does not know:

Type-p, on one switch on the paths towards an intended /24 route's owner:
  * misroute (4): the /24 sent out of another port, one that still delivers it;
  * subprefix (3): a /26 of it with the route's own actions (only the rule tag differs);
  * subprefix_misroute (3): a /26 of it out of another port.
Type-a:
  * acl_bypass (6): an entry above an intended ACL forwarding what it drops towards its
    destination, the ACL's whole match (3) or a /28 of its destination (3);
  * wide (6): a /6../9 route far outside 10.0.0.0/8 to a random host on every switch
    (sizes a uniform random prober finds at the paper's rates, as its baseline did);
  * adjacent (6): a /12../22 route ending at 9.255.255.255, next to the intended block
    10.0.0.0/8, to a random host on every switch.
And, reported apart from the 28 (the paper's random prober could not find them either):
  * fat_finger (6): an intended /24 with one network bit flipped, outside every prefix,
    on every switch (pazzlab.sim's "near" faults).
  * heldout (6, type "held"): a family the fuzzer was not designed against, to check that
    what helps the 28 is not tuned to them: a /4../28 route at a random address anywhere
    in IPv4 (inside the intended block or not), half of them also on a random protocol
    (TCP or UDP) and half of those on a random range of destination ports, on one random
    edge switch and the switches of its path to a random host; only probes from that
    switch's ingresses meet it. Each has a brute-force witness (it is regenerated until
    it has one).

The paper's single-pair setting (its Figures 9 and 10: probes between one source and one
destination) has its own draw, `pair=(source host, destination host)`: the same families
and counts (no held-out ones), each about that pair: Type-p faults on a switch of the
pair's shortest paths, on one of the destination's /24s, with a witness from the source;
ACL bypasses of the destination's own ACLs; wide, adjacent and fat-finger routes towards
the destination (the fat-fingers flip a bit of one of its /24s).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from cpc.refdp import RefDataPlane
from cpc.rules import FlowEntry, Instructions, Match
from pazzdata.workloads import ACL_PRIORITY, ROUTE_PRIORITY, Workload, next_hops
from pazzlab.sim import make_faults

__all__ = [
    "PaperFault",
    "paper_faults",
    "paper_pair",
    "FAMILIES",
    "TYPE_P",
    "TYPE_A",
    "HARD",
    "HELD_OUT",
]

TYPE_P = {"misroute": 4, "subprefix": 3, "subprefix_misroute": 3}
TYPE_A = {"acl_bypass": 6, "wide": 6, "adjacent": 6}
HARD = {"fat_finger": 6}
HELD_OUT = {"heldout": 6}
FAMILIES = {**TYPE_P, **TYPE_A, **HARD, **HELD_OUT}
HIDDEN_COOKIE = 0x99
M24 = 0xFFFFFF00


@dataclass
class PaperFault:
    name: str  # family-index, e.g. "wide-3"
    family: str
    type: str  # "p", "a", "hard" or "held"
    match: Match
    entries: list[FlowEntry]
    note: str = ""


def _entry(dpid: int, priority: int, match: Match, actions) -> FlowEntry:
    return FlowEntry(
        dpid, 0, priority, match, Instructions(tuple(actions)), cookie=HIDDEN_COOKIE, rule_id=0
    )


def _ip_match(net: int, mask: int) -> Match:
    return Match.build({"eth_type": (0x0800, 0xFFFF), "ipv4_dst": (net, mask)})


def _dist(topo, dst: int) -> dict[int, int]:
    hops = next_hops(topo, dst)
    dist = {dst: 0}
    changed = True
    while changed:  # hop counts from the next-hop sets (small graphs)
        changed = False
        for u, ports in hops.items():
            for p in ports:
                v = topo.links[(u, p)][0]
                if v in dist and dist.get(u, 1 << 30) > dist[v] + 1:
                    dist[u] = dist[v] + 1
                    changed = True
    return dist


def _detour_port(topo, s: int, d: int, dist: dict[int, int], avoid=None) -> int | None:
    """A port of s that is not a shortest next hop towards d: a link to a neighbour no
    farther from d than s is (so the packet is not sent straight back: no loop), else a
    host port of s (the packets reach the wrong host)."""
    hops = set(next_hops(topo, d)[s])
    cands = [
        p
        for (u, p), (v, _) in topo.links.items()
        if u == s and p not in hops and dist.get(v, 1 << 30) <= dist[s]
    ]
    if not cands:
        cands = [p for (u, p) in topo.edges if u == s and (u, p) != avoid]
    return min(cands) if cands else None


def _route_actions(wl: Workload, s: int, net: int):
    for e in wl.entries:
        if e.dpid == s and e.priority == ROUTE_PRIORITY and e.match.get("ipv4_dst") == (net, M24):
            return e.instructions.apply
    raise KeyError(f"no route for {net:#x} on {s}")


def _type_p(wl: Workload, rng: random.Random, family: str, i: int, pair=None) -> PaperFault | None:
    topo = wl.topo
    nets = sorted(wl.prefixes)
    if pair:
        nets = [n for n in nets if wl.prefixes[n] == pair[1]]
    net = rng.choice(nets)
    owner = wl.hosts[wl.prefixes[net]][0]
    dist = _dist(topo, owner)
    cands = sorted(d for d in topo.switches if d != owner)
    if pair:  # a switch of the pair's shortest paths
        src = wl.hosts[pair[0]][0]
        back = _dist(topo, src)
        cands = [d for d in cands if back.get(d, 1 << 30) + dist.get(d, 1 << 30) == dist[src]]
    s = rng.choice(cands)
    if family == "subprefix":
        sub = net | (rng.randrange(4) << 6)
        m = _ip_match(sub, 0xFFFFFFC0)
        acts = _route_actions(wl, s, net)
        return PaperFault(
            f"{family}-{i}", family, "p", m, [_entry(s, ROUTE_PRIORITY + 1, m, acts)], f"s{s}"
        )
    # (in the pair setting, not back to the source: a switch never sends a packet out of
    # the port it came in by)
    port = _detour_port(topo, s, owner, dist, wl.hosts[pair[0]] if pair else None)
    if port is None:
        return None
    if family == "misroute":
        m = _ip_match(net, M24)
    else:
        m = _ip_match(net | (rng.randrange(4) << 6), 0xFFFFFFC0)
    e = _entry(s, ROUTE_PRIORITY + 1, m, [("output", port)])
    return PaperFault(f"{family}-{i}", family, "p", m, [e], f"s{s} port {port}")


def _witness(wl: Workload, f: PaperFault, sources=None) -> bool:
    """Some production-like packet (TCP/80 from a host to an address in the fault's match)
    leaves the faulty reference at an exit or with tags the intended one never gives it
    (a fault that only drops packets sends no report: the blackhole monitor's case)."""
    keep = [e for e in wl.entries if e.match.overlaps(f.match)]
    good = RefDataPlane(wl.topo, keep, wl.groups)
    bad = RefDataPlane(wl.topo, f.entries + keep, wl.groups)
    net, mask = f.match.get("ipv4_dst")
    owner = wl.prefixes.get(net & M24)
    for host, ingress in sorted(wl.hosts.items()):
        if host == owner or (sources is not None and host not in sources):
            continue
        h = {
            "eth_type": 0x0800,
            "ipv4_dst": net | (~mask & 0x0000000F),
            "ipv4_src": 0x0B000001,
            "ip_proto": 6,
            "tp_dst": 80,
            "tp_src": 40000,
        }
        if _differs(good, bad, ingress, h):
            return True
    return False


def _acl_bypass(wl: Workload, rng: random.Random, i: int, dst=None) -> PaperFault:
    acls = [e for e in wl.entries if e.priority == ACL_PRIORITY]
    if dst is not None:  # the destination's own ACLs
        acls = [e for e in acls if wl.prefixes[e.match.get("ipv4_dst")[0]] == dst]
    acl = rng.choice(acls)
    m = acl.match
    if i >= 3:  # a /28 of the ACL's destination
        net, _ = m.get("ipv4_dst")
        fields = {f: (v, k) for f, v, k in m.fields}
        fields["ipv4_dst"] = (net | (rng.randrange(16) << 4), 0xFFFFFFF0)
        m = Match.build(fields)
    dst_net = acl.match.get("ipv4_dst")[0]
    acts = _route_actions(wl, acl.dpid, dst_net)
    e = _entry(acl.dpid, ACL_PRIORITY + 1, m, acts)
    return PaperFault(f"acl_bypass-{i}", "acl_bypass", "a", m, [e], f"s{acl.dpid}")


def _everywhere(wl: Workload, m: Match, host: str) -> list[FlowEntry]:
    hdpid, hport = wl.hosts[host]
    hops = next_hops(wl.topo, hdpid)
    return [
        _entry(d, ROUTE_PRIORITY, m, [("output", hport if d == hdpid else hops[d][0])])
        for d in sorted(wl.topo.switches)
    ]


def _wide(wl: Workload, rng: random.Random, i: int, dst=None) -> PaperFault:
    k = 6 + i % 4
    mask = (0xFFFFFFFF << (32 - k)) & 0xFFFFFFFF
    while True:
        net = rng.getrandbits(32) & mask
        if (net ^ 0x0A000000) & mask & 0xFF000000 and net >> 24 not in (0, 127):
            break  # far from 10.0.0.0/8 (and not 0/8 or loopback)
    m = _ip_match(net, mask)
    host = rng.choice(sorted(wl.hosts))
    host = dst or host
    return PaperFault(f"wide-{i}", "wide", "a", m, _everywhere(wl, m, host), f"/{k}")


def _adjacent(wl: Workload, rng: random.Random, i: int, dst=None) -> PaperFault:
    k = (12, 14, 16, 18, 20, 22)[i]
    start = 0x0A000000 - (1 << (32 - k))  # ends at 9.255.255.255, next to 10.0.0.0
    m = _ip_match(start, (0xFFFFFFFF << (32 - k)) & 0xFFFFFFFF)
    host = dst or rng.choice(sorted(wl.hosts))
    return PaperFault(f"adjacent-{i}", "adjacent", "a", m, _everywhere(wl, m, host), f"/{k}")


def _heldout_match(rng: random.Random) -> Match:
    k = rng.randint(4, 28)
    mask = (0xFFFFFFFF << (32 - k)) & 0xFFFFFFFF
    fields = {"eth_type": (0x0800, 0xFFFF), "ipv4_dst": (rng.getrandbits(32) & mask, mask)}
    if rng.random() < 0.5:
        fields["ip_proto"] = (rng.choice((6, 17)), 0xFF)
        if rng.random() < 0.5:
            pk = rng.randint(4, 16)
            pmask = (0xFFFF << (16 - pk)) & 0xFFFF
            fields["tp_dst"] = (rng.getrandbits(16) & pmask, pmask)
    return Match.build(fields)


def _heldout(wl: Workload, rng: random.Random, i: int) -> PaperFault:
    topo = wl.topo
    edge_switches = sorted({d for d, _ in wl.hosts.values()})
    for _ in range(1000):
        m = _heldout_match(rng)
        s = rng.choice(edge_switches)
        host = rng.choice(sorted(wl.hosts))
        hdpid, hport = wl.hosts[host]
        entries, d, seen = [], s, set()
        while d not in seen:  # the hidden route's path from s to the host
            seen.add(d)
            if d == hdpid:
                entries.append(_entry(d, ROUTE_PRIORITY + 1, m, [("output", hport)]))
                break
            port = next_hops(topo, hdpid)[d][0]
            entries.append(_entry(d, ROUTE_PRIORITY + 1, m, [("output", port)]))
            d = topo.links[(d, port)][0]
        f = PaperFault(f"heldout-{i}", "heldout", "held", m, entries, f"s{s} {m}")
        if _brute_witness(wl, f, [p for p in topo.edges if p[0] == s], rng):
            return f
    raise RuntimeError("no held-out fault with a witness found on this network")


def _brute_witness(wl: Workload, f: PaperFault, ingresses, rng: random.Random) -> bool:
    """Some header in the fault's match, from one of these ingresses, leaves the faulty
    reference at an exit or with tags the intended one never gives it (random search)."""
    keep = [e for e in wl.entries if e.match.overlaps(f.match)]
    good = RefDataPlane(wl.topo, keep, wl.groups)
    bad = RefDataPlane(wl.topo, f.entries + keep, wl.groups)
    fixed = {n: (v, m) for n, v, m in f.match.fields}
    for _ in range(64):
        h = {"eth_type": 0x0800, "ip_proto": rng.choice((6, 17)), "vlan_vid": 0}
        for n, w in (("ipv4_dst", 32), ("ipv4_src", 32), ("tp_dst", 16), ("tp_src", 16)):
            v, m = fixed.get(n, (0, 0))
            h[n] = (v & m) | (rng.getrandbits(w) & ~m)
        if "ip_proto" in fixed:
            h["ip_proto"] = fixed["ip_proto"][0]
        h["eth_dst"], h["eth_src"] = 0x020000000001, 0x020000000002
        ingress = rng.choice(ingresses)
        if _differs(good, bad, ingress, h):
            return True
    return False


def paper_pair(wl: Workload) -> tuple[str, str]:
    """The single pair of the paper's setting: the first host by name, and the host
    farthest from it (the first by name among the farthest)."""
    src = sorted(wl.hosts)[0]
    dist = _dist(wl.topo, wl.hosts[src][0])
    far = max(dist.get(wl.hosts[h][0], -1) for h in wl.hosts)
    return src, min(h for h in wl.hosts if dist.get(wl.hosts[h][0], -1) == far)


def _pair_fat_fingers(wl: Workload, rng: random.Random, dst: str, n: int) -> list[PaperFault]:
    nets = set(wl.prefixes)
    own = sorted(k for k, h in wl.prefixes.items() if h == dst)
    out: list[PaperFault] = []
    while len(out) < n:
        q = rng.choice(own) ^ (1 << rng.randrange(8, 32))
        if q in nets or (q >> 24) == 0 or any(f.match.get("ipv4_dst")[0] == q for f in out):
            continue
        m = _ip_match(q, M24)
        i = len(out)
        out.append(
            PaperFault(f"fat_finger-{i}", "fat_finger", "hard", m, _everywhere(wl, m, dst), "/24")
        )
    return out


def paper_faults(
    wl: Workload,
    seed: int = 1,
    hard: bool = True,
    heldout: bool = True,
    pair: tuple[str, str] | None = None,
) -> list[PaperFault]:
    """The 28 faults (and the 6 hard and 6 held-out ones) of one network, deterministic
    per seed (the 28 do not depend on the others); pair: (source host, destination host)
    of the single-pair setting (module docstring), with no held-out faults."""
    rng = random.Random(seed)
    out: list[PaperFault] = []
    dst = pair[1] if pair else None
    for family, n in TYPE_P.items():
        i = tries = 0
        while i < n:
            tries += 1
            if tries > 1000:
                raise RuntimeError(f"no {family} fault found on this network")
            f = _type_p(wl, rng, family, i, pair)
            if f is not None and _witness(wl, f, pair[:1] if pair else None):
                out.append(f)
                i += 1
    out += [_acl_bypass(wl, rng, i, dst) for i in range(TYPE_A["acl_bypass"])]
    out += [_wide(wl, rng, i, dst) for i in range(TYPE_A["wide"])]
    out += [_adjacent(wl, rng, i, dst) for i in range(TYPE_A["adjacent"])]
    if hard and pair:
        out += _pair_fat_fingers(wl, rng, dst, HARD["fat_finger"])
    elif hard:
        for i, f in enumerate(make_faults(wl, HARD["fat_finger"], "near", seed=seed)):
            out.append(
                PaperFault(f"fat_finger-{i}", "fat_finger", "hard", f.match, f.entries, "/24")
            )
    if heldout and not pair:
        hrng = random.Random(f"heldout {seed}")
        out += [_heldout(wl, hrng, i) for i in range(HELD_OUT["heldout"])]
    return out


def _differs(good, bad, ingress, h) -> bool:
    """h, sent from ingress, leaves the faulty network somewhere or with tags the intended
    one does not give it."""
    ok = {(d.egress, d.verify_port, d.verify_rule) for d in good.send(ingress, h)}
    return any(
        d.kind == "egress" and (d.egress, d.verify_port, d.verify_rule) not in ok
        for d in bad.send(ingress, h)
    )
