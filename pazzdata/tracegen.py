"""Random networks in the Stanford update-trace format (topo.txt, vlan.txt, updates, acls/).

    gen = generate(random.Random(7), routers=6, acls=4)
    gen.write("/tmp/net")                  # then pazzdata.stanford.load("/tmp/net")
    python -m pazzdata.tracegen OUTDIR --routers 6 --acls 4 --seed 7

The names are those of real router dumps: Cisco `te1/3`, `Port-channel1`, `Vlan200`,
Juniper `xe-0/0/1`, `ge-1/2/3.100`, `vlan.100`, Linux `bond0.10`, names with `_`, `-`
and `.`; routers with and without `_rtr`, some ending in `_in` or `_out`; ACLs numbered
or named, some with `_`. Links are directed: bidirectional, one way, shared interfaces
(one interface linked with several devices); interfaces only in rules or VLANs are edges.
ACLs are chains of elements `<router>_<acl>_<port>_<in|out>` on links and on edge
interfaces; some ACLs have no lines. `Generated.element_acl` is the ground truth that an
importer has to read back from the names.
"""

from __future__ import annotations

import argparse
import ipaddress
import random
import re
from dataclasses import dataclass, field
from pathlib import Path

from cpc.fields import PREFIX_MASKS

WORDS = ("core", "edge", "bb", "dist", "agg", "gw", "border", "cr", "ar", "sw", "coza", "lab")
SITES = ("sea", "lax", "campus", "dc-2", "b12")


@dataclass
class Generated:
    routers: list[str]
    element_acl: dict[str, str | None]  # element -> ACL `<router>_<name>` (None: no lines)
    topo: list[str]
    vlan: list[str]
    updates: list[str]
    acl_files: dict[str, list[str]] = field(default_factory=dict)  # acls/NAME -> lines

    def write(self, directory: str | Path) -> Path:
        d = Path(directory)
        (d / "acls").mkdir(parents=True, exist_ok=True)
        for name, lines in (("topo.txt", self.topo), ("vlan.txt", self.vlan)):
            (d / name).write_text("".join(f"{x}\n" for x in lines))
        (d / "updates").write_text("".join(f"{x}\n" for x in self.updates))
        for name, lines in self.acl_files.items():
            (d / "acls" / name).write_text("".join(f"{x}\n" for x in lines))
        return d


# --- names ------------------------------------------------------------------------------------
def router_name(rng: random.Random) -> str:
    w, n, site = rng.choice(WORDS), rng.randint(0, 99), rng.choice(SITES)
    return rng.choice(
        [
            f"{w}{'ab'[n % 2]}_rtr",
            f"{w}-{n}",
            f"{w}{n}.{site}",
            f"{w}_{n}",
            f"{w}_in",
            f"{w}{n}_out",
            f"{w.upper()}-RTR-{n:02d}",
            f"{w}{n}-re0.{site}",
            f"{w}_rtr_{n}",
        ]
    )


def iface_name(rng: random.Random) -> str:
    a, b, c, v = rng.randint(0, 9), rng.randint(0, 9), rng.randint(0, 48), rng.randint(1, 4094)
    return rng.choice(
        [
            f"te{a}/{b}",
            f"gi{a}/{c}",
            f"Te{a}/0/0/{b}",
            f"GigabitEthernet{a}/{b}",
            f"HundredGigE0/{a}/0/{b}",
            f"Port-channel{c}",
            f"po{c}",
            f"Vlan{v}",
            f"xe-{a}/{b}/{c}",
            f"ge-{a}/{b}/{c}.{v}",
            f"ae{c}.0",
            f"et-{a}/0/{b}:{c % 4}",
            f"vlan.{v}",
            f"vlan{v}",  # an interface, unless vlan.txt defines it on that router
            f"irb.{v}",
            f"bond0.{v}",
            f"swp{c}s{a}",
            f"mgmt_{a}",
            f"to_core_{b}",
            "uplink_in",
            f"port_{a}_out",
        ]
    )


def acl_name(rng: random.Random) -> str:
    n = rng.randint(1, 199)
    return rng.choice(
        [
            str(n),
            str(2000 + n),
            "inACL",
            "outACL",
            f"EDGE-IN-{n}",
            f"acl_{rng.choice(WORDS)}",
            f"v4.filter{n}",
            "PROTECT_RE",
            "in",
            f"mgmt_{n % 7}_in",
        ]
    )


