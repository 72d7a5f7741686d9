"""The path a fault's packet took, rebuilt from the Verify_Port its report carried.

Verify_Port is a 32-bit Bloom filter: every switch the packet entered ORed in the three
bits of (dpid, in_port) (docs/verify-header.md, cpc.tags.port_bits). Many more ports than
the packet crossed have their three bits in a filter with a dozen bits set, so the ports
"in the filter" are not the path. A path is a *chain*: it enters at an edge port, follows
links, enters each switch at most once (a packet that came back to a switch would loop)
and leaves by the report's egress; its ports' bits ORed together must give the filter
exactly (a bit no port of the chain sets is a bit the packet set elsewhere). Every chain
that fits is found; one chain is the path; more than one is said as such, never guessed.

A per-hop sample (taken where a link arrives, before that switch's own step) ends where
the link arrives: the chain's last switch leaves by the link's other end.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from cpc.results import Port
from cpc.tags import port_bits
from cpc.topology import Topology

__all__ = ["MAX_CHAINS", "Chains", "PathFinder", "actual_path_json", "bloom"]

MAX_CHAINS = 32  # chains found at most; past that the filter fits "more"
STEP_BUDGET = 200_000  # switches entered by the search at most, per filter
LISTED = 8  # chains listed in the JSON answer

ChainHop = tuple[int, int, int | None]  # (dpid, in_port, out_port)


def bloom(ports) -> int:
    """The Verify_Port a packet gets by entering at these (dpid, in_port)s."""
    v = 0
    for d, p in ports:
        v |= port_bits(d, p)
    return v


@dataclass(frozen=True)
class Chains:
    chains: tuple[tuple[ChainHop, ...], ...]
    complete: bool  # False: more than MAX_CHAINS fit, or the search budget ran out
    in_filter: tuple[Port, ...]  # every (dpid, port) whose three bits are in the filter


class PathFinder:
    """The chains of one topology; answers cached per (filter, egress, sampled where)."""

    def __init__(self, topo: Topology, budget: int = STEP_BUDGET, bits=port_bits) -> None:
        """bits(dpid, port): the port's Bloom bits (another hash only in tests)."""
        self.topo = topo
        self.budget = budget
        self.bits = {
            (d, p): bits(d, p) for d, sw in topo.switches.items() for p in sorted(sw.ports)
        }
        self.out = {  # dpid -> [(out_port, (peer dpid, peer port))] in port order
            d: [(p, topo.links[(d, p)]) for p in sorted(sw.ports) if (d, p) in topo.links]
            for d, sw in topo.switches.items()
        }
        self.chains = lru_cache(maxsize=1024)(self._chains)

    def _chains(self, verify_port: int, egress: Port, at_hop: bool = False) -> Chains:
        vp = verify_port & 0xFFFFFFFF
        inf = {p for p, b in self.bits.items() if vp & b == b}
        in_filter = tuple(sorted(inf))
        if at_hop:  # the packet left the link's other end, then was sampled at egress
            peer = self.topo.links.get(tuple(egress))
            if peer is None:
                return Chains((), True, in_filter)
            last, last_out = peer
            barred = {egress[0]}
        else:
            last, last_out = egress
            barred = set()
        if last not in self.topo.switches:
            return Chains((), True, in_filter)
        found: list[tuple[ChainHop, ...]] = []
        steps = 0
        complete = True
        for start in sorted(p for p in self.topo.edges if p in inf):
            if start[0] in barred:
                continue
            # An explicit stack (a long chain would exceed Python's recursion limit):
            # each level is (dpid, in_port, bits so far, its untried links).
            visited = {start[0]}
            hops: list[ChainHop] = []
            stack = [(start[0], start[1], self.bits[start], iter(self.out[start[0]]))]
            while stack and complete:
                d, inp, acc, links = stack[-1]
                if d == last:  # a simple chain ends where it reaches the last switch
                    if acc == vp:
                        found.append((*hops, (d, inp, last_out)))
                        if len(found) > MAX_CHAINS:
                            complete = False
                    links = iter(())
                    stack[-1] = (d, inp, acc, links)
                nxt = next(
                    (
                        (q, peer)
                        for q, peer in links
                        if peer in inf and peer[0] not in visited and peer[0] not in barred
                    ),
                    None,
                )
                if nxt is None:
                    stack.pop()
                    visited.discard(d)
                    if hops:
                        hops.pop()
                    continue
                steps += 1
                if steps > self.budget:
                    complete = False
                    break
                q, (d2, p2) = nxt
                hops.append((d, inp, q))
                visited.add(d2)
                stack.append((d2, p2, acc | self.bits[(d2, p2)], iter(self.out[d2])))
            if not complete:
                break
        return Chains(tuple(found[:MAX_CHAINS]), complete, in_filter)


def _hop_text(topo: Topology, h) -> str:
    name = topo.switches[h[0]].name if h[0] in topo.switches else str(h[0])
    return f"{name}({h[1]}→{'-' if h[2] is None else h[2]})"


def actual_path_json(finder: PathFinder, fault: dict) -> dict | None:
    """The actual path of a fault (the API's fault answer) as its Verify_Port gives it:

    - status: "unique" (one chain fits: the path), "ambiguous" (more fit: Bloom-filter
      collisions), "none" (no chain fits: a port the topology does not have, a loop);
    - chains: up to LISTED of them, each with its ingress and hops [dpid, in_port,
      out_port]; for a per-hop sample the last hop is where the sample was taken
      (out_port null); chain_count counts them, more says there were more than counted;
    - solid: the (dpid, in_port)s on every chain (the unique chain's own), the part of
      the path the filter proves; candidate: on some chains only; possible: in the
      filter but on no chain (a port whose bits other ports set).

    None for a fault without a report's tags (a blackhole, an audit finding)."""
    actual, egress = fault.get("actual"), fault.get("egress")
    if not actual or not egress or actual.get("verify_port") is None:
        return None
    topo = finder.topo
    at_hop = (fault.get("localization") or {}).get("sampled_at") == "hop"
    res = finder.chains(int(actual["verify_port"]), (egress[0], egress[1]), at_hop)
    chains = [list(c) for c in res.chains]
    if at_hop:
        chains = [[*c, (egress[0], egress[1], None)] for c in chains]
    ports = [{(h[0], h[1]) for h in c} for c in chains]
    solid = set.intersection(*ports) if chains and res.complete else set()
    some = set().union(*ports) if ports else set()
    status = (
        "none" if not chains else "unique" if len(chains) == 1 and res.complete else "ambiguous"
    )
    return {
        "verify_port": f"0x{int(actual['verify_port']) & 0xFFFFFFFF:08x}",
        "sampled_at": "hop" if at_hop else "egress",
        "status": status,
        "chain_count": len(chains),
        "more": not res.complete,
        "chains": [
            {
                "ingress": [c[0][0], c[0][1]],
                "ingress_name": topo.port_name((c[0][0], c[0][1])),
                "host": topo.edges.get((c[0][0], c[0][1])),
                "hops": [list(h) for h in c],
                "text": " ".join(_hop_text(topo, h) for h in c),
            }
            for c in chains[:LISTED]
        ],
        "solid": [list(p) for p in sorted(solid)],
        "candidate": [list(p) for p in sorted(some - solid)],
        "possible": [list(p) for p in res.in_filter if p not in some],
    }
