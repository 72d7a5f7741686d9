"""The model of what the controller intends, and the answers other components ask of it.

    model = Model(load_topology("net.yaml"))
    model.load_rules("rules.jsonl")           # bulk load, then one build
    model.apply(flowmod)                      # one incremental update
    model.expected((dpid, port), header)      # the tester's hot path
    model.trace((dpid, port), header)         # what pazzctl trace prints
    model.reach(ingress, egress)              # reachable header set
    model.corpus(ingress, egress)             # S_i and S_e for the fuzzer

Classes are kept apart by forwarding action only (cpc.partition); which entry a header
matches at each table is kept per element (cpc.tables.Identities). An update moves
classes only where an action changes, and re-walks only those classes (cpc.index,
cpc.walk); the entries a FlowMod selects are cpc.flowmod's. Walks
record path templates: the elements a path consults. expected() and trace() fill in the
entries, and the Verify_Rule chain, for the concrete header.
"""

from __future__ import annotations

import logging
import weakref
from binascii import crc_hqx
from collections import defaultdict
from collections.abc import Callable, Iterable
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cached_property, lru_cache
from pathlib import Path

from . import flowmod, ofctl
from .fields import MAC_GROUP_BIT, parse_mac
from .flowpaths import FlowPaths, enter
from .gcpause import gc_paused, gc_paused_update
from .index import WalkIndex, pair_changes
from .partition import FILTER, FORWARDING, Partition
from .results import Delivery, Expected, Hop, Port
from .routes import cut_route_classes
from .rules import (
    OFPP_ALL,
    OFPP_FLOOD,
    FlowEntry,
    FlowMod,
    Group,
    ModelError,
)
from .selecthash import pick_known
from .space import HeaderSpace
from .tables import Behaviour, Element, Forwarding, dst_prefix
from .tags import VERIFY_RULE_INIT, port_bits
from .topology import Topology
from .walk import Walker
from .witness import host_macs

log = logging.getLogger(__name__)
_ANY_PORT = -1  # in an output port set: FLOOD or ALL


@dataclass(frozen=True)
class Update:
    """What one model update changed; sent to subscribers (tester hold-back, fuzzer corpus)."""

    version: int
    classes: frozenset[int]  # classes created, moved or removed, or whose entries changed
    # The edge ports whose S_e may have changed (an entry that outputs there gained or lost
    # headers, or a group or port of the exit switch changed).
    exits: frozenset[Port] = frozenset()
    # Walks (before, after) of headers that changed class or path; see `pairs`.
    pair_diffs: tuple = ()
    touched: tuple = ()  # the BDDs of the matches and classes changed; see `region`
    space: HeaderSpace | None = None
    # Classes that lost or gained headers but kept their walks (not in `classes`): what a
    # subscriber that keeps a class's headers (cpc.intents) must read again.
    reshaped: frozenset[int] = frozenset()
    # The entries changed, in order: (old, new) with None for an entry added or removed.
    changes: tuple[tuple[FlowEntry | None, FlowEntry | None], ...] = ()
    # The group and port changes, in order, before the entry changes: ("group", Group),
    # ("ungroup", dpid, group id) (its entries are in `changes` too), ("port", dpid,
    # port, up). With `changes` they replay the update on a copy of the model.
    ops: tuple[tuple, ...] = ()
    # What caused it, as the caller of `Model.caused_by` said (the proxy's batch, an API
    # call); None when nobody said.
    cause: object = None
    # A trial (`Model.trial`): the change is judged and then taken back; subscribers that
    # keep state follow it, those that store or report findings do not.
    trial: bool = False

    @cached_property
    def region(self):
        """BDD of the header space the update touched: every header whose forwarding it
        may have changed, rewritten headers included (united when first read: a batch of
        20k FlowMods is 20k ORs, and not every subscriber needs it). It runs BDD operations:
        read it in the model's thread, as the subscribers are called."""
        return self.space.union(self.touched) if self.space is not None else None

    @cached_property
    def pairs(self) -> frozenset[tuple[Port, Port]]:
        """(ingress, egress) pairs whose S_i may have changed: headers gained or lost an
        outcome there. Computed when first read (comparing the walks before and after is a
        large part of a small update, and not every subscriber needs it): see
        cpc.index.pair_changes."""
        return pair_changes(self.pair_diffs)


@dataclass(frozen=True)
class Loop:
    ingress: Port
    class_id: int
    delivery: Delivery


class _Deferred:
    """An element's moves collected within a batch (Model.apply_many)."""

    __slots__ = ("el", "space", "regions", "by_action", "miss_gained", "_union", "_n")

    def __init__(self, el: Element, space: HeaderSpace) -> None:
        self.el = el
        self.space = space
        self.reset()

    def reset(self) -> None:
        self.regions: list = []
        self.by_action: dict = {}
        # A region taken from the table-miss cannot overlap what was collected unless some
        # of it went back to the miss in this batch: only then is the overlap tested.
        self.miss_gained = False
        self._union = self.space.false  # of regions[:_n], grown when asked
        self._n = 0

    def overlaps(self, region) -> bool:
        if self._n < len(self.regions):
            self._union = self._union | self.space.union(self.regions[self._n :])
            self._n = len(self.regions)
        return not self.space.disjoint(self._union, region)


