"""Forwarding walks: what happens to a header class sent in at one edge port.

The walker follows a class through the pipeline of each switch (tables, goto,
apply and write actions, groups) and across links. A set_field rewrites the
header: the rewritten set is re-classified and the walk forks into every class
it meets. Loops are detected by revisiting a (switch, in_port, class, header set)
on the same path (the header set once a rewrite or a trace made one) and reported,
never followed.

Two modes:
  * class walks (the model's index) follow the classes' actions and record path
    templates: each hop names the elements it consulted, Verify_Port is computed,
    Verify_Rule is left to the header (cpc.model.Model.expected);
  * identity walks (trace, and rewritten paths) follow a header set entry by entry,
    forking where it meets several entries, and accumulate both Verify tags exactly
    as the data plane writes them (docs/verify-header.md, Algorithm 1).
"""

from __future__ import annotations

import weakref
from binascii import crc_hqx
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NamedTuple, Protocol

from ._walkc import entry_changes as _entry_changes
from ._walkc import memo_entries as _memo_entries
from ._walkc import merge_deps as _merge_deps
from ._walkc import pairs as _pairs
from ._walkc import same_objects as _same_objects
from ._walkc import split_via as _split_via
from ._walkc import trie_add as _trie_add_c
from ._walkc import trie_find as _trie_find
from .fields import OFPVID_PRESENT, WIDTH
from .results import Delivery, Hop
from .rules import (
    OFPP_ALL,
    OFPP_CONTROLLER,
    OFPP_FLOOD,
    OFPP_IN_PORT,
    OFPP_LOCAL,
    OFPP_MAX,
)
from .tags import VERIFY_PORT_INIT, VERIFY_RULE_INIT


@dataclass(slots=True)
class State:
    """One packet (or header set) in flight."""

    ingress: tuple[int, int]
    dpid: int
    in_port: int
    class_id: int
    hdr: (
        object | None
    )  # None: the whole class `class_id`; else a BDD subset of it (after a rewrite)
    src: object | None  # the headers at the ingress that lead here (None: the whole start class)
    vport: int
    vrule: int
    hops: tuple
    visited: frozenset
    rules: tuple = ()
    action_set: tuple = ()
    alternative: bool = False
    rewritten: bool = False
    rw: tuple = ()  # fields rewritten so far

    def moved_to(self, dpid: int, in_port: int, hops: tuple) -> State:
        """This packet as it arrives at the next switch (the walk's most frequent copy)."""
        return State(
            self.ingress,
            dpid,
            in_port,
            self.class_id,
            self.hdr,
            self.src,
            self.vport,
            self.vrule,
            hops,
            self.visited,
            self.rules,
            self.action_set,
            self.alternative,
            self.rewritten,
            self.rw,
        )

    def copy(self, **kw) -> State:
        s = State(
            self.ingress,
            self.dpid,
            self.in_port,
            self.class_id,
            self.hdr,
            self.src,
            self.vport,
            self.vrule,
            self.hops,
            self.visited,
            self.rules,
            self.action_set,
            self.alternative,
            self.rewritten,
            self.rw,
        )
        for k, v in kw.items():
            setattr(s, k, v)
        return s


class Outcome(NamedTuple):
    """Where one path of a walk ends. Class walks make many: kept flat and cheap."""

    ingress: tuple[int, int]
    kind: str  # as in Delivery
    port: int | None  # the output port, for egress and some drops
    hops: tuple
    verify_port: int
    verify_rule: int  # 0 in class walks (filled in per header)
    alternative: bool
    reason: str
    final_class: int  # the class the header is in at the end
    final_hdr: object | None  # set when the header was rewritten
    src: object | None  # the ingress headers that take this path (None: the whole class)
    rewritten: bool
    rw: tuple  # the fields rewritten on the way

    @property
    def egress(self) -> tuple[int, int] | None:
        return (self.hops[-1].dpid, self.port) if self.kind == "egress" else None

    def delivery(self) -> Delivery:
        return Delivery(
            self.ingress,
            self.kind,
            self.egress,
            self.hops,
            self.verify_port,
            self.verify_rule,
            self.reason,
            self.alternative,
            self.rewritten,
        )


_NO_GROUPS: frozenset = frozenset()