def _unique(rng, make, n, taken=()):
    out: list[str] = []
    seen = set(taken)
    while len(out) < n:
        x = make(rng)
        if x not in seen:
            seen.add(x)
            out.append(x)
    return out


# --- rule lines --------------------------------------------------------------------------------
def _ip(x: int) -> str:
    return str(ipaddress.IPv4Address(x))


def _acl_addr(rng, pool) -> tuple[str, str]:
    base = rng.choice(pool)[0] | rng.getrandbits(8)
    kind = rng.randrange(8)
    if kind <= 2:
        return "any", "null"
    if kind == 3:
        return _ip(base), "null"  # one host
    if kind == 4:
        return _ip(base), _ip((1 << rng.randint(0, 24)) - 1)  # contiguous wildcard
    if kind == 5:
        return _ip(base), _ip(rng.choice([0x00FF00FF, 0x0000FF00, 0x00FF0000, 0x0F0F0F0F]))
    if kind == 6:
        return _ip(base), "0.0.0.0"
    return rng.choice([("null", "null"), ("any", "any"), (_ip(base), "255.255.255.255")])


def _acl_port(rng) -> tuple[str, str]:
    lo = rng.choice([22, 53, 80, 137, 443, 1024, 7000, 8998, rng.randrange(65536)])
    kind = rng.randrange(7)
    if kind <= 1:
        return "null", "null"
    if kind == 2:
        return str(lo), str(lo)
    if kind == 3:
        return str(lo), str(rng.randint(lo, min(65535, lo + rng.choice([2, 10, 1000]))))
    if kind == 4:
        return str(lo), rng.choice(["null", "any"])
    return rng.choice([("0", "65535"), ("any", "null"), ("1024", "65535")])


def acl_line(rng, acl: str, name: str, pool, prio: int) -> str:
    proto = rng.choice([("0", "255")] * 3 + [("6", "6")] * 3 + [("17", "17")] * 2 + [("1", "1")])
    if rng.random() < 0.1:
        lo = rng.randrange(256)
        proto = rng.choice([("null", "null"), (str(lo), str(rng.randint(lo, 255)))])
    src, dst = _acl_addr(rng, pool), _acl_addr(rng, pool)
    sport = dport = ("null", "null")
    if proto in (("6", "6"), ("17", "17")):
        sport = _acl_port(rng) if rng.random() < 0.3 else sport
        dport = _acl_port(rng) if rng.random() < 0.7 else dport
    action = rng.choice(["permit", "permit", "deny"])
    fields = [*proto, *src, *sport, *dst, *dport]
    return f"acl {acl} access-list {name} {action} {' '.join(fields)} {prio}"


def _prefix_pool(rng, n: int) -> list[tuple[int, int]]:
    order = [(0, 0)] if rng.random() < 0.7 else []  # the pool in order of drawing
    pool = set(order)
    while len(pool) < n:
        if pool and rng.random() < 0.4:  # nested in one of the others: longest-prefix match
            pbase, pplen = rng.choice(order)
            plen = min(32, pplen + rng.randint(1, 8))
            base = pbase | (rng.getrandbits(32) & ((1 << (32 - pplen)) - 1))
        else:
            base, plen = rng.getrandbits(32), rng.choice([8, 12, 16, 16, 20, 24, 24, 28, 32])
        p = (base & PREFIX_MASKS[plen], plen)
        if p not in pool:
            pool.add(p)
            order.append(p)
    return sorted(pool)


# --- the network --------------------------------------------------------------------------------
def generate(
    rng: random.Random,
    routers: int = 5,
    acls: int = 3,
    prefixes: int = 12,
    acl_lines: int = 6,
    ecmp: float = 0.1,
) -> Generated:
    """A random network: `routers` routers, `acls` ACLs, about `prefixes` prefixes a
    router, a fraction `ecmp` of them with two or three routes (next hops)."""
    for _ in range(200):
        g = _attempt(rng, max(2, routers), acls, prefixes, acl_lines, ecmp)
        if g is not None:
            return g
    raise RuntimeError("no unambiguous naming found")


