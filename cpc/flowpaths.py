"""The paths one flow takes through its class's stored walk when every switch sends a flow
down one SELECT bucket (cpc.model.Model.select): what Model.expected, allows, expected_at,
expected_via and allows_at answer then.

A class walk keeps its paths as shared suffixes (cpc.walk: WalkResult, Node, Link,
SharedEntry). Spelled out, a class on a k-ary fat-tree with ECMP has (k/2)^2 paths from
each ingress to an exit, and the path templates cpc.index caches hold every one of them
for every class asked about. Here the stored walk is followed down from its ingresses for
one concrete header, taking at each hop only the way the header's bucket goes, and only
into suffixes that can still answer the question (that reach the egress, the port or the
switch asked about). A query keeps what it visits (a path from each ingress, each shared
suffix once) and nothing after it returns.

A hop is taken when its out_port is a direct output of an entry the header matches
there, in the bucket the pick gives of a SELECT group, or in any bucket of another group
(FLOOD, ALL and IN_PORT there included: the ports they send to); an out_port that no
output names (a chained group's) is not judged. Where the
header lacks a field the pick reads (Model.select_known), every bucket of that group is
taken: every alternative, as without the pick. Paths that rewrite the header are not read
here: cpc.model walks them again for the header, every bucket a path, since which header
reached a group on the way is not kept.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from .results import Hop
from .rules import OFPP_ALL, OFPP_FLOOD, OFPP_IN_PORT

_EVERY_PORT = frozenset((OFPP_FLOOD, OFPP_ALL))


class FlowPaths:
    """One query's reading of a class walk for one concrete header."""

    __slots__ = ("header", "elems", "group", "pick", "known", "seen", "_taken", "_memo")

    def __init__(self, header: dict, elems: list, group, pick, known) -> None:
        """elems: the model's elements by index; group(dpid, group id) -> Group or None;
        pick(group, header) -> the bucket index; known(group, header) -> whether header
        has every field pick reads (Model.select, Model.select_known)."""
        self.header = header
        self.elems = elems
        self.group, self.pick, self.known = group, pick, known
        self.seen: dict[int, object] = {}  # element -> the Behaviour header matches there
        self._taken: dict[tuple, tuple] = {}  # a hop's elements -> _ports
        self._memo: dict[int, list] = {}  # id(node) -> its paths for this query's question

    # --- the pick -------------------------------------------------------------------------
    def behaviour(self, elem: int):
        b = self.seen.get(elem, self)
        if b is self:
            b = self.seen[elem] = self.elems[elem].ident.identify(self.header)
        return b

    def taken(self, hops) -> bool:
        """Does the header leave every one of these hops where the hop says?"""
        return all(map(self._taken_one, hops))

    def _taken_one(self, hop: Hop) -> bool:
        out = hop.out_port
        if out is None:
            return True
        ports = self._taken.get(hop.rules)  # element indexes: they name the switch
        if ports is None:
            ports = self._taken[hop.rules] = self._ports(hop)
        possible, allowed = ports
        return (
            out not in possible
            or out in allowed
            or not allowed.isdisjoint(_EVERY_PORT)
            or (out == hop.in_port and OFPP_IN_PORT in allowed)
        )

    def _ports(self, hop: Hop) -> tuple[set[int], set[int]]:
        """(the ports the entries header matches at hop's elements name in an output, in
        their own actions or a group's buckets; those it is sent to: the entries' own, the
        picked bucket's of a SELECT group, every bucket's of another group). Both may hold
        FLOOD, ALL and IN_PORT: a port they send it to is taken too."""
        header = self.header
        possible: set[int] = set()
        allowed: set[int] = set()
        for i in hop.rules:
            b = self.behaviour(i)
            if b is None:
                continue
            ins = b.instructions
            direct = ins.outputs()
            possible |= direct
            allowed |= direct
            for gid in ins.groups():
                g = self.group(hop.dpid, gid)
                if g is None:
                    continue
                outs = [{a[1] for a in bk if a[0] == "output"} for bk in g.buckets]
                possible.update(*outs)
                if g.type == "select" and len(outs) > 1 and self.known(g, header):
                    allowed |= outs[self.pick(g, header)]
                else:
                    allowed.update(*outs)
        return possible, allowed

    # --- to an egress ---------------------------------------------------------------------
    def to_egress(self, walk, egress, verify_port: int | None = None) -> list[tuple]:
        """The header's paths in walk that leave the network at egress (with this
        Verify_Port, when given), each as (ingresses, hop templates, Verify_Port, entered):
        ingresses are ((ingress, its Verify_Port bit), ...); entered: the path is a shared
        entry node's, whose first hop takes each ingress's port (enter()). Rewriting paths
        are left out."""
        want = verify_port
        out = []
        for o in walk.outcomes:
            if (
                o.kind == "egress"
                and not o.rewritten
                and o.egress == egress
                and (want is None or o.verify_port == want)
                and self.taken(o.hops)
            ):
                out.append((((o.ingress, 0),), o.hops, o.verify_port, False))
        for link, hops, vp in self._via(walk.links, egress, want):
            if want is None or vp == want:
                out.append((((link.ingress, 0),), hops, vp, False))
        for node, ings in walk.entries:
            if egress not in node.egresses():
                continue
            if want is not None:
                ings = [x for x in ings if not x[1] & ~want]
                if not ings:
                    continue
            for hops, vp in self._to(node, egress, want):
                sel = ings if want is None else [x for x in ings if x[1] | vp == want]
                if sel:
                    out.append((sel, hops, vp, True))
        return out

    def _to(self, node, egress, want: int | None) -> list[tuple]:
        """(hops, Verify_Port) of node's paths to egress that the header takes, relative to
        node; those whose bits are not all in want are cut as soon as they are not."""
        got = self._memo.get(id(node))
        if got is not None:
            return got
        got = []
        for o in node.outcomes:
            if (
                o.kind == "egress"
                and o.egress == egress
                and (want is None or not o.verify_port & ~want)
                and self.taken(o.hops)
            ):
                got.append((o.hops, o.verify_port))
        got += [(hops, vp) for _, hops, vp in self._via(node.links, egress, want)]
        self._memo[id(node)] = got
        return got

    def _via(self, links, egress, want: int | None):
        """(link, hops, Verify_Port) of the paths to egress the header takes over these
        links, from the link on; only those whose bits are all in want."""
        for link in links:
            lv = link.verify_port
            if (want is not None and lv & ~want) or egress not in link.node.egresses():
                continue
            if not self.taken(link.hops):
                continue
            for hops, vp in self._to(link.node, egress, want):
                if want is None or not (lv | vp) & ~want:
                    yield link, link.hops + hops, lv | vp

    # --- beginnings of paths: per-hop samples --------------------------------------------
    def arrivals(self, walk, port, verify_port: int | None = None, bits=None) -> list[tuple]:
        """(ingress, the hops before) of every distinct beginning of the header's paths in
        walk that arrives at port over a link (not at its first hop). The hops before are
        taken; the arriving hop's own pick is not asked (it comes after the sample). With
        verify_port (and bits(dpid, in_port), a hop's Verify_Port bits), only beginnings
        whose hops set no other bit are followed."""
        state = (port[0], port[1], None, None)  # as cpc.walk keys a class walk's states
        q = _Question(lambda node: state in node.states, port, None, verify_port, bits)
        return [x for x in self._prefixes(walk, q) if x[1]]

    def through(self, walk, dpid: int) -> list[tuple]:
        """(ingress, the hops up to and including one at dpid) of every distinct beginning
        of the header's paths in walk that goes on from dpid to another switch."""
        return self._prefixes(walk, _Question(lambda node: dpid in node.dpids(), None, dpid))

    def _prefixes(self, walk, q: _Question) -> list[tuple]:
        out: dict[tuple, None] = {}
        for o in walk.outcomes:
            if not o.rewritten:
                found: dict[tuple, None] = {}
                self._scan(o.hops, True, q, found)
                for rel in found:
                    out[(o.ingress, rel)] = None
        for link in walk.links:
            found = {}
            if self._scan(link.hops, False, q, found) and q.reaches(link.node):
                for rel in self._hits(link.node, q):
                    found[link.hops + rel] = None
            for rel in found:
                out[(link.ingress, rel)] = None
        want = q.want
        for node, ings in walk.entries:
            if not q.reaches(node):
                continue
            rels = None
            for ing, bit in ings:
                if want is not None and bit & ~want:
                    continue
                if rels is None:
                    rels = self._hits(node, q)
                for rel in rels:
                    out[(ing, enter(rel, ing[1]) if rel else rel)] = None
        return list(out)

    def _hits(self, node, q: _Question) -> list[tuple]:
        """The distinct beginnings, relative to node, of its paths that the header takes."""
        got = self._memo.get(id(node))
        if got is not None:
            return got
        found: dict[tuple, None] = {}
        for o in node.outcomes:
            self._scan(o.hops, True, q, found)
        for link in node.links:
            if self._scan(link.hops, False, q, found) and q.reaches(link.node):
                for rel in self._hits(link.node, q):
                    found[link.hops + rel] = None
        got = self._memo[id(node)] = list(found)
        return got

    def _scan(self, hops, ends: bool, q: _Question, found: dict) -> bool:
        """Add to found the beginnings of hops (a path's, or a part of one that goes on when
        not `ends`) that answer q: arriving at q.port (the hops before it), or going on
        from q.dpid (that hop included). False where the header leaves a hop another way,
        or a hop sets a bit q.want has not: what follows does not answer."""
        port, dpid, want = q.port, q.dpid, q.want
        last = len(hops) - 1
        for j, h in enumerate(hops):
            if port is not None and h.dpid == port[0] and h.in_port == port[1]:
                found[hops[:j]] = None
            if want is not None and h.in_port is not None and q.bits(h.dpid, h.in_port) & ~want:
                return False
            if not self._taken_one(h):
                return False
            if dpid is not None and h.dpid == dpid and (j < last or not ends):
                found[hops[: j + 1]] = None
        return True


class _Question(NamedTuple):
    """What _prefixes looks for: beginnings that arrive at port, or go on from dpid, in
    nodes where reaches(node); with want, only those whose hops' bits are all in it."""

    reaches: Callable
    port: tuple | None
    dpid: int | None
    want: int | None = None
    bits: Callable | None = None


def enter(hops: tuple, in_port: int) -> tuple:
    """A shared entry node's hops (cpc.walk.SharedEntry) as one of its ingresses enters:
    the first hop on that port."""
    h0 = hops[0]
    return (Hop(h0.dpid, in_port, h0.rules, h0.out_port), *hops[1:])