class Node:
    """The outcomes of a class from one (switch, in_port) on, shared by every path that
    reaches it: its own outcomes (zero tags, no history) and links to deeper nodes.

    `states` are the walk states its paths pass through. Walked from a fresh start, it
    holds for any path that reaches it without having passed one of them: loop checks
    then only ever meet states of the node's own paths."""

    __slots__ = (
        "outcomes",
        "links",
        "_own",
        "_states",
        "_expanded",
        "_egresses",
        "_dpids",
        "_ends",
        "_first",
        "elems",
        "deps",
        "groups",
    )

    def __init__(
        self,
        outcomes: list[Outcome],
        links: list,
        own: frozenset = frozenset(),
        elems: tuple = (),
        deps: tuple = (),
        groups: frozenset = frozenset(),
    ):
        self.outcomes = outcomes
        self.links = links  # [Link] to deeper nodes
        self._own = own  # the states its paths pass before they reach a linked node
        # The elements every lookup of its paths (linked nodes' included) consulted, the
        # actions found there, and the groups used (Walker.xmemo)
        self.elems = elems
        self.deps = deps
        self.groups = groups
        self._states = None
        self._expanded = None
        self._egresses = None
        self._dpids = None
        self._ends = None
        self._first = None

    @property
    def states(self) -> frozenset:
        """Every state its paths pass through, linked nodes' included (made once)."""
        if self._states is None:
            states = set(self._own)
            seen: set[int] = set()
            for link in self.links:
                node = link.node
                if id(node) not in seen:
                    seen.add(id(node))
                    states |= node.states
            self._states = frozenset(states)
        return self._states

    def expanded(self) -> list[Outcome]:
        """Every outcome from here on, each path spelled out."""
        if self._expanded is None:
            self._expanded = self.outcomes + _expand_links(self.links)
        return self._expanded

    def expanded_kind(self, kind: str) -> list[Outcome]:
        """expanded(), only the outcomes of this kind; not kept, and nodes without one are
        never spelled out (a loop count would otherwise keep every path of every node)."""
        if self._expanded is not None:
            return [o for o in self._expanded if o.kind == kind]
        out = [o for o in self.outcomes if o.kind == kind]
        return out + _expand_links([k for k in self.links if k.node.has_kind(kind)], kind)

    def has_kind(self, kind: str) -> bool:
        return any(k == kind for k, _ in self.ends())

    def ends(self) -> frozenset:
        """(kind, reason) of every outcome from here on, made once: a check that looks for
        loops or drops can skip a walk that has none without spelling its paths out."""
        if self._ends is None:
            e = {(o.kind, o.reason) for o in self.outcomes}
            for link in self.links:
                e |= link.node.ends()
            self._ends = frozenset(e)
        return self._ends

    def egresses(self) -> frozenset:
        if self._egresses is None:
            eg = {o.egress for o in self.outcomes if o.kind == "egress"}
            for link in self.links:
                eg |= link.node.egresses()
            self._egresses = frozenset(eg)
        return self._egresses

    def first_ports(self) -> frozenset:
        """The ports its first hop outputs to (made once: every class that shares the node
        as a switch's entry node asks, cpc.walk.Walker._shared_entry)."""
        if self._first is None:
            first = {o.hops[0].out_port for o in self.outcomes}
            first.update(link.hops[0].out_port for link in self.links)
            self._first = frozenset(first)
        return self._first

    def dpids(self) -> frozenset:
        """The switches some path from here on visits: those of its states (every switch a
        path visits is a state of it, and each state's switch is on a path)."""
        if self._dpids is None:
            self._dpids = frozenset([s[0] for s in self.states])
        return self._dpids


class Link(NamedTuple):
    """A path of a walk that reaches a shared suffix: its ingress, the hops before the
    suffix's first switch, the Verify_Port bits so far, whether it took an alternative
    (SELECT), and the suffix (Node)."""

    ingress: tuple[int, int]
    hops: tuple
    verify_port: int
    alternative: bool
    node: Node


class SharedEntry(NamedTuple):
    """The ingresses of one switch whose walks share its entry node: each as (ingress, its
    Verify_Port bit); the node's first hop takes each ingress's port when expanded."""

    node: Node
    ingresses: Sequence[tuple[tuple[int, int], int]]


def _expand_links(links, only: str | None = None) -> list[Outcome]:
    out = []
    append = out.append
    for ing, hops, vport, alt, node in links:
        exp = node.expanded() if only is None else node.expanded_kind(only)
        for _i, kind, port, h, vp, _vr, a, reason, fap, _fh, _src, _rw, _f in exp:
            append(
                Outcome(
                    ing,
                    kind,
                    port,
                    hops + h,
                    vport | vp,
                    0,
                    alt or a,
                    reason,
                    fap,
                    None,
                    None,
                    False,
                    (),
                )
            )
    return out


def _expand_entries(entries, only: str | None = None) -> list[Outcome]:
    """Paths of ingresses that share their switch's entry node: each ingress adds its port's
    Verify_Port bit and names its port as the first hop's in_port."""
    out = []
    append = out.append
    for node, ings in entries:
        exp = node.expanded() if only is None else node.expanded_kind(only)
        for ing, vport in ings:
            for _i, kind, port, h, vp, _vr, a, reason, fap, _fh, _src, _rw, _f in exp:
                h0 = h[0]
                h = (Hop(h0.dpid, ing[1], h0.rules, h0.out_port), *h[1:])
                append(
                    Outcome(
                        ing, kind, port, h, vport | vp, 0, a, reason, fap, None, None, False, ()
                    )
                )
    return out