def _attempt(rng, n_routers, n_acls, n_prefixes, acl_lines, ecmp) -> Generated | None:
    routers = _unique(rng, router_name, n_routers)
    ifaces = {r: _unique(rng, iface_name, rng.randint(2, 6)) for r in routers}

    # Physical directed links between router interfaces: a spanning tree, then extras.
    links: set[tuple[tuple[str, str], tuple[str, str]]] = set()

    def link(a, b):
        if a == b or a[0] == b[0] and rng.random() < 0.8:  # rarely: a cable between two ports
            return
        kind = rng.random()
        links.add((a, b))
        if kind < 0.8:  # else one way only
            links.add((b, a))

    order = rng.sample(routers, len(routers))
    for k in range(1, len(order)):
        a, b = order[k], rng.choice(order[:k])
        link((a, rng.choice(ifaces[a])), (b, rng.choice(ifaces[b])))
    for _ in range(rng.randint(0, n_routers)):
        a, b = rng.sample(routers, 2)
        link((a, rng.choice(ifaces[a])), (b, rng.choice(ifaces[b])))
    if rng.random() < 0.5 and n_routers >= 3:  # a shared segment: one interface, several peers
        hub, *members = rng.sample(routers, rng.randint(3, min(4, n_routers)))
        h = (hub, rng.choice(ifaces[hub]))
        ends = [(m, rng.choice(ifaces[m])) for m in members]
        for e in ends:
            link(h, e)
        if rng.random() < 0.5:  # the members hear one another too
            for e in ends:
                for f in ends:
                    link(e, f)

    # ACLs: each on one router, applied to 1..3 (interface, direction) of it, in chains.
    acl_keys: dict[str, tuple[str, str]] = {}  # key -> (router, name)
    chains: dict[tuple[str, str, str], list[str]] = {}  # (router, iface, dir) -> elements
    element_acl: dict[str, str | None] = {}
    usage: dict[str, dict[tuple[str, str], list[str]]] = {}  # router -> (port, dir) -> ACLs
    silent = set()
    for _ in range(n_acls):
        r, name = rng.choice(routers), acl_name(rng)
        key = f"{r}_{name}"
        if key in acl_keys:
            continue
        acl_keys[key] = (r, name)
        if rng.random() < 0.12:
            silent.add(key)  # in topo.txt, no lines in the trace
        places = [(rng.choice(ifaces[r]), rng.choice(["in", "out"])) for _ in range(3)]
        for iface, dr in dict.fromkeys(places):
            el = f"{key}_{iface}_{dr}"
            if el in element_acl:  # another ACL and interface spell the same name
                return None
            chains.setdefault((r, iface, dr), []).append(el)
            element_acl[el] = None if key in silent else key
            usage.setdefault(r, {}).setdefault((iface, dr), []).append(name)

    def send_end(e):  # where traffic sent out of router end e leaves its out-chain
        ch = chains.get((*e, "out"))
        return (ch[-1], "permit") if ch else e

    def recv_end(e):
        ch = chains.get((*e, "in"))
        return (ch[0], "inport") if ch else e

    topo = []
    for (r, iface, dr), ch in chains.items():
        for x, y in zip(ch, ch[1:], strict=False):
            topo.append(f"{x} permit {y} inport")
        if dr == "out":
            topo.append(f"{r} {iface} {ch[0]} inport")
        else:
            topo.append(f"{ch[-1]} permit {r} {iface}")
    for a, b in sorted(links):
        (x, px), (y, py) = send_end(a), recv_end(b)
        topo.append(f"{x} {px} {y} {py}")
    rng.shuffle(topo)

    # VLANs, forwarding rules and ACL lines.
    vlan = []
    vlans: dict[str, list[str]] = {}
    in_topo = {(x, px) for line in topo for x, px in [line.split()[:2], line.split()[2:]]}
    for r in routers:
        nums = [n for n in rng.sample(range(1, 4095), 2) if f"vlan{n}" not in ifaces[r]]
        nums = nums[: rng.randint(0, 2)]
        for n in nums:
            members = rng.sample(ifaces[r], rng.randint(1, min(3, len(ifaces[r]))))
            if rng.random() < 0.3:
                members.append(f"Ethernet1/{rng.randint(1, 48)}")  # only here: an edge
            members = list(dict.fromkeys(members))
            vlan.append(f"{r} vlan{n} {' '.join(members)}")
            vlans.setdefault(r, []).append(f"vlan{n}")
    pool = _prefix_pool(rng, n_prefixes * 2)
    fwd = []
    for r in routers:
        edge_only = [f"gi9/{k}" for k in range(rng.randint(0, 2))]
        named = [i for i in ifaces[r] if (r, i) in in_topo or not re.fullmatch(r"vlan\d+", i)]
        outs = named * 3 + edge_only + vlans.get(r, []) + ["self"]
        for base, plen in rng.sample(pool, min(len(pool), n_prefixes)):
            if plen < 32 and rng.random() < 0.1:
                base |= rng.getrandbits(32 - plen)  # host bits set: the mask drops them
            hops = [rng.choice(outs)]
            if rng.random() < ecmp:  # equal-cost routes: more next hops, same prefix
                hops += rng.sample(outs, rng.randint(1, 2))
            fwd += [f"fwd {r} {base} {plen} {port} {plen}" for port in dict.fromkeys(hops)]
    acl_text: list[str] = []
    acl_files: dict[str, list[str]] = {}
    for key, (r, name) in acl_keys.items():
        if key in silent:
            continue
        k = rng.randint(1, acl_lines)
        prio = rng.choice([65535, 1000, 7 * k])
        lines = []
        for i in range(k):
            if i == k - 1 and rng.random() < 0.5:  # a catch-all last line
                act = rng.choice(["permit", "deny"])
                text = f"acl {key} access-list {name} {act} 0 255 any null null null any null"
                lines.append(f"{text} null null {prio}")
            else:
                lines.append(acl_line(rng, key, name, pool, prio))
            prio -= rng.choice([0, 1, 1, 1, 7])
        if len(set(lines)) < len(lines):
            return None
        acl_files[f"{r}_{name}"] = [
            " ".join(x.split()[2:-1]) + " -1 " + x.split()[-1] for x in lines
        ]
        if rng.random() < 0.3:
            rng.shuffle(lines)  # equal priorities then keep the order of the trace
        acl_text += lines
    for r, ports in usage.items():  # one line per interface and direction: its ACLs
        acl_files[f"{r}_usage"] = [f"{p} {dr} {' '.join(ns)}" for (p, dr), ns in ports.items()]
    inserts = acl_text + fwd
    if rng.random() < 0.3:
        rng.shuffle(inserts)
    updates = [f"+ {x}" for x in inserts] + [f"- {x}" for x in reversed(inserts)]

    g = Generated(routers, element_acl, topo, vlan, updates, acl_files)
    return g if _unambiguous(g, acl_keys, silent, vlans_of=vlan) else None


