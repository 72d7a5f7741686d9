"""An evaluator of update-trace datasets (topo.txt, vlan.txt, updates) written over the
dataset lines, to compare the importer and the model with.

It reads the files itself (longest prefix match, ACL first match, VLAN fan-out, directed
links, no copy back out of the in-port) and shares nothing with pazzdata.stanford or the
model but the header dict format.
"""

from __future__ import annotations

import ipaddress
import random
from collections import Counter, defaultdict
from pathlib import Path

from pazzdata.stanford import apply_change


class Oracle:
    """The dataset's forwarding after its insert lines (`lines`: only those line numbers),
    or after its first `upto` lines, deletes included.

    ACL elements are the devices whose ports are `inport` and `permit` (the README's
    definition). The ACL of each is read from acls/<router>_usage (`port in|out name`:
    element `<router>_<name>_<port>_<in|out>`) where it is listed, else from the Stanford
    naming (`<router>_<acl>_<port>_<in|out>`, a port without `_`). element_acl, if given,
    is used instead: element -> ACL (None: no lines)."""

    def __init__(self, d: Path, lines=None, upto=None, element_acl=None) -> None:
        self.adj = defaultdict(set)
        ports = defaultdict(set)
        for line in (d / "topo.txt").read_text().splitlines():
            a, pa, b, pb = line.split()
            self.adj[(a, pa)].add((b, pb))
            ports[a].add(pa)
            ports[b].add(pb)
        if element_acl is None:
            usage = {}
            for f in sorted((d / "acls").glob("*_usage")):
                r = f.name[: -len("_usage")]
                for line in f.read_text().splitlines():
                    port, direction, *names = line.split()  # names: the ACLs there
                    for name in names:
                        usage[f"{r}_{name}_{port}_{direction}"] = f"{r}_{name}"
            element_acl = {
                dev: usage.get(dev, dev.rsplit("_", 2)[0])
                for dev, ps in ports.items()
                if ps <= {"inport", "permit"}
            }
        self.element_acl = element_acl
        self.vlan = {}
        if (d / "vlan.txt").exists():
            for line in (d / "vlan.txt").read_text().splitlines():
                t = line.split()
                self.vlan[(t[0], t[1])] = t[2:]
        self.fwd = defaultdict(dict)  # router -> (plen, prefix) -> ports (ECMP: several)
        self.acl = defaultdict(list)  # acl -> [(prio, order, line)]
        order = {}
        for no, line in enumerate((d / "updates").read_text().splitlines(), 1):
            t = line.split()
            if upto is None and t[0] != "+" or upto is not None and no > upto:
                break
            if lines is not None and no not in lines:
                continue
            if t[1] == "fwd":
                plen = int(t[4])
                mask = (0xFFFFFFFF << (32 - plen)) & 0xFFFFFFFF
                key = (plen, int(t[3]) & mask)
                ports = self.fwd[t[2]].setdefault(key, [])
                if t[0] == "+":
                    ports.append(t[5])
                else:
                    ports.remove(t[5])
                    if not ports:
                        del self.fwd[t[2]][key]
            else:
                order.setdefault(line[1:], len(order))
                entry = (-int(t[-1]), order[line[1:]], t[3:])
                if t[0] == "+":
                    self.acl[t[2]].append(entry)
                else:
                    self.acl[t[2]].remove(entry)
        for lst in self.acl.values():
            lst.sort(key=lambda x: (x[0], x[1]))

    def lpm(self, router, dst):
        table = self.fwd.get(router, {})
        for plen in range(32, -1, -1):
            mask = (0xFFFFFFFF << (32 - plen)) & 0xFFFFFFFF
            ports = table.get((plen, dst & mask))
            if ports:
                return ports
        return []

    @staticmethod
    def _ip(addr, wc, value):
        if addr in ("any", "null"):
            return True
        a = int(ipaddress.IPv4Address(addr))
        w = 0 if wc == "null" else int(ipaddress.IPv4Address(wc))
        return (value & ~w) == (a & ~w)

    @staticmethod
    def _rng(lo, hi, value, top):
        if lo in ("null", "any"):
            return True
        return int(lo) <= value <= (top if hi in ("null", "any") else int(hi))

    def acl_permits(self, acl, h):
        for _, _, t in self.acl.get(acl, ()):
            # t: access-list NAME action plo phi src swc splo sphi dst dwc dplo dphi prio
            if not self._rng(t[3], t[4], h["ip_proto"], 255):
                continue
            if not self._ip(t[5], t[6], h["ipv4_src"]) or not self._ip(t[9], t[10], h["ipv4_dst"]):
                continue
            if not self._rng(t[7], t[8], h["tp_src"], 65535):
                continue
            if not self._rng(t[11], t[12], h["tp_dst"], 65535):
                continue
            return t[2] == "permit"
        return False

    def run(self, router, h):
        """Outcomes of a packet sent in at router: Counter of (kind, path)."""
        out = Counter()
        # state: device, arrival (iface, from-endpoint) or None, path, visited
        stack = [(router, None, (), frozenset())]
        while stack:
            dev, arr, path, seen = stack.pop()
            if (dev, arr) in seen:
                out[("loop", path)] += 1
                continue
            seen = seen | {(dev, arr)}
            if dev in self.element_acl:
                if not self.acl_permits(self.element_acl[dev], h):
                    continue
                ifaces = ["permit"]
            else:
                # ECMP: each next hop is one possible way (a SELECT bucket)
                ifaces = []
                for port in self.lpm(dev, h["ipv4_dst"]):
                    if port == "self":
                        out[("egress", path + ((dev, "self", None),))] += 1
                    else:
                        ifaces += self.vlan.get((dev, port), [port])  # vlanN: its members
            for iface in ifaces:
                peers = self.adj.get((dev, iface))
                if not peers:
                    if arr != (iface, None):
                        out[("egress", path + ((dev, iface, None),))] += 1
                    continue
                for peer in peers:
                    if arr == (iface, peer):  # OpenFlow: never back out of the in_port
                        continue
                    stack.append(
                        (peer[0], (peer[1], (dev, iface)), path + ((dev, iface, peer),), seen)
                    )
        return out