@dataclass(slots=True)
class WalkResult:
    """What a walk found. Class walks share suffixes: `links` point into Nodes, and
    `expanded()` spells every path out (on demand: updates need only pairs and switches)."""

    outcomes: list[Outcome] = field(default_factory=list)
    links: list[Link] = field(default_factory=list)
    # ingresses sharing their switch's entry node
    entries: list[SharedEntry] = field(default_factory=list)
    through: set[int] = field(default_factory=set)  # classes entered through a rewrite
    groups: set[tuple[int, int]] = field(default_factory=set)
    _pair_set: frozenset | None = field(default=None, repr=False, compare=False)
    _ends: frozenset | None = field(default=None, repr=False, compare=False)

    def pair_set(self) -> frozenset:
        """pairs(), kept once asked for (a walk is not changed after it is stored)."""
        if self._pair_set is None:
            self._pair_set = self.pairs()
        return self._pair_set

    def expanded(self, class_id: int | None = None) -> list[Outcome]:
        """Every outcome; with class_id, the shared ones are relabelled as ending in class `class_id`."""
        out = self.outcomes + _expand_links(self.links) + _expand_entries(self.entries)
        if class_id is not None:
            out = [
                o if o.rewritten or o.final_class == class_id else o._replace(final_class=class_id)
                for o in out
            ]
        return out

    def expanded_kind(self, kind: str, class_id: int) -> list[Outcome]:
        """expanded(class_id), only the outcomes of this kind, spelling out (and keeping)
        no path of another kind."""
        if not any(k == kind for k, _ in self.ends()):
            return []
        out = [o for o in self.outcomes if o.kind == kind]
        out += _expand_links([k for k in self.links if k.node.has_kind(kind)], kind)
        out += _expand_entries([e for e in self.entries if e.node.has_kind(kind)], kind)
        return [
            o if o.rewritten or o.final_class == class_id else o._replace(final_class=class_id)
            for o in out
        ]

    def expanded_from(self, ingresses, class_id: int) -> list[Outcome]:
        """expanded(class_id), only the paths that start at one of `ingresses`."""
        out = [o for o in self.outcomes if o.ingress in ingresses]
        out += _expand_links([k for k in self.links if k.ingress in ingresses])
        out += _expand_entries(
            [(node, [x for x in ings if x[0] in ingresses]) for node, ings in self.entries]
        )
        return [
            o if o.rewritten or o.final_class == class_id else o._replace(final_class=class_id)
            for o in out
        ]

    def ends(self) -> frozenset:
        """(kind, reason) of every outcome of the walk (see Node.ends), kept once asked for
        (a walk is not changed after it is stored)."""
        if self._ends is None:
            e = {(o.kind, o.reason) for o in self.outcomes}
            for link in self.links:
                e |= link.node.ends()
            for node, _ in self.entries:
                e |= node.ends()
            self._ends = frozenset(e)
        return self._ends

    def pairs(self, whole: set | None = None, redo: set = frozenset()) -> frozenset:
        """(ingress, egress) for every path that leaves the network; with whole (and redo),
        for the paths that split_via dropped when it gave them (the daemon reads these
        after every update: no walk of the dropped paths is made). A path spelled out
        counts when it leaves the network; a link or a shared entry, for each egress of its
        node (most shared nodes only drop: on the Stanford backbone 98 % of entry nodes),
        and a shared entry for each of its ingresses. This runs twice for every class an
        update re-walks, in C (cpc/_walkc.c)."""
        return _pairs(self.outcomes, self.links, self.entries, whole, redo)

    def split_via(self, dpids, crosses: dict | None = None) -> tuple[WalkResult, set, set, list]:
        """This walk minus the paths through one of these switches: (what is kept, the
        switches whose every edge ingress must be walked again, other ingresses to walk,
        the shared entries dropped). A list of the kept walk is this walk's own when it
        keeps all of it.

        The ingresses behind a shared entry node go with it, and then every ingress of that
        switch goes; a kept node keeps its ingress list as it is (never changed once stored).
        `crosses` (entry node -> whether it visits one of dpids) is kept by the caller for
        the walks it splits via the same switches.
        """
        # Testing each shared entry node is cheaper than keeping an index from switches to
        # them: a class has one per edge switch, and nodes are shared by the walks of many
        # classes (cpc.walk.Walker.xmemo), so each is tested once per set of switches; links
        # share the same nodes and the same answers. This runs for every class an update
        # re-walks (5,000 for a default route with ACLs), in C (cpc/_walkc.c).
        whole, redo, outcomes, links, entries, gone = _split_via(
            self.outcomes, self.links, self.entries, dpids, {} if crosses is None else crosses
        )
        return WalkResult(outcomes, links, entries, None, None), whole, redo, gone  # paths only


def path_pairs(outcomes, links, entries, whole=None, redo=frozenset()) -> frozenset:
    """WalkResult.pairs of these paths of a walk (in C, cpc/_walkc.c)."""
    return _pairs(outcomes, links, entries, whole, redo)


def entry_changes(old: list, new: list, by: dict, old_rest: list, new_rest: list) -> None:
    """Two walks' shared entries matched by their ingress list (one object: a switch entered
    at all its edge ports); where the nodes differ, the egresses that one reaches and the
    other does not go into by[id(ingresses)] = (ingresses, egresses). The entries left
    unmatched are appended to old_rest and new_rest (in C, cpc/_walkc.c)."""
    _entry_changes(old, new, by, old_rest, new_rest)


def same_objects(a: list, b: list) -> bool:
    """Whether two lists hold the same objects, each as often, in any order (by identity;
    in C, cpc/_walkc.c)."""
    return _same_objects(a, b)


class Pipeline(Protocol):
    """What a walk reads of the network's forwarding state; cpc.model.Model implements it.

    The classes (part), their header space and the topology are read as attributes;
    lookup gives the (element, forwarding) that a table applies to a class arriving on a
    port (None, None where the table has nothing), element_for the element alone."""

    part: object  # cpc.partition.Partition
    space: object  # cpc.space.HeaderSpace
    topo: object  # cpc.topology.Topology
    port_dpids: set[int]  # switches with in_port-specific entries
    elements: dict  # (dpid, table, in_port) -> Element (what element_for reads)

    def lookup(self, dpid: int, table: int, in_port: int, class_id: int) -> tuple: ...

    def element_for(self, dpid: int, table: int, in_port: int): ...

    def group(self, dpid: int, gid: int): ...

    def port_bits(self, dpid: int, port: int | None) -> int: ...