class Model:
    """The intended network: every entry and group on every switch, the classes of headers
    that the whole network treats alike, and each class's walk from the edge ingresses.

    Rules in: load_rules / add_entries (bulk, then build), apply / apply_many (FlowMods,
    OpenFlow 1.3 semantics: cpc.flowmod), set_group / delete_group, port_status,
    flow_removed. Each update returns an Update and sends it to the subscribe()rs.
    Queries: expected and allows (the tester), trace and trace_headers, reach and corpus
    (the fuzzer's S_i and S_e), loops, entries, identity_collisions.

    The parts: the classes (cpc.partition), the per-table elements and identities
    (cpc.tables), the walk index (cpc.index, over cpc.walk), the GC policy of builds and
    updates (cpc.gcpause).
    """

    def __init__(self, topology: Topology) -> None:
        self.topo = topology
        self.space = HeaderSpace()
        self.part = Partition(self.space)
        self.walker = Walker(self)
        self._elements: dict[tuple[int, int, int | None], Element] = {}
        self._elem_list: list[Element] = []
        self._elems_of: dict[int, list[Element]] = defaultdict(list)  # by dpid, oldest first
        self._actions: dict[tuple, Forwarding] = {}
        self._port_elems: dict[tuple[int, int], list[Element]] = defaultdict(list)
        self.port_dpids: set[int] = set()  # switches with in_port-specific entries
        self._groups: dict[tuple[int, int], Group] = {}
        # (dpid, group id) -> the entries whose actions name it, by where they live: a
        # group's delete removes them without scanning the switch's tables.
        self._group_refs: dict[tuple[int, int], dict[tuple, FlowEntry]] = defaultdict(dict)
        # Walk results, per start class, and the indexes built from them.
        self.index = WalkIndex(self.walker, self._elem_list, topology.edge_ports())
        self._s_e: dict[Port, tuple[int, object]] = {}  # egress -> (version, S_e)
        self._built = False
        self.version = 0
        self._subscribers: list[Callable[[Update], None]] = []
        self._touched: list = []  # match BDDs of this update: Update.region is their union
        self._changes: list = []  # (old, new) entries of this update: Update.changes
        self._ops: list[tuple] = []  # group and port changes of this update: Update.ops
        self._id_region = self.space.false  # where only the matched entry's identity changed
        self._id_groups: set[int] = set()  # the groups of the elements where it did
        self._touched_exits: set[Port] = set()
        self._deferred: dict[int, _Deferred] | None = None  # in apply_many: by element
        self._cause: object = None  # Update.cause of the updates made now
        self._trial = False  # Update.trial of the updates made now
        self._configured_macs: dict[Port, int] = {}  # set_host_macs
        # How the switches pick a SELECT group's bucket for a packet: (group, header) ->
        # bucket index, one per flow (cpc.selecthash.group_bucket for Open vSwitch). With
        # it, expected/allows and the per-hop answers follow only the path the switch's
        # hash takes from each ingress (cpc.flowpaths), never spelling out the others;
        # None: every bucket is a path the model allows. select_known(group, header):
        # whether header has every field the pick reads; where it has not, every bucket.
        self.select: Callable[[Group, dict], int] | None = None
        self.select_known: Callable[[Group, dict], bool] = pick_known
        self._macs: tuple[int, dict[Port, int]] | None = None  # (version, host_macs())

    @contextmanager
    def caused_by(self, cause):
        """The updates made inside carry this cause (Update.cause)."""
        before, self._cause = self._cause, cause
        try:
            yield
        finally:
            self._cause = before

    @contextmanager
    def trial(self):
        """The updates made inside are a trial (Update.trial): changes that are judged and
        taken back, as the intent guard does with a FlowMod before the switch sees it."""
        before, self._trial = self._trial, True
        try:
            yield
        finally:
            self._trial = before

    # --- elements and lookups ------------------------------------------------------------
    def _element(
        self, dpid: int, table: int, in_port: int | None, create: bool = True
    ) -> Element | None:
        key = (dpid, table, in_port)
        el = self._elements.get(key)
        if el is None and create:
            el = Element(len(self._elem_list), dpid, table, in_port, self.space)
            self._elements[key] = el
            self.walker.forget_suffixes()  # stored walks asked another element for this port
            self._elem_list.append(el)
            self._elems_of[dpid].append(el)
            if in_port is not None:
                self._port_elems[(dpid, table)].append(el)
                self.port_dpids.add(dpid)
                # The port's element answers for the whole table: copy the wildcard entries in.
                w = self._elements.get((dpid, table, None))
                for e in w.ident.entries() if w is not None else ():
                    m = self.space.match_bdd(e.match.fields)
                    self._touched.append(m)
                    self._insert(el, e, self._behaviour(e), m)
        return el

    @property
    def elements(self) -> dict[tuple[int, int, int | None], Element]:
        """(dpid, table, in_port) -> Element, every element (in_port None: the wildcard
        one); read, never changed, by the walker."""
        return self._elements

    def element_for(self, dpid: int, table: int, in_port: int) -> Element | None:
        """The element that answers for packets arriving on in_port at (dpid, table)."""
        els = self._elements
        return els.get((dpid, table, in_port)) or els.get((dpid, table, None))

    def lookup(self, dpid: int, table: int, in_port: int, class_id: int):
        """(element, action) that (dpid, table) applies to class `class_id` arriving on in_port."""
        el = self.element_for(dpid, table, in_port)
        if el is None:
            return None, None
        return el, self.part.owners[class_id].get(el.idx)

    def _targets(self, el: Element) -> list[Element]:
        """The elements an entry living in el takes part in."""
        if el.in_port is None:
            return [el, *self._port_elems.get((el.dpid, el.table), ())]
        return [el]

    def group(self, dpid: int, gid: int) -> Group | None:
        return self._groups.get((dpid, gid))

    @staticmethod
    @lru_cache(maxsize=65536)
    def port_bits(dpid: int, port: int | None) -> int:
        # None: a walk's shared entry into a switch (cpc.walk); each ingress adds its own.
        return 0 if port is None else port_bits(dpid, port)

    def _behaviour(self, e: FlowEntry) -> Behaviour:
        ak = (e.dpid, e.table, e.instructions)
        act = self._actions.get(ak)
        if act is None and not (e.table == 0 and e.instructions.drops()):
            act = self._actions[ak] = Forwarding(*ak)
        # A table-0 entry that only drops (no action set can be pending yet) forwards like
        # the table-miss: the same (None) action, so the deny lines of an ACL do not cut
        # classes apart from its unmatched headers.
        return Behaviour(e.dpid, e.table, e.priority, e.cookie, e.rule_id, e.instructions, act)

    # --- rules in ----------------------------------------------------------------------------
    def load_rules(self, path: str | Path) -> int:
        """Bulk-load a rule file (JSON lines or dump-flows text) and build. Returns the count."""
        items = list(ofctl.read_rules(path))
        with gc_paused():
            return self._load_items(items)

    def _load_items(self, items) -> int:
        for it in items:  # check everything first: a bad file is never half-applied
            self._check_switch(it.dpid, it.source)
            if isinstance(it, FlowEntry):
                flowmod.check_goto(it)
        for it in items:
            if isinstance(it, Group):
                self._groups[(it.dpid, it.group_id)] = it
        self.walker.forget_groups()
        n = self._bulk_add([it for it in items if isinstance(it, FlowEntry)])
        self.build()
        return n

    def add_flow(self, dpid: int, text: str) -> Update:
        """Add one flow given in ovs-ofctl syntax (add-flow form)."""
        return self.apply(ofctl.parse_flow(text, dpid, "add"))

    def add_entries(self, entries: Iterable[FlowEntry], groups: Iterable[Group] = ()) -> None:
        """Bulk-add entries and groups without walking, then build once."""
        with gc_paused():
            for g in groups:
                self._groups[(g.dpid, g.group_id)] = g
            self.walker.forget_groups()
            self._bulk_add(list(entries))
            self.build()

    @gc_paused_update
    def apply(self, fm: FlowMod) -> Update:
        """Apply one FlowMod with OpenFlow 1.3 semantics; returns what changed."""
        self._apply_one(fm)
        return self._commit()

    @gc_paused_update
    def apply_many(self, fms: Iterable[FlowMod]) -> tuple[Update, list[tuple[FlowMod, ModelError]]]:
        """Apply several FlowMods in order and re-walk once (a barrier's worth from the proxy).

        A FlowMod the model refuses is skipped and returned with its error; the others apply.
        """
        errors = []
        self._deferred = {}
        try:
            for fm in fms:
                try:
                    self._apply_one(fm)
                except ModelError as e:
                    # Without its traceback: the traceback holds this frame, which holds
                    # `errors`, a cycle that the paused GC would never free.
                    errors.append((fm, e.with_traceback(None)))
        finally:
            deferred, self._deferred = self._deferred, None
            for d in deferred.values():
                self._move_deferred(d)
        return self._commit(), errors

    def _apply_one(self, fm: FlowMod) -> None:
        self._check_switch(fm.dpid, fm.source)
        has_group = lambda gid: (fm.dpid, gid) in self._groups  # noqa: E731
        if fm.command == "add":
            flowmod.check_actions(fm, has_group)
            self._add(fm.entry(), check_overlap=bool(fm.flags & flowmod.OFPFF_CHECK_OVERLAP))
        elif fm.command in ("modify", "modify_strict"):
            flowmod.check_goto(fm)  # the new instructions, against the FlowMod's table
            sel = flowmod.select(self._elems_of.get(fm.dpid, ()), fm, fm.command == "modify_strict")
            flowmod.check_actions(fm, has_group if sel else None)
            for e in sel:
                self._replace(e, fm)
        elif fm.command in ("delete", "delete_strict"):
            for e in flowmod.select(
                self._elems_of.get(fm.dpid, ()), fm, fm.command == "delete_strict"
            ):
                self._remove(e)
        else:
            raise ModelError(f"unknown FlowMod command {fm.command!r}")

    def flow_removed(self, dpid: int, table: int, priority: int, match, cookie: int) -> Update:
        """An entry expired or was evicted (OFPT_FLOW_REMOVED)."""
        fm = FlowMod(
            "delete_strict", dpid, table, priority, match, cookie=cookie, cookie_mask=(1 << 64) - 1
        )
        return self.apply(fm)

    @gc_paused_update
    def set_group(self, group: Group) -> Update:
        """GroupMod ADD or MODIFY."""
        self._check_switch(group.dpid, group.source)
        flowmod.check_group(group)
        self._groups[(group.dpid, group.group_id)] = group
        self._ops.append(("group", group))
        self.walker.forget_groups()
        self._touch_switch(group.dpid)
        return self._commit_classes(self.index.group_users.get((group.dpid, group.group_id), set()))

    @gc_paused_update
    def delete_group(self, dpid: int, group_id: int) -> Update:
        """GroupMod DELETE: the group and the entries that use it (OpenFlow 1.3.5 6.5)."""
        self._groups.pop((dpid, group_id), None)
        self._ops.append(("ungroup", dpid, group_id))
        self.walker.forget_groups()
        for e in list(self._group_refs.get((dpid, group_id), {}).values()):
            self._remove(e)
        self._touch_switch(dpid)
        return self._commit_classes(self.index.group_users.get((dpid, group_id), set()))

    @gc_paused_update
    def port_status(self, dpid: int, port: int, up: bool) -> Update:
        """A port went up or down: outputs to a down port are dropped."""
        loc = (dpid, port)
        self._ops.append(("port", dpid, port, up))
        if up:
            self.topo.down.discard(loc)
        else:
            self.topo.down.add(loc)
        self.walker.forget_suffixes()
        self._touch_switch(dpid)
        self._touched.append(self.space.true)
        return self._commit(extra=set(self.index.walks))

    def _commit_classes(self, classes: set[int]) -> Update:
        """Commit a change that re-walks these classes; their extent is the touched region."""
        self._touched += [self.part.bdd_of[c] for c in classes if c in self.part.bdd_of]
        return self._commit(extra=set(classes))

    def _check_switch(self, dpid: int, source: str = "") -> None:
        flowmod.check_switch(self.topo.switches, dpid, source)

    # --- the partition edits ---------------------------------------------------------------------
    def _add(self, entry: FlowEntry, check_overlap: bool) -> None:
        self._check_switch(entry.dpid, entry.source)
        flowmod.check_goto(entry)
        el = self._element(entry.dpid, entry.table, entry.match.in_port)
        key = Element.key_of(entry)
        old = el.entries.get(key)
        if old is not None:  # replaced even with CHECK_OVERLAP, as Open vSwitch does
            self._replace(old, entry)
            return
        targets = self._targets(el)
        if check_overlap:
            flowmod.check_overlap(entry, targets)
        el.entries[key] = entry
        self._refer(entry, key, True)
        self._changes.append((None, entry))
        beh = self._behaviour(entry)
        m = self.space.match_bdd(entry.match.fields)
        self._touched.append(m)
        for t in targets:
            self._insert(t, entry, beh, m)

    def _bulk_add(self, entries: list[FlowEntry]) -> int:
        """Add many entries, then derive the classes in one refinement.

        Entries go in highest priority first, so none takes headers from an entry already
        in place. The classes are then cut from the routes' prefix trie (cpc.routes) when
        every element was loaded in bulk mode, else from each element's per-action regions;
        neither creates two classes with the same owners (nothing to merge).
        """
        # Per table: the destination prefix lengths (cpc.tables.Identities.begin_bulk), and
        # the in_ports (None: any) its entries match on.
        masks: dict[tuple[int, int], tuple[set, set]] = defaultdict(lambda: (set(), set()))
        switches = self.topo.switches
        for e in entries:  # check everything first: a bad batch is never half-applied
            if e.dpid not in switches:
                self._check_switch(e.dpid, e.source)
            if e.instructions.goto is not None:
                flowmod.check_goto(e)
            pfx = dst_prefix(e)
            ms = masks[(e.dpid, e.table)]
            ms[0].add(pfx and pfx[0])
            ms[1].add(e.match.in_port)
        for e in entries:  # in_port elements first: wildcard entries then enter them too
            if e.match.in_port is not None:
                self._element(e.dpid, e.table, e.match.in_port)
        routes: dict[tuple[int, int], list] = {}  # cpc.routes
        for (dpid, table), ms in masks.items():
            els = list(self._port_elems.get((dpid, table), ()))
            if None in ms[1]:
                els.append(self._element(dpid, table, None))
            for el in els:
                el.ident.begin_bulk(ms[0], routes, el.idx)
        elements, port_elems = self._elements, self._port_elems
        for e in sorted(entries, key=lambda e: -e.priority):  # stable: ties keep file order
            match = e.match
            el = elements.get((e.dpid, e.table, match.in_port)) or self._element(
                e.dpid, e.table, match.in_port
            )
            key = (match.fields, e.priority)  # Element.key_of
            old = el.entries.get(key)
            if old is not None:
                self._replace(old, e)
                continue
            el.entries[key] = e
            self._refer(e, key, True)
            beh = self._behaviour(e)
            m = self.space.match_bdd(match.fields)
            pfx = dst_prefix(e)
            targets = [el]  # _targets(el)
            if match.in_port is None and (e.dpid, e.table) in port_elems:
                targets += port_elems[(e.dpid, e.table)]
            for t in targets:
                ident = t.ident
                if pfx is not None and ident.in_bulk:
                    ident.bulk_add(e, beh, m, pfx)
                else:
                    ident.insert(e, beh, m, bulk=True)
        self.part = self.walker.part = Partition(self.space)
        moves: list[tuple[Element, list]] = []  # (element, its (action, region) to move)
        if all(el.ident.in_bulk for el in self._elem_list):
            # Routes are cut into their classes at once; the other entries move them.
            matched = cut_route_classes(self.part, self.space, routes)
            for el in self._elem_list:
                el.ident.end_bulk()
                moves.append((el, el.ident.finish_bulk(matched.get(el.idx, self.space.false))))
        else:
            # Otherwise each element's per-action regions cut the classes, in one order:
            # regions of other elements moved after the route classes would each split
            # hundreds of them (Stanford with ACLs: 185k class moves instead of 54k).
            for el in self._elem_list:
                el.ident.end_bulk()
                # None (entries that only drop) is where every class starts
                moves.append((el, [(a, r) for a, r in el.ident.action_regions() if a is not None]))
        # The elements that apply two actions forward: said before the moves, so that the
        # partition's groups are made once (cpc.partition).
        for el, regions in moves:
            acts = {a for a, _ in regions if a is not None} | self.part.actions(el.idx)
            if len(acts) > 1:
                self.part.forwarding(el.idx)
        for el, regions in moves:
            for act, region in regions:
                self._move(el, region, act)
        return len(entries)

    def _insert(self, el: Element, entry: FlowEntry, beh: Behaviour, m) -> None:
        act = beh.action
        taken = el.ident.insert(entry, beh, m)
        pieces = [(r, old.action if old is not None else None, act) for r, old in taken]
        self._transfers(el, pieces, el.ident.region(entry))

    def _transfers(self, el: Element, pieces, whole) -> None:
        """_transfer each (region, old action, new action), one move per pair of actions.

        The pieces of one insert or removal are disjoint and make up `whole` (the entry's
        region), so their moves commute. An entry over many routes (an ACL line over any
        destination in a routing table) takes from thousands of entries but from only a
        few actions: one class move per action pair, not one per entry it overlaps. The
        largest group is whole minus the others, not the OR of its thousands of pieces."""
        if len(pieces) == 1:
            self._transfer(el, *pieces[0])
            return
        by: dict[tuple, list] = {}
        for region, old, new in pieces:
            by.setdefault((old, new), []).append(region)
        most = max(by, key=lambda k: len(by[k]), default=None)
        rest = [(k, self.space.union(regions)) for k, regions in by.items() if k != most]
        for (old, new), region in rest:
            self._transfer(el, region, old, new)
        if most is not None:
            region = whole & ~self.space.union([r for _, r in rest]) if rest else whole
            self._transfer(el, region, *most)

    def _transfer(
        self, el: Element, region, old: Forwarding | None, new: Forwarding | None
    ) -> None:
        """Element el's headers in region now match another entry: move classes where the
        action changes; where only the entry does, note it for the tester's hold-back."""
        if old is not new:
            if self._deferred is None:
                self._move(el, region, new, old)
            else:
                self._defer_move(el, region, new, old)
        else:  # Update.classes names these classes too (the tester holds them back)
            self._id_region = self._id_region | region
            self._id_groups.add(self.part.group_of(el.idx))

    def _defer_move(
        self, el: Element, region, act: Forwarding | None, old: Forwarding | None
    ) -> None:
        """Within a batch, collect an element's moves by action and make them once per
        action at the end: moves of disjoint regions commute. A region that overlaps one
        already collected must come after it: what was collected is moved first."""
        d = self._deferred.get(el.idx)
        if d is None:
            d = self._deferred[el.idx] = _Deferred(el, self.space)
        elif (old is not None or d.miss_gained) and d.overlaps(region):
            self._move_deferred(d)
            d.reset()
        d.regions.append(region)
        d.by_action.setdefault(act, []).append(region)
        if act is None:
            d.miss_gained = True

    def _move_deferred(self, d: _Deferred) -> None:
        for act, regions in d.by_action.items():
            self._move(d.el, self.space.union(regions), act)

    def _move(
        self, el: Element, region, act: Forwarding | None, old: Forwarding | None = None
    ) -> None:
        """Element el now applies act to the headers of region: split and move classes.

        old, when given, is the action el applied to all of region until now: only its
        classes there can meet region, and with one label a few are tested directly,
        cheaper than the label's candidates.
        """
        part = self.part
        few = part.classes_with(el.idx, old) if old is not None else None
        parts = part.begin(el.idx, region, act, list(few) if few and len(few) <= 4 else None)
        try:
            for class_id, p, whole in parts:
                part.move(class_id, p, el.idx, act, whole)
        finally:
            part.end()

    def _replace(self, old: FlowEntry, new) -> None:
        """Same match and priority, new instructions (ADD over an entry, or MODIFY)."""
        el = self._element(old.dpid, old.table, old.match.in_port)
        entry = FlowEntry(
            dpid=old.dpid,
            table=old.table,
            priority=old.priority,
            match=old.match,
            instructions=new.instructions,
            cookie=new.cookie if isinstance(new, FlowEntry) else old.cookie,
            rule_id=new.rule_id,
            idle_timeout=new.idle_timeout,
            hard_timeout=new.hard_timeout,
            flags=new.flags,
            source=new.source,
        )
        old_b, new_b = self._behaviour(old), self._behaviour(entry)
        key = Element.key_of(entry)
        el.entries[key] = entry
        self._refer(old, key, False)
        self._refer(entry, key, True)
        self._changes.append((old, entry))
        if old_b is not new_b:
            self._touched.append(self.space.match_bdd(old.match.fields))
        for t in self._targets(el):
            region = t.ident.replace(entry, new_b)
            if old_b is not new_b:
                self._transfer(t, region, old_b.action, new_b.action)

    def _refer(self, entry: FlowEntry, key: tuple, add: bool) -> None:
        """Keep _group_refs: entry (at key in its element) names its groups, or no more."""
        ins = entry.instructions
        for a in ins.apply + ins.write if ins.apply or ins.write else ():
            if a[0] == "group":
                refs = self._group_refs[(entry.dpid, a[1])]
                where = (entry.table, entry.match.in_port, key)
                if add:
                    refs[where] = entry
                else:
                    refs.pop(where, None)

    def _remove(self, entry: FlowEntry) -> None:
        el = self._element(entry.dpid, entry.table, entry.match.in_port)
        act = self._behaviour(entry).action
        key = Element.key_of(entry)
        del el.entries[key]
        self._refer(entry, key, False)
        self._changes.append((entry, None))
        self._touched.append(self.space.match_bdd(entry.match.fields))
        for t in self._targets(el):
            # The freed headers go to the lower-priority entries, highest first, or miss.
            whole = t.ident.region(entry)
            freed = t.ident.remove(entry)
            pieces = [(r, act, new.action if new is not None else None) for r, new in freed]
            self._transfers(t, pieces, whole)

    # --- walks and indexes -------------------------------------------------------------------
    def build(self) -> None:
        """Walk every class from every edge ingress (after a bulk load)."""
        moved, reshaped, gone = self.part.drain()
        self.part.merge_alike(moved)
        self.part.drain()
        self.index.build(list(self.part.bdd_of))
        self.part.forget_changes()
        self.part.track_owners = True
        self._touched_exits.clear()
        self._built = True
        self.version += 1
        self._touched.clear()
        self._changes.clear()
        self._id_region = self.space.false
        self._id_groups.clear()

    def _commit(self, extra: Iterable[int] = ()) -> Update:
        part = self.part
        moved, reshaped, gone = part.drain()
        if moved:
            part.merge_alike(moved)
            moved2, reshaped2, gone2 = part.drain()
            gone |= gone2
            reshaped |= reshaped2
            moved = (moved | moved2) - gone
        # Headers that joined an existing class (part.transfers, merges) take its paths.
        joined = {part.survivor(t) if t in gone else t for _, t in part.transfers}
        joined.update(part.survivor(g) for g in gone)
        joined.discard(None)
        elems, edges = self._elem_list, self.topo.edges
        for e, behs in part.owner_changes.items():
            dpid = elems[e].dpid
            for b in behs:
                if b is None:
                    continue
                outs = self._out_ports(b)
                if _ANY_PORT in outs:
                    self._touch_switch(dpid)
                else:
                    self._touched_exits.update((dpid, p) for p in outs if (dpid, p) in edges)
        extra = set(extra)
        dirty, diffs = self.index.commit(part, moved, reshaped, gone, extra, self._built)
        # Classes walked again because their rewritten headers cross a changed class keep
        # their owners: what changed for them lies outside the matches touched.
        bdd_of = part.bdd_of
        self._touched += [bdd_of[c] for c in dirty - moved - extra if c in bdd_of]
        part.forget_changes()
        self.version += 1
        named = dirty | gone | joined
        if self._id_region != self.space.false:
            # Reports of these classes may carry the old Verify_Rule until the switch has
            # the change; the tester holds them back like moved classes.
            group = FILTER if self._id_groups == {FILTER} else FORWARDING
            named = named | set(part.candidates(self._id_region, group))
        self._id_region = self.space.false
        self._id_groups.clear()
        upd = Update(
            self.version,
            frozenset(named),
            exits=frozenset(self._touched_exits),
            pair_diffs=tuple(d for d in diffs if d[0] is not d[1]),
            touched=tuple(self._touched),
            space=self.space,
            reshaped=frozenset(reshaped - gone - named),
            changes=tuple(self._changes),
            ops=tuple(self._ops),
            cause=self._cause,
            trial=self._trial,
        )
        self._touched.clear()
        self._changes.clear()
        self._ops.clear()
        self._touched_exits.clear()
        for fn in self._subscribers:
            fn(upd)
        return upd

    def _touch_switch(self, dpid: int) -> None:
        self._touched_exits.update(p for p in self.topo.edges if p[0] == dpid)

    def drop_caches(self) -> None:
        """Forget the BDDs kept only to answer faster (encodings, candidate lists, id cubes)."""
        self.space.drop_caches()
        self.part.drop_caches()
        for el in self._elem_list:
            el.ident.drop_caches()

    # --- queries -----------------------------------------------------------------------------
    def subscribe(self, fn: Callable[[Update], None], weak: bool = False) -> None:
        """Call fn with every Update. weak=True holds a bound method by a weak reference:
        an object that holds the model and subscribes its own method would otherwise make
        a reference cycle, left to the cyclic collector, which may free the BDD manager
        before the nodes in the cycle (dd then skips Cudd_Quit and keeps all of the
        manager's memory)."""
        self._subscribers = [f for f in self._subscribers if not _dead(f)]
        self._subscribers.append(_WeakSubscriber(fn) if weak else fn)

    def classify(self, header) -> int:
        return self.part.classify(header)

    def set_host_macs(self, table: dict[Port, int | str] | None) -> None:
        """The MACs of the hosts behind edge ports, as the operator knows them (pazzd's
        fuzz.host_macs); they override what the rules name. A group address is refused."""
        macs = {}
        for port, mac in (table or {}).items():
            value = parse_mac(mac)
            if value & MAC_GROUP_BIT:
                raise ValueError(f"host_macs[{port}]: {mac} is a group (multicast) address")
            macs[tuple(port)] = value
        self._configured_macs, self._macs = macs, None

    def host_macs(self) -> dict[Port, int]:
        """{edge port: MAC of the host behind it}: the configured ones, else those the
        rules name (cpc.witness.host_macs), worked out again after each update. Probes and
        witnesses sent from a port carry its host's source MAC (a real switch learns or
        polices it there), and a witness its destination host's."""
        if self._macs is None or self._macs[0] != self.version:
            self._macs = (self.version, {**host_macs(self), **self._configured_macs})
        return self._macs[1]

    def expected(self, egress: Port, header, verify_port: int | None = None) -> list[Expected]:
        """Every (ingress, path, tags) the model allows for header sampled leaving at egress
        (only those with this Verify_Port, when given).

        The class's path templates name the elements each path consults; the entry the
        header matches at each of them gives the hop's rules and the Verify_Rule chain.
        With self.select, only the path the switches' pick sends the header along from
        each ingress (cpc.flowpaths). Paths that rewrote the header are walked again for
        the headers that can end as this one, every SELECT bucket a path.
        """
        if self.select is not None:
            return self._expected_picked(egress, header, verify_port)
        out: list[Expected] = []
        seen: dict[int, object] = {}  # element -> the Behaviour header matches there
        again: dict[tuple[int, Port], set[str]] = {}
        for o, class_id, _ in self._templates(egress, header):
            if verify_port is not None and o.verify_port != verify_port:
                continue
            if o.final_hdr is not None:
                if self.space.contains(o.final_hdr, header):
                    again.setdefault((class_id, o.ingress), set()).update(o.rw)
                continue
            hops, vrule = self._chain(o.hops, header, seen)
            out.append(Expected(o.ingress, hops, o.verify_port, vrule))
        return out + self._expected_again(again, egress, header, verify_port)

    def allows(self, egress: Port, header, verify_port: int, verify_rule: int) -> bool:
        """Is (verify_port, verify_rule) a tag pair the model expects for header at egress?

        The tester's hot path: only the paths with this Verify_Port are chained.
        """
        if self.select is not None:
            return self._allows_picked(egress, header, verify_port, verify_rule)
        seen: dict[int, bytes] = {}  # element -> u_r of the entry the header matches there
        elems = self._elem_list
        rewritten = False
        for o, _, path in self._templates(egress, header):
            if o.verify_port != verify_port:
                continue
            if o.final_hdr is not None:
                rewritten = True
                continue
            vrule = VERIFY_RULE_INIT
            for i in path:
                ur = seen.get(i)
                if ur is None:
                    ur = seen[i] = elems[i].ident.identify(header).ur
                vrule = crc_hqx(ur, vrule)
            if vrule == verify_rule:
                return True
        if rewritten:
            return any(
                e.verify_rule == verify_rule for e in self.expected(egress, header, verify_port)
            )
        return False

    def _flow_paths(self, header) -> FlowPaths:
        return FlowPaths(header, self._elem_list, self.group, self.select, self.select_known)

    def _expected_picked(self, egress: Port, header, verify_port: int | None) -> list[Expected]:
        """expected() with the switches' SELECT pick: the class's stored walk followed for
        header (cpc.flowpaths), no path of another bucket spelled out."""
        cls = self.part.classify(header)
        walk = self.index.walks.get(cls)
        out: list[Expected] = []
        if walk is not None:
            fp = self._flow_paths(header)
            for ings, tmpl, vport, entered in fp.to_egress(walk, egress, verify_port):
                hops, vrule = self._chain(tmpl, header, fp.seen)
                for ing, bit in ings:
                    out.append(
                        Expected(ing, enter(hops, ing[1]) if entered else hops, vport | bit, vrule)
                    )
        again = self._rewritten_ends(cls, egress, header, verify_port)
        return out + self._expected_again(again, egress, header, verify_port)

    def _allows_picked(self, egress: Port, header, verify_port: int, verify_rule: int) -> bool:
        cls = self.part.classify(header)
        walk = self.index.walks.get(cls)
        if walk is not None:
            fp = self._flow_paths(header)
            for _, tmpl, _, _ in fp.to_egress(walk, egress, verify_port):
                if self._chain(tmpl, header, fp.seen)[1] == verify_rule:
                    return True
        again = self._rewritten_ends(cls, egress, header, verify_port)
        return any(
            e.verify_rule == verify_rule
            for e in self._expected_again(again, egress, header, verify_port)
        )

    def _rewritten_ends(self, cls: int, egress: Port, header, verify_port: int | None) -> dict:
        """(start class, ingress) -> the fields rewritten, for the walks whose rewriting
        paths end at egress in class cls with header among their headers there."""
        again: dict[tuple[int, Port], set[str]] = {}
        contains = self.space.contains
        for o, start in self.index.rewritten_of(cls).get(egress, ()):
            if (verify_port is None or o.verify_port == verify_port) and contains(
                o.final_hdr, header
            ):
                again.setdefault((start, o.ingress), set()).update(o.rw)
        return again

    def _expected_again(self, again: dict, egress: Port, header, verify_port) -> list[Expected]:
        """The rewriting paths of again (_rewritten_ends) walked again for header."""
        out: list[Expected] = []
        for (class_id, ingress), rw in again.items():
            out += [
                e
                for e in self._expected_rewritten(class_id, ingress, egress, header, rw)
                if verify_port is None or e.verify_port == verify_port
            ]
        return out

    # --- per-hop samples: what a packet carries when it arrives mid-path -----------------
    def expected_at(
        self, port: Port, header, verify_port: int | None = None
    ) -> list[Expected] | None:
        """Every (ingress, hops before, tags) the model allows for header arriving at port,
        the far end of a link (an ingress sample taken there: the tags as the switches
        before it built them), over every path that passes there; only those with this
        Verify_Port, when given. Each Expected's hops end with the hop before port.

        None when the model cannot say: the header's class is made or changed by a rewrite
        somewhere (cpc.index.WalkIndex.prefixes_exact), so a packet may arrive as this
        header along a path whose templates do not name it.
        """
        cls = self.part.classify(header)
        if not self.index.prefixes_exact(cls):
            return None
        return self._arriving(cls, port, header, verify_port)

    def expected_via(self, dpid: int, header) -> list[Expected] | None:
        """Every beginning of a path that the model allows for header up to and including
        switch dpid, where it goes on to another switch: (ingress, hops to dpid's, the
        tags as the packet leaves dpid). None as for expected_at."""
        cls = self.part.classify(header)
        if not self.index.prefixes_exact(cls):
            return None
        if self.select is not None:
            fp = self._flow_paths(header)
            walk = self.index.walks.get(cls)
            found = fp.through(walk, dpid) if walk is not None else []
            return self._prefixed(found, header, None, 0, fp.seen)
        return self._prefixed(self.index.prefixes_of(cls).via.get(dpid, ()), header, None, 0)

    def allows_at(self, port: Port, header, verify_port: int, verify_rule: int) -> bool | None:
        """Is (verify_port, verify_rule) a tag pair the model allows for header arriving
        at port, the far end of a link? None when it cannot say (see expected_at)."""
        cls = self.part.classify(header)
        for e in self._arriving(cls, port, header, verify_port):
            if e.verify_rule == verify_rule:
                return True
        return False if self.index.prefixes_exact(cls) else None

    def _arriving(self, cls: int, port: Port, header, verify_port: int | None) -> list[Expected]:
        """The beginnings of class cls's own paths (those that keep the header unchanged)
        that arrive at port, filled in for header; with self.select, only those the
        switches' pick sends it along (cpc.flowpaths)."""
        if self.select is not None:
            fp = self._flow_paths(header)
            walk = self.index.walks.get(cls)
            found = fp.arrivals(walk, port, verify_port, self.port_bits) if walk else []
            return self._prefixed(found, header, verify_port, 0, fp.seen)
        return self._prefixed(self.index.prefixes_of(cls).at.get(port, ()), header, verify_port, 1)

    def _prefixed(
        self, prefixes, header, verify_port: int | None, cut: int, seen: dict | None = None
    ) -> list[Expected]:
        """The prefixes' hops (less the last `cut`) filled in for header: the entries it
        matches, the tags they build; distinct, only those with verify_port when given.
        seen: element -> the Behaviour header matches there, when known already."""
        out: dict[tuple, Expected] = {}
        seen = {} if seen is None else seen
        bits = self.port_bits
        for ingress, tmpl in prefixes:
            tmpl = tmpl[: len(tmpl) - cut]
            if (ingress, tmpl) in out:
                continue
            vport = 0
            for h in tmpl:
                vport |= bits(h.dpid, h.in_port)
            if verify_port is not None and vport != verify_port:
                continue
            hops, vrule = self._chain(tmpl, header, seen)
            out[(ingress, tmpl)] = Expected(ingress, hops, vport, vrule)
        return list(out.values())

    def _chain(self, template, header, seen: dict) -> tuple[tuple[Hop, ...], int]:
        """A path template's hops for header (the entry matched at each element) and its
        Verify_Rule chain; seen caches element -> the Behaviour header matches there,
        across templates (and with cpc.flowpaths' pick)."""
        elems = self._elem_list
        vrule = VERIFY_RULE_INIT
        hops = []
        for hop in template:
            refs = []
            for i in hop.rules:
                b = seen.get(i)
                if b is None:
                    b = seen[i] = elems[i].ident.identify(header)
                vrule = crc_hqx(b.ur, vrule)
                refs.append(b.ref)
            hops.append(Hop(hop.dpid, hop.in_port, tuple(refs), hop.out_port))
        return tuple(hops), vrule

    def _templates(self, egress: Port, header) -> list:
        return self.index.templates_of(self.part.classify(header)).get(egress, ())

    def _expected_rewritten(self, class_id: int, ingress: Port, egress: Port, header, rw) -> list:
        space = self.space
        # The ingress headers that can end as this one agree with it on every field that
        # no action rewrote.
        start = self.part.bdd_of[class_id] & space.exist_fields(
            space.header_bdd(header), sorted(rw)
        )
        res = self.walker.walk(class_id, [ingress], hdr=start, identity=True)
        return [
            Expected(o.ingress, o.hops, o.verify_port, o.verify_rule)
            for o in res.outcomes
            if o.rewritten
            and o.kind == "egress"
            and o.egress == egress
            and space.contains(o.final_hdr, header)
        ]

    def _trace_outcomes(self, ingress: Port, header) -> list:
        """The walk outcomes of one concrete header sent in at ingress."""
        if ingress[0] not in self.topo.switches:
            raise ModelError(f"unknown switch dpid {ingress[0]}")
        class_id = self.part.classify(header)
        res = self.walker.walk(
            class_id, [ingress], hdr=self.space.header_bdd(header), identity=True
        )
        return res.outcomes

    def trace(self, ingress: Port, header) -> list[Delivery]:
        """What happens to one concrete header sent in at ingress."""
        return [o.delivery() for o in self._trace_outcomes(ingress, header)]

    def trace_headers(self, ingress: Port, header) -> list[tuple[Delivery, dict]]:
        """trace(), each outcome with the header as it leaves the last switch: set_field
        rewrites applied (what a report at the egress carries)."""
        out = []
        for o in self._trace_outcomes(ingress, header):
            final = dict(header)
            if o.rewritten and o.final_hdr is not None:
                # One concrete header in, deterministic rewrites: final_hdr is one header.
                picked = self.space.pick(o.final_hdr) or {}
                final.update((f, picked[f]) for f in o.rw if f in picked)
            out.append((o.delivery(), final))
        return out

    def reach(self, ingress: Port, egress: Port):
        """The header set (BDD) that the model delivers from ingress to egress."""
        pair = (ingress, egress)
        parts = []
        bdd_of = self.part.bdd_of
        # A scan of the classes' pair sets (hash lookups): cheaper overall than keeping an
        # index from pairs to classes up to date on every update.
        walks, rewriting = self.index.walks, self.index.rewriting
        for class_id, walk in walks.items():
            if pair not in walk.pair_set():
                continue
            if class_id not in rewriting:
                parts.append(bdd_of[class_id])
                continue
            for o in walks[class_id].expanded():
                if o.kind == "egress" and o.ingress == ingress and o.egress == egress:
                    parts.append(o.src if o.src is not None else bdd_of[class_id])
        return self.space.union(parts)

    def corpus(self, ingress: Port, egress: Port):
        """(S_i, S_e) of Algorithm 2 for one pair.

        S_i: the headers the model delivers from ingress to egress.
        S_e: the headers the exit switch would send out of egress, from any of its ports:
        the regions of the exit switch's behaviours that output to egress (directly, by
        FLOOD/ALL, or through a group).
        """
        s_i = self.reach(ingress, egress)
        cached = self._s_e.get(egress)
        if cached is not None and cached[0] == self.version:
            return s_i, cached[1]
        dpid, port = egress
        parts = []
        for el in self._elems_of.get(dpid, ()):
            for beh, regions in self.part.regions_by_action(el.idx).items():
                outs = self._out_ports(beh)
                if port in outs or _ANY_PORT in outs:
                    parts += regions
        s_e = self.space.union(parts)
        self._s_e[egress] = (self.version, s_e)  # shared by every ingress of this egress
        return s_i, s_e

    def _out_ports(self, beh: Behaviour) -> frozenset:
        """The ports a behaviour can output to, directly or through its groups (_ANY_PORT:
        FLOOD/ALL); cached per behaviour until the groups change."""
        cache = self.walker.outputs_cache
        outs = cache.get(beh)
        if outs is None:
            ports = set(beh.instructions.outputs())
            if ports & {OFPP_ALL, OFPP_FLOOD}:
                ports.add(_ANY_PORT)
            for gid in beh.instructions.groups():
                g = self._groups.get((beh.dpid, gid))
                if g is not None:
                    ports.update(a[1] for b in g.buckets for a in b if a[0] == "output")
            outs = cache[beh] = frozenset(ports)
        return outs

    def loops(self) -> list[Loop]:
        """Every (class, ingress) walk that ends in a forwarding loop."""
        return list(self._iter_loops())

    def loop_count(self) -> int:
        """len(loops()), without holding every looping path at once."""
        return sum(len(w.expanded_kind("loop", c)) for c, w in self.index.walks.items())

    def _iter_loops(self):
        for class_id, walk in self.index.walks.items():
            for o in walk.expanded_kind("loop", class_id):
                yield Loop(o.ingress, class_id, o.delivery())

    def loop_cycles(self) -> set[tuple[tuple[int, int], ...]]:
        """The distinct forwarding loops, each as its cycle of (dpid, in_port).

        A loop outcome of a walk ends at a (switch, in_port) that its path entered before;
        the cycle is the part of the path from that first entry on, rotated to start at its
        smallest (dpid, in_port). Walks of many classes and ingresses that run into the same
        cycle count once.
        """
        cycles = set()
        for lp in self._iter_loops():
            hops = lp.delivery.hops
            last = (hops[-1].dpid, hops[-1].in_port)
            start = next(i for i, h in enumerate(hops) if (h.dpid, h.in_port) == last)
            cyc = [(h.dpid, h.in_port) for h in hops[start:-1]]
            k = cyc.index(min(cyc))
            cycles.add(tuple(cyc[k:] + cyc[:k]))
        return cycles

    def switch_elements(self, dpid: int) -> list[Element]:
        """The elements of one switch, oldest first."""
        return list(self._elems_of.get(dpid, ()))

    def find_entry(self, dpid: int, table: int, priority: int, match) -> FlowEntry | None:
        """The entry with this table, priority and match (in_port included), if any."""
        el = self._elements.get((dpid, table, match.in_port))
        return el.entries.get((match.fields, priority)) if el is not None else None

    def entry_regions(self, entry: FlowEntry) -> list[tuple[Element, object]]:
        """(element, the headers the entry wins there) for every element it takes part
        in, the empty regions left out: what the entry decides at its table."""
        el = self._elements.get((entry.dpid, entry.table, entry.match.in_port))
        out = []
        for t in self._targets(el) if el is not None else ():
            r = t.ident.region(entry)
            if r != self.space.false:
                out.append((t, r))
        return out

    def ties(self, entry: FlowEntry) -> list[FlowEntry]:
        """The entries of entry's table with its priority and other instructions that one
        packet can match together with it: which one it matches is the switch's choice
        (cpc.agents)."""
        el = self._elements.get((entry.dpid, entry.table, entry.match.in_port))
        found: dict[int, FlowEntry] = {}
        for t in self._targets(el) if el is not None else ():
            for o in t.ident.overlapping(entry):
                if o.priority == entry.priority and o.instructions != entry.instructions:
                    found[id(o)] = o
        return list(found.values())

    def entries(self, dpid: int | None = None) -> list[FlowEntry]:
        els = self._elem_list if dpid is None else self._elems_of.get(dpid, ())
        return [e for el in els for e in el.entries.values()]

    def groups(self) -> list[Group]:
        return list(self._groups.values())

    def rule_count(self) -> int:
        return sum(len(el.entries) for el in self._elem_list)

    def class_count(self) -> int:
        return len(self.part)

    def filter_elements(self) -> set[int]:
        """The elements that only filter: every entry either drops (a table-0 entry without
        actions, which forwards like the table-miss) or applies the one forwarding action of
        the element's other entries (an ACL: deny, or permit on to the same place)."""
        out = set()
        for el in self._elem_list:
            acts = {self._behaviour(e).action for e in el.ident.entries()}
            acts.discard(None)
            if len(acts) <= 1:
                out.add(el.idx)
        return out

    def split_class_counts(self) -> tuple[int, int]:
        """(forwarding, filter): the classes counted as two predicate sets, as APKeep counts
        them: the distinct actions of the classes at the elements that do not only filter,
        and at those that do (filter_elements). Each set has its default predicate."""
        filters = self.filter_elements()
        fwd, flt = set(), set()
        for owners in self.part.owners.values():
            fwd.add(frozenset((e, a) for e, a in owners.items() if e not in filters))
            flt.add(frozenset((e, a) for e, a in owners.items() if e in filters))
        return len(fwd), len(flt)

    def identity_collisions(self) -> list[list[FlowEntry]]:
        """Entries on one switch and table that share a Verify identity but differ in match.

        Match faults between such entries cannot be detected from the tags.
        """
        by_id: dict[tuple, list[FlowEntry]] = defaultdict(list)
        for e in self.entries():
            by_id[e.identity()].append(e)
        return [v for v in by_id.values() if len(v) > 1]


class _WeakSubscriber:
    """A subscribed bound method, held weakly (Model.subscribe(weak=True))."""

    __slots__ = ("ref",)

    def __init__(self, method) -> None:
        self.ref = weakref.WeakMethod(method)

    def __call__(self, upd: Update) -> None:
        method = self.ref()
        if method is not None:
            method(upd)


def _dead(fn) -> bool:
    return isinstance(fn, _WeakSubscriber) and fn.ref() is None
