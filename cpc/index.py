"""The walk index: every class's walk from the edge ingresses (cpc.walk), the indexes
built from the walks, and the re-walk of the classes an update touched.

    index.walks[c]            the walk of class c (its outcomes and path templates)
    index.through[c]          start classes whose rewriting paths end in class c
    index.group_users[g]      classes whose walks use group g = (dpid, group_id)
    index.templates_of(c)     path templates ending in class c, by egress (built on use)
    index.rewritten_of(c)     the rewriting ones alone (built on use)
    index.prefixes_of(c)      the beginnings of class c's paths, by where they arrive (on use)
    index.rewriting           classes with a walk that rewrites the header

cpc.model owns one and calls build() after a bulk load and commit() after each update.
"""

from __future__ import annotations

from collections import defaultdict

from .results import Port
from .walk import Walker, WalkResult, entry_changes, path_pairs, same_objects

# Stored suffixes kept across updates: a generation holds this many nodes (the Stanford
# replay peaks at 42,574, 120 MB), or what the last full build stored and XMEMO_AFTER_BUILD
# more if that is more (a build alone can store nearly as many: 46,208 on the k=8
# fat-tree); beyond, they become the elder generation (cpc.walk.Walker.age_suffixes).
XMEMO_MAX_NODES = 50_000
XMEMO_AFTER_BUILD = 25_000
HOPS_MAX = 1_000_000


class Dropped:
    """The paths of a walk that a partial re-walk did not keep (WalkResult.split_via), whose
    pairs are found only when Update.pairs is read: the shared entries of the switches in
    whole, and whether any other path went (an ingress in redo, or of a switch in whole)."""

    __slots__ = ("walk", "whole", "redo", "entries", "paths")

    def __init__(self, walk: WalkResult, whole: set, redo: set, entries: list, paths: bool):
        self.walk, self.whole, self.redo = walk, whole, redo
        self.entries, self.paths = entries, paths


def pair_changes(pair_diffs) -> frozenset:
    """The (ingress, egress) pairs in one walk of each (before, after) but not in the other
    (Update.pairs); a side is a WalkResult, the Dropped paths of a re-walk, or None.

    A switch whose edge ingresses share an entry node on both sides (one ingress list
    object: a switch entered at all its edge ports keeps it, in every walk) changes the
    pairs of those ingresses by the egresses that the two nodes do not share. Those are
    compared per switch (entry_changes, in C), and spelled out once for all the classes,
    instead of every (ingress, egress) pair of both sides (an edge switch of a few ports and
    a node of dozens of egresses: hundreds of pairs a side, for each class). The other
    paths are compared pair by pair: their ingresses are not those of a switch compared
    (an ingress's paths are in one place of a walk)."""
    out: set = set()
    by_ingresses: dict[int, tuple] = {}  # id(ingress list) -> (it, egresses gained or lost)
    for before, after in pair_diffs:
        old_rest: list = []
        new_rest: list = []
        entry_changes(
            before.entries if before is not None else [],
            after.entries if after is not None else [],
            by_ingresses,
            old_rest,
            new_rest,
        )
        if (
            type(before) is WalkResult
            and after is not None
            and same_objects(before.links, after.links)
            and same_objects(before.outcomes, after.outcomes)
        ):
            # Two whole walks with the same other paths, in any order (the ingress links
            # that every class shares, cpc.walk.Walker._ingress_link): only the entries left
            # unmatched differ.
            a = path_pairs([], [], old_rest) if old_rest else _NONE
            b = path_pairs([], [], new_rest) if new_rest else _NONE
        else:
            a, b = _rest_pairs(before, old_rest), _rest_pairs(after, new_rest)
        if a or b:
            out |= a ^ b
    for ivs, egresses in by_ingresses.values():
        out.update((iv[0], e) for iv in ivs for e in egresses)
    return frozenset(out)


_NONE = frozenset()