class Walker:
    """Walks header classes through a Pipeline (cpc.model.Model).

    Within one class walk, the outcomes from a switch onwards (a suffix) do not depend on
    how the packet got there, except through Verify_Port, which ORs, and through loop
    checks. So each suffix is computed once and composed onto every path that reaches it
    without having passed one of its states. Suffixes that rewrite the header are walked
    directly instead.
    """

    def __init__(self, model: Pipeline) -> None:
        # A weak reference: a model and its walker would otherwise form a cycle that only the
        # cyclic GC frees, and model builds freeze the GC's view (cpc.gcpause.gc_paused).
        self._model = weakref.ref(model)
        self.m: Pipeline | None = None  # the model, during a walk
        self._identity = False
        self.part = model.part
        self.space = model.space
        self.topo = model.topo
        self._memo: dict | None = None
        self._states: list[set] = []  # the states each suffix being computed walks itself
        self._silent: list[list] = []  # per switch being walked: pipeline ends with no action
        self._port_dependent = False
        self._edge_groups: dict[int, tuple] = {}  # dpid -> ((ingress, Verify_Port bit)...), ports
        self.plans: dict = {}  # behaviour -> (ports and SELECT flags, groups used) or None
        # Nodes walked for any class (cpc.index sets it for a build or a commit): (switch,
        # in_port, action there) -> the elements a node's paths consult -> their actions ->
        # node. A node holds for every class with those actions there, in any update, while
        # the groups, the ports and the elements stay (the model calls forget_suffixes when
        # they change).
        self.xmemo: dict | None = None
        self.suffixes: dict = {}  # what xmemo is set to
        self.stored = 0  # nodes stored in it
        # The generation before (age_suffixes): a node found there is as valid as one in
        # suffixes, and moves into suffixes when a walk uses it.
        self.elder: dict = {}
        self._deps: list[tuple[dict, set]] = []  # per node being computed: its lookups, groups
        self.outputs_cache: dict = {}  # behaviour -> the ports it outputs to (model.corpus)
        # (dpid, in_port, rules, out_port) -> (Hop,): the hops of one-rule switches, shared by
        # every path through them (class walks hold a million hops on the Stanford backbone)
        self.hops: dict = {}

    def forget_groups(self) -> None:
        """Drop what was derived from group contents (after a GroupMod)."""
        self.plans.clear()
        self.outputs_cache.clear()
        self.forget_suffixes()

    def forget_suffixes(self) -> None:
        """Drop the stored suffixes: a walk would no longer give them (a group, a port's
        state or the element that answers for a port changed)."""
        self.suffixes = {}
        self.elder = {}
        self.stored = 0
        self._entries: dict[Node, SharedEntry] = {}
        self._links: dict[tuple, Link] = {}

    def age_suffixes(self) -> None:
        """Start a new generation of stored suffixes: those stored so far become the elder
        one, and the generation before is dropped. Nodes that walks still use move into
        the new generation as they are found (a lookup and a store, not a walk); those of
        long-gone forwarding states go with the next ageing. (Dropping every node instead
        made each later update walk afresh the nodes of classes it did not change.)"""
        self.elder = self.suffixes
        self.suffixes = {}
        self.stored = 0
        self._entries = {}
        self._links = {}

    def _plan(self, beh):
        """Outputs of a behaviour that only outputs (directly or via groups), else None."""
        try:
            return self.plans[beh]
        except KeyError:
            pass
        ins = beh.instructions
        plan = None
        if ins.goto is None and not ins.write and not ins.clear:
            ports: list[tuple[int, bool]] = []
            groups: list[tuple[int, int]] = []
            for a in ins.apply:
                if a[0] == "output":
                    ports.append((a[1], False))
                elif a[0] == "group":
                    g = self.m.group(beh.dpid, a[1])
                    if g is None or not all(len(b) == 1 and b[0][0] == "output" for b in g.buckets):
                        break
                    groups.append((beh.dpid, a[1]))
                    alt = g.type == "select" and len(g.buckets) > 1
                    ports += [(b[0][1], alt) for b in g.buckets]
                else:
                    break
            else:
                plan = (tuple(ports), tuple(groups))
        self.plans[beh] = plan
        return plan

    def walk(
        self,
        class_id: int,
        ingresses,
        hdr=None,
        local: bool = False,
        identity: bool = False,
        switches=(),
    ) -> WalkResult:
        """Walk class `class_id` (or its subset hdr) in at each ingress, and at every edge port of
        each of `switches` (class walks).

        identity=True (needs hdr) follows the entries and computes both tags; otherwise
        hops name the elements consulted and Verify_Rule is left 0.
        """
        self.m = self._model()
        self._identity = identity
        try:
            return self._walk(class_id, ingresses, hdr, local, switches)
        finally:
            self.m = None
            self._identity = False

    def _walk(self, class_id: int, ingresses, hdr, local: bool, switches) -> WalkResult:
        res = WalkResult()
        shared = hdr is None and not local
        self._memo = {} if shared else None
        direct = []
        got = self._memo_entries(class_id, switches) if switches and shared else None
        if got is not None:
            res.entries, groups = got
            if groups:
                res.groups |= groups
        else:
            for dpid in switches:
                direct += self._edge_switch(res, dpid, class_id)
        switches = set(switches)
        entries: dict[int, tuple[Node, frozenset, list] | None] = {}
        port_dpids = self.m.port_dpids
        port_bits = self.m.port_bits
        for ing in (*direct, *ingresses) if direct else ingresses:
            if ing in self.topo.down:
                continue
            dpid, port = ing
            if shared and dpid not in port_dpids and dpid not in switches:
                entry = entries.get(dpid, _UNSET)
                if entry is _UNSET:
                    entry = entries[dpid] = self._shared_entry(res, dpid, class_id)
                if entry is not None and port not in entry[1]:
                    entry[2].append((ing, port_bits(dpid, port)))
                    continue
            st = State(
                ing,
                dpid,
                port,
                class_id,
                hdr,
                hdr,
                VERIFY_PORT_INIT,
                VERIFY_RULE_INIT,
                (),
                frozenset(),
            )
            self._switch(res, st, local)
        res.entries += [SharedEntry(e[0], e[2]) for e in entries.values() if e is not None and e[2]]
        self._memo = None
        return res

    def _edge_switch(self, res: WalkResult, dpid: int, class_id: int) -> list:
        """Walk class `class_id` in at every edge port of switch dpid through its shared entry node;
        returns the ingresses that must be walked one by one."""
        group = self._edge_groups.get(dpid)
        if group is None:
            m = self.m
            ings = [p for p in self.topo.edge_ports() if p[0] == dpid]
            group = self._edge_groups[dpid] = (
                tuple((p, m.port_bits(*p)) for p in ings),
                frozenset(p[1] for p in ings),
            )
        ivs, ports = group
        if dpid in self.m.port_dpids:
            entry = None
        else:
            entry = self._memo_entry(res, dpid, class_id) or self._shared_entry(
                res, dpid, class_id, looked=True
            )
        if entry is None:
            return [iv[0] for iv in ivs]
        first, down = entry[1], self.topo.down
        if first.isdisjoint(ports) and (not down or down.isdisjoint(iv[0] for iv in ivs)):
            res.entries.append(self._entry_of(entry[0], ivs))
            return []
        shared = [iv for iv in ivs if iv[0][1] not in first and iv[0] not in down]
        if shared:
            res.entries.append(SharedEntry(entry[0], shared))
        return [iv[0] for iv in ivs if iv[0][1] in first]

    def memo_walk(self, class_id: int, switches: list) -> tuple | None:
        """(shared entries, the groups they use) of class `class_id` walked in at every edge
        port of `switches`, when every switch enters through a stored node (_memo_entries),
        else None: what walk(class_id, (), switches=switches) gives then, without its
        general machinery (WalkIndex.walk's re-walks, most of a commit's)."""
        self.m = self._model()
        try:
            return self._memo_entries(class_id, switches)
        finally:
            self.m = None

    def _memo_entries(self, class_id: int, switches) -> tuple | None:
        """(res.entries, the groups they use) when every switch of a class walk's `switches`
        enters through a stored node shared by all its edge ingresses (what _edge_switch
        then does: most switches of a commit's re-walks), else None. In C (cpc/_walkc.c):
        one call per class re-walk instead of a few Python calls per switch."""
        if self.xmemo is None or self._identity or self._deps or self.topo.down:
            return None
        m = self.m
        return _memo_entries(
            switches if isinstance(switches, list) else list(switches),
            self.part.owners[class_id],
            self.xmemo,
            m.elements,
            self._edge_groups,
            m.port_dpids,
            self._entries,
            _LEAF,
            SharedEntry,
        )

    def _entry_of(self, node: Node, ivs: tuple) -> SharedEntry:
        """SharedEntry(node, ivs), one object for every walk that enters a switch through
        node at all its edge ports (ivs: the switch's own tuple, never changed). The walks
        of thousands of classes list the same few entries: shared, a re-walk's plan reads
        objects it read for the class before, and no class keeps tuples of its own. Kept by
        the walker, as long as the stored suffixes (a node that held its own would be a
        reference cycle)."""
        entry = self._entries.get(node)
        if entry is None or entry.ingresses is not ivs:
            entry = self._entries[node] = SharedEntry(node, ivs)
        return entry

    def _memo_entry(self, res: WalkResult, dpid: int, class_id: int):
        """_shared_entry when the suffix memo has the switch's entry node for this class's
        actions (most re-walks of a commit that walks many classes), else None: what
        _suffix does for it, without a walk state. (The lookup is _suffix's, written out: a
        helper shared by both cost 3 % of the Stanford replay with ACLs.)"""
        xmemo = self.xmemo
        if xmemo is None or self._identity:
            return None
        owners = self.part.owners[class_id]
        el = self.m.element_for(dpid, 0, None)
        key = (dpid, None, owners.get(el.idx) if el is not None else None)
        at = xmemo.get(key)
        node = _trie_find(at, owners, _LEAF) if at else None
        if node is None:
            node = self._from_elder(key, owners)
            if node is None:
                return None
        if node.groups:
            res.groups |= node.groups
        self._linked(node)
        return node, node.first_ports(), []

    def _shared_entry(self, res: WalkResult, dpid: int, class_id: int, looked: bool = False):
        """The outcomes of class `class_id` entering switch dpid at any edge port, shared by its
        ingresses, and the ports its first hop outputs to; None when they depend on the port.

        A switch without in_port-specific entries treats a class alike whatever edge port it
        came in on, except that the port itself joins Verify_Port and names the first hop
        (both filled in per ingress when expanded, WalkResult.entries), and outputs to
        IN_PORT, FLOOD and ALL, or back to that port (walked per ingress instead).
        looked: _memo_entry found no stored node (the suffix memos need not be asked again).
        """
        self._port_dependent = False
        st = State((dpid, None), dpid, None, class_id, None, None, 0, 0, (), frozenset())
        node = self._suffix(res, st, False, looked)
        if node is None or self._port_dependent:
            return None
        return node, node.first_ports(), []  # the node, its first hop's ports, its ingresses

    # --- one switch -------------------------------------------------------------------------
    def _switch(self, res: WalkResult, st: State, local: bool) -> None:
        memo = self._memo
        if memo is not None and st.hdr is None:
            key = (st.dpid, st.in_port, st.class_id)
            if (st.dpid, st.in_port, None, None) not in st.visited:
                suffix = memo.get(key, _UNSET)
                if suffix is _UNSET:
                    memo[key] = None  # re-entered while computing it: walk that path directly
                    suffix = memo[key] = self._suffix(res, st, local)
                if suffix is not None and suffix.states.isdisjoint(st.visited):
                    if st.hops or self.xmemo is None:
                        link = Link(st.ingress, st.hops, st.vport, st.alternative, suffix)
                    else:
                        link = self._ingress_link(st, suffix)
                    res.links.append(link)
                    self._linked(suffix)
                    return
        self._switch_direct(res, st, local)

    def _ingress_link(self, st: State, suffix: Node) -> Link:
        """The link of a walk that enters suffix right at its ingress: one object for every
        class walk that does (an ingress walked on its own, such as an edge port that its
        switch's first hop outputs to: 21 of every class walk on the Stanford backbone with
        ACLs). Shared, a re-walk reads objects it read for other classes, not one copy per
        class. Kept with the stored suffixes, as _entry_of's entries (only while they are
        kept: a walk outside a build or a commit stores no node)."""
        key = (st.ingress, st.vport, st.alternative, suffix)
        link = self._links.get(key)
        if link is None:
            link = self._links[key] = Link(st.ingress, (), st.vport, st.alternative, suffix)
        return link

    def _suffix(self, res: WalkResult, st: State, local: bool, looked: bool = False) -> Node | None:
        """The Node from this switch on (zero tags, no history); None if not shareable.
        Taken from xmemo when a node walked for another class is valid for this one (looked:
        xmemo and the elder generation were just searched for it, in vain)."""
        xmemo = self.xmemo
        if xmemo is None or local or self._identity:
            return self._suffix_walk(res, st, local)
        # Nodes are looked up by where they start and the action found there, then down a
        # trie of the elements they consulted, in the order they did, by the actions there.
        owners = self.part.owners[st.class_id]
        el = self.m.element_for(st.dpid, 0, st.in_port)
        key = (st.dpid, st.in_port, owners.get(el.idx) if el is not None else None)
        at = xmemo.get(key)
        if not looked:
            # The first node whose every element has the class's action there; a level has
            # one element as a rule (a walk's actions fix which it consults next), several
            # when nodes were stored in different orders: searched depth-first (in C).
            node = _trie_find(at, owners, _LEAF) if at else None
            if node is None:
                node = self._from_elder(key, owners)
            if node is not None:
                if node.groups:
                    res.groups |= node.groups
                self._linked(node)
                return node
        frame: tuple[dict, set] = ({}, set())
        self._deps.append(frame)
        try:
            node = self._suffix_walk(res, st, local)
        finally:
            self._deps.pop()
        deps, groups = frame
        if self._deps:  # the caller's node depends on all this one does
            self._deps[-1][0].update(deps)
            self._deps[-1][1].update(groups)
        if node is None:
            return None
        node.elems = elems = tuple(deps)
        node.deps = tuple(deps.values())
        node.groups = frozenset(groups) if groups else _NO_GROUPS  # one shared empty set
        if st.in_port is not None or not self._port_dependent:  # see _shared_entry
            at = xmemo.get(key)  # (_from_elder may have made it)
            if at is None:
                at = xmemo[key] = {}
            _trie_add_c(at, elems, node.deps, node, _LEAF)
            self.stored += 1
        return node

    def _from_elder(self, key: tuple, owners: dict) -> Node | None:
        """The elder generation's node for a class with these owners from `key` on, now
        stored in xmemo too, if xmemo is the current generation (age_suffixes); else None."""
        old = self.elder.get(key)
        if not old or self.xmemo is not self.suffixes:
            return None
        node = _trie_find(old, owners, _LEAF)
        if node is not None:
            at = self.xmemo.get(key)
            if at is None:
                at = self.xmemo[key] = {}
            _trie_add_c(at, node.elems, node.deps, node, _LEAF)
            self.stored += 1
        return node

    def _linked(self, node: Node) -> None:
        """The node being computed links to node: it depends on what node depends on."""
        if self._deps:
            frame = self._deps[-1]
            _merge_deps(frame[0], node.elems, node.deps)
            if node.groups:
                frame[1].update(node.groups)

    def _suffix_walk(self, res: WalkResult, st: State, local: bool) -> Node | None:
        """_suffix without the cross-class memo.

        The common case, a table-0 action that only outputs to physical ports, is
        spelled out here: it is what class walks spend their time on. It does what
        _switch_direct, _pipeline, _output and _switch do for it, without their State
        copies; everything else goes the general way (_suffix_general).
        """
        dpid, in_port, class_id = st.dpid, st.in_port, st.class_id
        el, act = self._lookup(dpid, 0, in_port, class_id)
        plan = self._plan(act) if act is not None else None
        if plan is None or local or self._identity or any(p >= OFPP_MAX for p, _ in plan[0]):
            return self._suffix_general(res, st, local)
        ports, groups = plan
        if groups and self._deps:
            self._deps[-1][1].update(groups)
        key = (dpid, in_port, None, None)  # hdr None: the walk's start class (see _switch_direct)
        states = {key}
        visited = frozenset(states)
        sub = WalkResult()
        if groups:
            sub.groups.update(groups)
        outcomes, links = sub.outcomes, sub.links
        rules = (el.idx,)
        vport = self.m.port_bits(dpid, in_port)
        topo, memo, ingress, hops = self.topo, self._memo, st.ingress, self.hops
        self._states.append(states)  # general walks below add the states they pass
        try:
            for port, alt in ports:
                if port == in_port:  # OpenFlow drops output to the input port
                    outcomes.append(
                        _outcome(
                            ingress,
                            "drop",
                            None,
                            (Hop(dpid, in_port, rules, None),),
                            vport,
                            alt,
                            "output to the input port",
                            class_id,
                        )
                    )
                    continue
                one = hops.get((dpid, in_port, rules, port))
                if one is None:
                    one = hops[dpid, in_port, rules, port] = (Hop(dpid, in_port, rules, port),)
                loc = (dpid, port)
                if loc in topo.down:
                    reason = f"port {topo.port_name(loc)} is down"
                    outcomes.append(
                        _outcome(ingress, "drop", port, one, vport, alt, reason, class_id)
                    )
                elif loc in topo.edges:
                    outcomes.append(
                        _outcome(ingress, "egress", port, one, vport, alt, "", class_id)
                    )
                elif loc in topo.links:
                    nd, np = topo.links[loc]
                    child = None
                    if (nd, np, None, None) not in visited:
                        ckey = (nd, np, class_id)
                        child = memo.get(ckey, _UNSET)
                        if child is _UNSET:
                            memo[ckey] = None  # re-entered while computing it: walk directly
                            nxt = State(
                                ingress, nd, np, class_id, None, None, vport, 0, one, visited
                            )
                            child = memo[ckey] = self._suffix(sub, nxt, False)
                    if child is not None and child.states.isdisjoint(visited):
                        links.append(Link(ingress, one, vport, alt, child))
                        self._linked(child)
                    else:
                        nxt = State(
                            ingress,
                            nd,
                            np,
                            class_id,
                            None,
                            None,
                            vport,
                            0,
                            one,
                            visited,
                            rules,
                            (),
                            alt,
                        )
                        self._switch_direct(sub, nxt, False)
                else:
                    reason = f"port {topo.port_name(loc)} leads nowhere"
                    outcomes.append(
                        _outcome(ingress, "drop", port, one, vport, alt, reason, class_id)
                    )
        finally:
            self._states.pop()
        if not outcomes and not links:  # matched, but the actions send it nowhere
            outcomes.append(
                _outcome(
                    ingress,
                    "drop",
                    None,
                    (Hop(dpid, in_port, rules, None),),
                    vport,
                    False,
                    "dropped by the entry's actions",
                    class_id,
                )
            )
        if sub.through:
            res.through |= sub.through
        if sub.groups:
            res.groups |= sub.groups
        if any(o.rewritten for o in outcomes):
            return None
        return Node(outcomes, links, frozenset(states))

    def _suffix_general(self, res: WalkResult, st: State, local: bool) -> Node | None:
        sub = WalkResult()
        fresh = State(
            st.ingress, st.dpid, st.in_port, st.class_id, None, None, 0, 0, (), frozenset()
        )
        self._states.append(set())
        try:
            self._switch_direct(sub, fresh, local)
        finally:
            states = self._states.pop()
        if sub.through:
            res.through |= sub.through
        if sub.groups:
            res.groups |= sub.groups
        if any(o.rewritten for o in sub.outcomes):
            return None
        return Node(sub.outcomes, sub.links, frozenset(states))

    def _switch_direct(self, res: WalkResult, st: State, local: bool) -> None:
        # A loop is the same headers back at the same port: a rewritten header set (and a
        # traced header) counts, not only its class, which other headers share.
        # Without a header set the state is in the walk's start class (only a rewrite, which
        # sets hdr, changes class): the class is left out, so a node's states hold for any
        # class that reuses it (xmemo).
        key = (st.dpid, st.in_port, None if st.hdr is None else st.class_id, st.hdr)
        if self._states:
            self._states[-1].add(key)
        st.rules = ()
        if key in st.visited:
            self._end(
                res, st, "loop", None, f"loop back to {self.topo.port_name((st.dpid, st.in_port))}"
            )
            return
        st.visited = st.visited | {key}
        n0 = len(res.outcomes) + len(res.links)
        self._silent.append([])
        try:
            self._pipeline(res, st, local)
        finally:
            silent = self._silent.pop()
        if len(res.outcomes) + len(res.links) == n0:
            # Matched, but the actions send it nowhere: an explicit drop, with the rules and
            # tags of where the pipeline ended (after a rewrite, a copy of st went on).
            for end in silent or [st]:
                self._end(res, end, "drop", None, "dropped by the entry's actions")

    def _lookup(self, dpid: int, table: int, in_port: int, class_id: int) -> tuple:
        el, act = self.m.lookup(dpid, table, in_port, class_id)
        if el is not None and self._deps:
            self._deps[-1][0][el.idx] = act
        return el, act

    def _pipeline(self, res: WalkResult, st: State, local: bool) -> None:
        st.action_set = ()
        if self._identity:
            self._table(res, st, 0, local)
            return
        el, act = self._lookup(st.dpid, 0, st.in_port, st.class_id)
        plan = self._plan(act) if act is not None else None
        if plan is None:
            self._table(res, st, 0, local)
            return
        # Fast path: a table-0 action that only outputs.
        st.vport |= self.m.port_bits(st.dpid, st.in_port)
        st.rules = (el.idx,)
        ports, groups = plan
        if groups:
            res.groups.update(groups)
            if self._deps:
                self._deps[-1][1].update(groups)
        for port, alt in ports:
            self._output(
                res, st.copy(alternative=True) if alt and not st.alternative else st, port, local
            )

    def _table(self, res: WalkResult, st: State, table: int, local: bool) -> None:
        if not self._identity:
            el, act = self._lookup(st.dpid, table, st.in_port, st.class_id)
            self._entry(res, st, table, local, act, el.idx if el is not None else None)
            return
        el = self.m.element_for(st.dpid, table, st.in_port)
        if el is None:
            self._entry(res, st, table, local, None, None)
            return
        pieces = el.ident.split(st.hdr)
        if len(pieces) == 1:
            self._entry(res, st, table, local, pieces[0][0], None)
            return
        for beh, part in pieces:
            self._entry(res, st.copy(hdr=part), table, local, beh, None)

    def _entry(self, res: WalkResult, st: State, table: int, local: bool, beh, elem) -> None:
        """Apply what matched at a table: an entry's behaviour (identity walks) or a class's
        action at element elem (class walks); None is the table-miss."""
        if beh is None:
            if st.action_set:  # Open vSwitch runs the action set on a miss too
                self._run(
                    res, _action_set_list(st.action_set), 0, st, local, self._silent[-1].append
                )
            else:
                self._end(res, st, "drop", None, f"table-miss in table {table}")
            return
        st.vport |= self.m.port_bits(st.dpid, st.in_port)
        if elem is None:
            st.vrule = crc_hqx(beh.ur, st.vrule)
            st.rules = st.rules + (beh.ref,)
        else:
            st.rules = st.rules + (elem,)
        ins = beh.instructions

        def after_apply(s: State) -> None:
            aset = () if ins.clear else s.action_set
            if ins.write:
                aset = _merge_action_set(aset, ins.write)
            s.action_set = aset
            if ins.goto is not None:
                self._table(res, s, ins.goto, local)
            else:
                self._run(res, _action_set_list(aset), 0, s, local, self._silent[-1].append)

        self._run(res, ins.apply, 0, st, local, after_apply)

    def _run(self, res, actions, i, st: State, local: bool, cont) -> None:
        n = len(actions)
        while i < n:
            a = actions[i]
            op = a[0]
            if op == "output":
                self._output(res, st, a[1], local)
            elif op == "group":
                self._group(res, st, a[1], local)
            else:
                branches = self._rewrite(res, st, a)
                if len(branches) != 1:
                    for b in branches:
                        self._run(res, actions, i + 1, b, local, cont)
                    return
                st = branches[0]
            i += 1
        cont(st)

    def _group(self, res: WalkResult, st: State, gid: int, local: bool) -> None:
        res.groups.add((st.dpid, gid))
        if self._deps:
            self._deps[-1][1].add((st.dpid, gid))
        group = self.m.group(st.dpid, gid)
        if group is None:
            self._end(res, st, "drop", None, f"group {gid} does not exist")
            return
        alt = group.type == "select" and len(group.buckets) > 1
        for bucket in group.buckets:
            # Buckets act on a clone of the packet: their rewrites stay inside the bucket.
            self._run(
                res, bucket, 0, st.copy(alternative=st.alternative or alt), local, lambda _s: None
            )

    def _output(self, res: WalkResult, st: State, port: int, local: bool) -> None:
        topo = self.topo
        if port == OFPP_CONTROLLER:
            self._end(res, st, "controller", None, "sent to the controller")
            return
        if port == OFPP_LOCAL:
            self._end(res, st, "local", None, "sent to the bridge's local port")
            return
        if st.in_port is None and port in _PORT_DEPENDENT:
            self._port_dependent = True  # a shared entry (_shared_entry) cannot answer for this
            return
        if port == OFPP_IN_PORT:
            ports = [st.in_port]
        elif port in (OFPP_FLOOD, OFPP_ALL):
            ports = [p for p in topo.ports_of(st.dpid) if p != st.in_port]
        elif port == st.in_port:
            # OpenFlow drops output to the input port unless it is written as IN_PORT.
            self._end(res, st, "drop", None, "output to the input port")
            return
        else:
            ports = [port]
        for p in ports:
            hop = Hop(st.dpid, st.in_port, st.rules, p)
            loc = (st.dpid, p)
            if loc in topo.down:
                self._end(res, st, "drop", p, f"port {topo.port_name(loc)} is down", hop)
            elif loc in topo.edges or local:
                self._end(res, st, "egress", p, "", hop)
            elif loc in topo.links:
                nxt = topo.links[loc]
                self._switch(res, st.moved_to(nxt[0], nxt[1], st.hops + (hop,)), local)
            else:
                self._end(res, st, "drop", p, f"port {topo.port_name(loc)} leads nowhere", hop)

    def _rewrite(self, res: WalkResult, st: State, a) -> list[State]:
        space = self.space
        src = st.hdr if st.hdr is not None else self.part.bdd_of[st.class_id]
        op = a[0]
        if op == "set_field":
            fname, value = a[1], a[2]
            img = space.exist_fields(src, [fname]) & space.field_bdd(
                fname, value, (1 << WIDTH[fname]) - 1
            )
        elif op == "pop_vlan":
            fname = "vlan_vid"
            img = space.exist_fields(src, [fname]) & space.field_bdd(fname, 0, 0x1FFF)
        elif op == "push_vlan":
            # The new outer tag carries VID 0, also over a present tag: Open vSwitch's
            # behaviour, not the copy OpenFlow 1.3.5 asks for (docs/agents.md).
            fname = "vlan_vid"
            img = space.exist_fields(src, [fname]) & space.field_bdd(fname, OFPVID_PRESENT, 0x1FFF)
        else:
            raise AssertionError(op)
        out = []
        for class_id in self.part.candidates(img):
            sub = img & self.part.bdd_of[class_id]
            res.through.add(class_id)
            pre = (
                st.src if st.src is not None else self.part.bdd_of[st.class_id]
            ) & space.exist_fields(sub, [fname])
            rw = st.rw if fname in st.rw else tuple(sorted((*st.rw, fname)))
            out.append(st.copy(class_id=class_id, hdr=sub, src=pre, rewritten=True, rw=rw))
        if not out:  # cannot happen while classes cover the header space; keep the path visible
            self._end(res, st, "drop", None, "rewrite produced no header")
        return out

    def _end(self, res, st: State, kind: str, port, reason: str, hop: Hop | None = None) -> None:
        if hop is None:
            hop = Hop(st.dpid, st.in_port, st.rules, None)
        res.outcomes.append(
            Outcome(
                st.ingress,
                kind,
                port,
                st.hops + (hop,),
                st.vport,
                st.vrule,
                st.alternative,
                reason,
                st.class_id,
                st.hdr if st.rewritten else None,
                st.src,
                st.rewritten,
                st.rw,
            )
        )