def _unambiguous(g: Generated, acl_keys, silent, vlans_of) -> bool:
    """The names say what they are: devices distinct, each element's ACL the one reading."""
    if len(set(g.routers) | set(g.element_acl)) != len(g.routers) + len(g.element_acl):
        return False
    ports: dict[str, set[str]] = {r: set() for r in g.routers}
    for line in g.topo:
        x, px, y, py = line.split()
        for dev, p in ((x, px), (y, py)):
            if dev in ports:
                ports[dev].add(p)
    for line in vlans_of:
        r, _, *members = line.split()
        ports[r].update(members)
    with_lines = {k: r for k, (r, _) in acl_keys.items() if k not in silent}
    for el, acl in g.element_acl.items():
        readings = {
            k
            for k, r in with_lines.items()
            for p in ports[r]
            for d in ("in", "out")
            if el == f"{k}_{p}_{d}"
        }
        if readings != ({acl} if acl else set()):
            return False
    return True


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description="Write a random dataset in the update-trace format.")
    ap.add_argument("outdir")
    ap.add_argument("--routers", type=int, default=8)
    ap.add_argument("--acls", type=int, default=6)
    ap.add_argument("--prefixes", type=int, default=40, help="forwarding rules per router")
    ap.add_argument("--acl-lines", type=int, default=10, help="at most this many lines an ACL")
    ap.add_argument(
        "--ecmp", type=float, default=0.1, help="fraction of prefixes with 2-3 equal-cost routes"
    )
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    g = generate(
        random.Random(args.seed), args.routers, args.acls, args.prefixes, args.acl_lines, args.ecmp
    )
    g.write(args.outdir)
    n = len(g.updates) // 2
    print(f"{args.outdir}: {len(g.routers)} routers, {len(g.element_acl)} ACL elements, {n} rules")


if __name__ == "__main__":
    main()