def _rest_pairs(side, entries: list) -> frozenset:
    """pair_changes' pairs of a side's paths other than the shared entries it compared."""
    if side is None:
        return _NONE
    if type(side) is Dropped:
        if not side.paths:
            return path_pairs([], [], entries, side.whole, side.redo) if entries else _NONE
        return path_pairs(side.walk.outcomes, side.walk.links, entries, side.whole, side.redo)
    if not side.outcomes and not side.links and not entries:
        return _NONE
    return path_pairs(side.outcomes, side.links, entries, None, _NONE)


class WalkIndex:
    """The walks of every class and the indexes built from them."""

    def __init__(self, walker: Walker, elem_list: list, ingresses: list[Port]) -> None:
        self.walker = walker
        self._elems = elem_list  # the model's elements, by index (shared, grows)
        self._ingress_pos = {p: i for i, p in enumerate(ingresses)}
        self._edge_switches = sorted({p[0] for p in ingresses})
        self.walks: dict[int, WalkResult] = {}
        self.through: dict[int, set[int]] = defaultdict(set)  # class -> start classes via rewrite
        self.group_users: dict[tuple[int, int], set[int]] = defaultdict(set)
        self.groups_of: dict[int, set[tuple[int, int]]] = defaultdict(set)  # the reverse
        # Path templates by the class a path ends in and its egress, built when first asked
        # for: final class -> egress -> [(Outcome, start class, the elements it consults)]
        self.expect: dict[int, dict[Port, list]] = {}
        # The same for the rewriting paths alone (stored as they are, never shared), for
        # the answers that do not read templates (cpc.flowpaths): final class -> egress ->
        # [(Outcome, start class)].
        self.rewritten_ends: dict[int, dict[Port, list]] = {}
        self.rewriting: set[int] = set()  # classes with a walk that rewrites the header
        self.prefixes: dict[int, Prefixes] = {}  # built when first asked for: prefixes_of
        self.built_nodes = 0  # suffixes stored by the last build (XMEMO_MAX_NODES)

    def build(self, classes) -> None:
        """Forget every walk and walk each class afresh."""
        self.walks.clear()
        self.through.clear()
        self.group_users.clear()
        self.groups_of.clear()
        self.expect.clear()
        self.rewritten_ends.clear()
        self.prefixes.clear()
        self.rewriting.clear()
        self.walker.forget_suffixes()
        self.walker.xmemo = self.walker.suffixes
        try:
            for c in classes:
                self.walk(c)
        finally:
            self.walker.xmemo = None
            self.built_nodes = self.walker.stored

    def commit(self, part, moved: set, reshaped: set, gone: set, extra, built: bool):
        """Re-walk the classes an update moved, reshaped (and `extra`); forget those gone.

        Returns (dirty, diffs): the classes walked again, and the walks (before, after) of
        headers that changed class or path (cpc.model.Update.pair_diffs)."""
        full = set(extra)
        through = self.through
        for c in reshaped | gone | moved if through else ():
            t = through.pop(c, None)
            if t:
                full |= t
        dirty = (set(moved) | full) - gone
        diffs: list[tuple[WalkResult | None, WalkResult | None]] = []
        if not built:
            for c in gone:
                self.unwalk(c)
            return dirty, diffs
        # Plan every re-walk before touching the old walks: split-off classes read theirs.
        sources = {part.origin.get(f, f) for f, _ in part.transfers}
        crosses: dict = {}  # switches changed -> entry node -> whether it visits one
        plans = {
            c: None if c in full else self.partial_plan(part, c, crosses)
            for c in dirty
            if c in part.bdd_of
        }
        before = {c: self.walks.get(c) for c in gone | dirty | sources | set(part.origin.values())}
        for c in gone | dirty:
            self.unwalk(c)
        # Suffixes stay valid across updates (a node is stored by the actions it met), so a
        # commit finds those of earlier ones, even for its one class.
        walker = self.walker
        limit = max(XMEMO_MAX_NODES, self.built_nodes + XMEMO_AFTER_BUILD)
        if walker.stored > limit:  # nodes of long-gone forwarding states pile up
            walker.age_suffixes()
        walker.xmemo = walker.suffixes
        if len(self.walker.hops) > HOPS_MAX:  # hops of long-gone elements pile up
            self.walker.hops.clear()
        fresh = {}
        try:
            for c, plan in plans.items():
                fresh[c] = self.walk(c, plan)
        finally:
            self.walker.xmemo = None
        # A pair's S_i changed where headers gained or lost an outcome for it: Update.pairs
        # compares, when read, each class's walk with the one its headers had before (its
        # own, its origin's, or the class they joined). A re-walk kept the paths of some
        # ingresses as they were: only what it dropped and what it walked anew differ.
        walks = self.walks
        for c, plan in plans.items():
            if plan is not None:
                diffs.append((plan[3], fresh[c]))
                continue
            old = before.get(part.origin.get(c, c))
            diffs.append((old if old is not None else before.get(c), walks.get(c)))
        for c in gone:
            keep = part.survivor(c)
            old = before.get(part.origin.get(c, c))
            diffs.append((old, walks.get(keep) if keep is not None else None))
        for f, t in part.transfers:
            keep = part.survivor(t) if t in gone else t
            diffs.append((before[part.origin.get(f, f)], walks.get(keep)))
        return dirty, diffs

    def partial_plan(self, part, class_id: int, crosses: dict | None = None):
        """(what of the walk stays valid, switches to walk again at all their edge ports,
        other ingresses to walk again) for a class whose owners changed.

        A walk depends only on the class's owners at the switches it visits, so the
        outcomes of an ingress whose paths avoid every switch where the class moved stay
        exactly as they were. None asks for a full walk.
        """
        base = part.origin.get(class_id, class_id)
        old = self.walks.get(base)
        if old is None or base in self.rewriting:
            return None
        changed = frozenset([self._elems[e].dpid for e in part.changed_at.get(class_id, ())])
        memo = crosses.setdefault(changed, {}) if crosses is not None else None
        keep, whole, redo, gone = old.split_via(changed, memo)
        # split_via keeps a list of the walk as it is when none of it goes
        paths = keep.outcomes is not old.outcomes or keep.links is not old.links
        if base != class_id:
            keep.outcomes = [o._replace(final_class=class_id) for o in keep.outcomes]
            groups = self.groups_of.get(base, ())
            for g in groups:
                self.group_users[g].add(class_id)
            self.groups_of[class_id].update(groups)
        return (
            keep,
            whole,
            sorted(redo, key=self._ingress_pos.__getitem__),
            Dropped(old, whole, redo, gone, paths),
        )

    def walk(self, class_id: int, plan=None) -> WalkResult:
        """Walk a class (again, along a partial_plan); returns what was walked anew."""
        if plan is None:
            res = fresh = self.walker.walk(class_id, (), switches=self._edge_switches)
        else:
            keep, whole, ingresses, _ = plan
            got = None if ingresses else self.walker.memo_walk(class_id, sorted(whole))
            if got is not None:
                # Only stored nodes: no path spelled out, no rewrite (a walk that rewrites
                # gets no plan), no class entered through one.
                entries, groups = got
                # (commit() unwalked the class first: its templates are forgotten.)
                self.walks[class_id] = WalkResult(
                    keep.outcomes, keep.links, keep.entries + entries, None, None
                )
                self._index_groups(class_id, groups or ())
                return WalkResult([], [], entries, None, None)  # paths only
            res = self.walker.walk(class_id, ingresses, switches=sorted(whole))
            fresh = WalkResult(res.outcomes, res.links, res.entries, None, None)  # paths only
            res.outcomes = keep.outcomes + res.outcomes
            res.links = keep.links + res.links
            res.entries = keep.entries + res.entries
        self.walks[class_id] = res
        # Paths that rewrite the header are never shared: they are all in .outcomes.
        self._forget_templates(class_id, res.outcomes)
        if any(o.rewritten for o in res.outcomes):
            self.rewriting.add(class_id)
        for t in res.through:
            self.through[t].add(class_id)
        self._index_groups(class_id, res.groups)
        res.through = res.groups = None  # indexed; the walk keeps only its paths
        return fresh

    def _index_groups(self, class_id: int, groups) -> None:
        """The class's walk uses these groups (re-walked when one changes)."""
        for g in groups:
            self.group_users[g].add(class_id)
        if groups:
            self.groups_of[class_id].update(groups)

    def unwalk(self, class_id: int) -> None:
        walk = self.walks.pop(class_id, None)
        self._forget_templates(class_id, walk.outcomes if walk is not None else ())
        self.rewriting.discard(class_id)

    def _forget_templates(self, class_id: int, outcomes) -> None:
        self.expect.pop(class_id, None)
        self.rewritten_ends.pop(class_id, None)
        self.prefixes.pop(class_id, None)
        if class_id in self.rewriting or any(o.rewritten for o in outcomes):
            for o in outcomes:
                self.expect.pop(o.final_class, None)
                self.rewritten_ends.pop(o.final_class, None)

    def templates_of(self, cls: int) -> dict[Port, list]:
        """The path templates that end in class cls, by egress (indexed on first use)."""
        idx = self.expect.get(cls)
        if idx is not None:
            return idx
        idx = {}
        for start in dict.fromkeys((cls, *self.through.get(cls, ()))):
            walk = self.walks.get(start)
            if walk is None:
                continue
            # Another class's paths end here only through a rewrite: never shared.
            for o in walk.expanded(start) if start == cls else walk.outcomes:
                if o.kind == "egress" and o.final_class == cls:
                    elems = tuple(i for h in o.hops for i in h.rules)
                    idx.setdefault(o.egress, []).append((o, start, elems))
        if idx:
            self.expect[cls] = idx
        return idx

    def rewritten_of(self, cls: int) -> dict[Port, list]:
        """The rewriting paths that end in class cls, by egress: [(Outcome, start class)]
        (indexed on first use; only the walks' own outcomes, no path spelled out)."""
        idx = self.rewritten_ends.get(cls)
        if idx is not None:
            return idx
        idx = {}
        if self.prefixes_exact(cls):  # no rewrite makes or changes the class
            return idx
        for start in dict.fromkeys((cls, *self.through.get(cls, ()))):
            walk = self.walks.get(start)
            for o in walk.outcomes if walk is not None else ():
                if o.rewritten and o.kind == "egress" and o.final_class == cls:
                    idx.setdefault(o.egress, []).append((o, start))
        if idx:
            self.rewritten_ends[cls] = idx
        return idx

    def prefixes_of(self, cls: int) -> Prefixes:
        """The beginnings of class cls's own paths that keep its headers unchanged (see
        Prefixes), indexed on first use and kept until the class is walked again."""
        got = self.prefixes.get(cls)
        if got is None:
            walk = self.walks.get(cls)
            got = Prefixes(walk.expanded(cls) if walk is not None else ())
            self.prefixes[cls] = got
        return got

    def prefixes_exact(self, cls: int) -> bool:
        """Whether prefixes_of(cls) is every way a header of cls arrives anywhere: no path
        of the class rewrites the header, and no rewrite of another class's headers makes
        one of cls (cls's headers could then arrive mid-path from elsewhere)."""
        return cls not in self.rewriting and not self.through.get(cls)


class Prefixes:
    """Path templates cut at every switch they cross, for judging per-hop samples.

    at[(dpid, in_port)]: (ingress, hops up to and including the hop that entered dpid on
    in_port), for every arrival over a link (not the first hop). via[dpid]: the same for
    every hop at dpid that sent the packet on to another switch. Each distinct once
    (paths that fork later share their beginning). Paths that rewrite the header are left
    out: which hop carried which header is not kept in a template."""

    __slots__ = ("at", "via")

    def __init__(self, outcomes) -> None:
        at: dict[Port, dict] = {}
        via: dict[int, dict] = {}
        for o in outcomes:
            if o.rewritten:
                continue
            hops = o.hops
            last = len(hops) - 1
            for k, h in enumerate(hops):
                if k:
                    at.setdefault((h.dpid, h.in_port), {})[(o.ingress, hops[: k + 1])] = None
                if k < last:
                    via.setdefault(h.dpid, {})[(o.ingress, hops[: k + 1])] = None
        self.at = {p: list(v) for p, v in at.items()}
        self.via = {d: list(v) for d, v in via.items()}