_UNSET = object()
_LEAF = object()  # a trie level's key for the node whose elements end there


def _trie_add(trie: dict, elems: tuple, actions: tuple, node) -> None:
    """Store node under its consulted elements and their actions, level by level:
    trie = {element: {action there: next level}, _LEAF: node} (in C, cpc/_walkc.c)."""
    _trie_add_c(trie, tuple(elems), tuple(actions), node, _LEAF)


def _outcome(
    ingress, kind: str, port, hops: tuple, vport: int, alt: bool, reason: str, class_id: int
):
    """An Outcome of a class walk's fresh suffix: no Verify_Rule, header and class as they came."""
    return Outcome(
        ingress, kind, port, hops, vport, 0, alt, reason, class_id, None, None, False, ()
    )


_PORT_DEPENDENT = frozenset((OFPP_IN_PORT, OFPP_FLOOD, OFPP_ALL))


_SET_ORDER = {"pop_vlan": 0, "push_vlan": 1, "set_field": 2, "group": 3, "output": 4}


def _merge_action_set(aset: tuple, write: tuple) -> tuple:
    """OpenFlow action set: at most one action of each type (one set_field per field)."""
    slots = {_slot(a): a for a in aset}
    for a in write:
        slots[_slot(a)] = a
    return tuple(slots.values())


def _slot(a) -> tuple:
    return ("set_field", a[1]) if a[0] == "set_field" else (a[0],)


def _action_set_list(aset: tuple) -> tuple:
    acts = sorted(aset, key=lambda a: _SET_ORDER[a[0]])
    if any(a[0] == "group" for a in acts):  # a group action makes the output action ignored
        acts = [a for a in acts if a[0] != "output"]
    return tuple(acts)