def model_outcomes(net, model, router, h):
    out = Counter()
    for d in model.trace((net.dpid_of[router], net.inject[router]), h):
        if d.kind not in ("egress", "loop"):
            continue
        path = tuple(
            net.port_info[(hop.dpid, hop.out_port)] for hop in d.hops if hop.out_port is not None
        )
        out[(d.kind, path)] += 1
    return out


def sample_headers(net, n, seed):
    rng = random.Random(seed)
    prefixes = [(u.rule.prefix, u.rule.plen) for u in net.updates if hasattr(u.rule, "plen")]
    acls = [u.rule for u in net.updates if hasattr(u.rule, "permit")]
    out = []
    for i in range(n):
        h = {"eth_type": 0x0800, "ip_proto": rng.choice([6, 17, 1, 6, 17, rng.randrange(256)])}
        if i % 4 == 3 or not prefixes:
            h["ipv4_dst"] = rng.getrandbits(32)
        else:
            p, plen = rng.choice(prefixes)
            host = rng.getrandbits(32 - plen) if plen < 32 else 0
            h["ipv4_dst"] = (p & ~((1 << (32 - plen)) - 1) & 0xFFFFFFFF) | host
        h["ipv4_src"] = rng.getrandbits(32)
        h["tp_src"] = rng.getrandbits(16)
        h["tp_dst"] = rng.choice(
            [22, 80, 443, 8998, 137, 138, 139, 7005, 27001, rng.getrandbits(16)]
        )
        if acls and i % 2 == 0:  # make the ACL's own addresses and ports likely
            r = rng.choice(acls)
            for f, vm in (("ipv4_src", r.src), ("ipv4_dst", r.dst)):
                if vm is not None and rng.random() < 0.8:
                    h[f] = vm[0] | (rng.getrandbits(32) & ~vm[1] & 0xFFFFFFFF)
            if r.proto != (0, 255):
                h["ip_proto"] = rng.randint(*r.proto)
            if r.dport is not None:
                h["tp_dst"] = rng.randint(*r.dport)
        out.append(h)
    return out


def compare_with_oracle(net, model, oracle, headers):
    """Every router's trace for every header equals the oracle's; returns (egress, loop)."""
    delivered = looped = 0
    for h in headers:
        for router in net.routers:
            got = model_outcomes(net, model, router, h)
            want = oracle.run(router, h)
            assert got == want, (router, h)
            delivered += sum(n for (k, _), n in want.items() if k == "egress")
            looped += sum(n for (k, _), n in want.items() if k == "loop")
    return delivered, looped


def replay(net, model, updates):
    for upd in updates:
        for change in net.changes(upd):
            apply_change(model, change)


def answers(net, model, headers):
    """Trace from every router and the expected reports at every egress that is reached."""
    out = []
    for h in headers:
        for router in net.routers:
            ds = model.trace((net.dpid_of[router], net.inject[router]), h)
            out.append(
                sorted(
                    ((d.kind, d.egress, d.hops, d.verify_port, d.verify_rule) for d in ds), key=repr
                )
            )
            for eg in sorted({d.egress for d in ds if d.kind == "egress"}):
                out.append(sorted(model.expected(eg, h), key=repr))
    return out
