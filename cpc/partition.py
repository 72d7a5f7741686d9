"""Equivalence classes of headers (atomic predicates), maintained incrementally.

A class is a set of headers that every table of the network treats alike: at
each element (one switch table, or the in_port-specific part of one) all its
headers get the same action (the matched entry's instructions; which entry it was
is kept per element, cpc.tables.Identities). Updates split and move only the
classes whose action changes at an element, in the style of APKeep, and merge
classes that become alike again.

Header regions are labelled inside a BDD (Labels), whose header variables are
followed by CLASS_ID_BITS label variables: for every header h, label(h, id) is
true for exactly the id of h's region. Two operations fall out of it:
  * classify(h): a single walk from the root, guided by h's bits, that stops at
    the first label variable (typically after the destination prefix length);
  * candidates(p): the ids whose regions intersect a predicate p, by quantifying
    the header variables out of `label & p` in one CUDD pass that never builds the
    conjunction, at a cost that grows with the header space p touches, not with
    the number of regions.
The classes are labelled directly, or, when filters (ACLs) hold headers, by their
owners at the filters and at the other elements in two labels (Partition).
"""

from __future__ import annotations

import weakref
from collections import defaultdict
from collections.abc import Mapping
from functools import partial

from ._leqc import classes_meeting as _classes_meeting
from .space import CLASS_ID_BITS, HeaderSpace

_MASK64 = (1 << 64) - 1


class Labels:
    """Disjoint header regions named by ids, labelled inside one BDD.

    `label` has the header variables on top and CLASS_ID_BITS label variables below:
    label(h, id) is true for exactly the id of h's region. classify(h) is one walk from
    the root guided by h's bits; candidates(p) finds the ids whose regions meet p.
    Used for the network's classes (Partition) and for each element's entries
    (cpc.tables.Identities).
    """

    def __init__(self, space: HeaderSpace) -> None:
        self.space = space
        self._free: list[int] = []
        self._pending_free: list[int] = []  # ids dropped in this update, reused after it
        self._next = 0
        self._cube: dict[int, object] = {}
        self._id_of_node: dict[int, int] = {}
        self.label = space.false
        self._cand_label = 0
        self._cand_cache: dict[int, tuple] = {}

    def drop_caches(self) -> None:
        """Forget the candidate lists kept only to answer faster."""
        self._cand_cache.clear()

    def _new_id(self) -> int:
        if self._free:
            ident = self._free.pop()
        else:
            ident = self._next
            self._next += 1
            if ident >= 1 << CLASS_ID_BITS:
                raise OverflowError("too many header regions for the label width")
        self._cube[ident] = None  # its cube is made when first put into the label
        return ident

    def _cube_of(self, ident: int):
        cube = self._cube[ident]
        if cube is None:
            cube = self._cube[ident] = self.space.id_cube(ident)
            self._id_of_node[int(cube)] = ident
        return cube

    def _drop_id(self, ident: int) -> None:
        cube = self._cube.pop(ident)
        if cube is not None:
            del self._id_of_node[int(cube)]
        self._pending_free.append(ident)

    def release_ids(self) -> None:
        """Let the ids dropped in this update be used again (after it)."""
        self._free.extend(self._pending_free)
        self._pending_free.clear()

    def _relabel(self, region, ident: int) -> None:
        """Name every header of region with ident."""
        self.label = self.space.bdd.ite(region, self._cube_of(ident), self.label)

    def classify(self, header) -> int:
        """The id of a concrete header's region (header: dict field -> int)."""
        node, comp = self.label, 0
        lf, ls, id_level = self.space.level_field, self.space.level_shift, self.space.id_level
        get = header.get
        while True:
            level = node.level
            if level >= id_level:
                return self._id_of_node[int(node) ^ comp]
            comp ^= node.negated
            node = node.high if (get(lf[level], 0) >> ls[level]) & 1 else node.low

    def candidates(self, pred) -> list[int]:
        """Ids whose regions intersect the header set pred.

        ∃header. (label ∧ pred), one CUDD pass, leaves a BDD over the label bits whose
        minterms are the ids. One id is the common answer: then that BDD is the id's own
        cube, found by node without enumerating minterms.
        """
        # The same match recurs on many switches while the labels stay put: cache per label.
        label_id = int(self.label)
        if label_id != self._cand_label:
            self._cand_label = label_id
            self._cand_cache = {}
        cached = self._cand_cache.get(int(pred))
        if cached is not None and cached[0] == pred:
            return cached[1]
        out = self._candidates(pred)
        self._cand_cache[int(pred)] = (pred, out)  # holding pred keeps its node id unique
        return out

    def _candidates(self, pred) -> list[int]:
        space = self.space
        ids = space.exists_and(self.label, pred)
        one = self._id_of_node.get(int(ids))
        if one is not None:
            return [one]
        return [] if ids == space.false else self._minterms(ids)

    def _minterms(self, u) -> list[int]:
        out: list[int] = []
        true_id, false_id = int(self.space.true), int(self.space.false)
        base = self.space.id_level
        stack = [(u, 0, 0, 0)]
        while stack:
            node, comp, i, val = stack.pop()
            if i == CLASS_ID_BITS:
                if int(node) ^ comp == true_id:
                    out.append(val)
                continue
            if node.level - base > i:  # label bit i not tested here: both values
                stack.append((node, comp, i + 1, val << 1))
                stack.append((node, comp, i + 1, (val << 1) | 1))
                continue
            comp ^= node.negated
            for bit, child in ((0, node.low), (1, node.high)):
                if int(child) ^ comp != false_id:
                    stack.append((child, comp, i + 1, (val << 1) | bit))
        return [i for i in out if i in self._cube]


class Projection(Labels):
    """The classes' owners at one group of elements, kept as a partition of its own: each
    distinct owner set (a *projection*) is one id, labelled in its own BDD.

    A class is the pair of its projections at the two groups (Partition): each group's
    label has only that group's structure, so moving a forwarding region relabels a label
    without the filters' cuts, and the other way round. As for classes, a projection whose
    headers all change owner keeps its id and label; only a part moving does not.
    """

    def __init__(self, space: HeaderSpace) -> None:
        super().__init__(space)
        self.owners: dict[int, dict] = {}  # id -> {element: action}
        self.region: dict[int, object] = {}  # id -> its headers
        # element -> action -> the projections with it there (no empty sets)
        self.members: dict[int, dict[object, set[int]]] = defaultdict(dict)
        self.emptied = False  # some element lost its last projection with an action
        self._sig: dict[int, int] = {}
        self._by_sig: dict[int, set[int]] = defaultdict(set)

    def add(self, owners: dict, region) -> int:
        pid = self._new_id()
        self._index(pid, owners, _sig_of(owners))
        self.region[pid] = region
        self._relabel(region, pid)
        return pid

    def _index(self, pid: int, owners: dict, sig: int) -> None:
        self.owners[pid] = owners
        _index_owners(self.members, self._sig, self._by_sig, pid, owners, sig)

    def _unindex(self, pid: int) -> None:
        owners = self.owners.pop(pid)
        self.emptied |= _unindex_owners(self.members, self._sig, self._by_sig, pid, owners)

    def _reindex(self, pid: int, elem: int, old, key, owners: dict, sig: int) -> None:
        """pid's owners are now `owners`, which differ from before only at elem."""
        _unindex_sig(self._by_sig, pid, self._sig[pid])
        self.owners[pid] = owners
        self._sig[pid] = sig
        self._by_sig[sig].add(pid)
        keys = self.members[elem]
        if old is not None:
            self.emptied |= _member_discard(keys, old, pid)
        if key is not None:
            _member_add(keys, key, pid)

    def assign(self, elem: int, region, key) -> dict[int, int]:
        """Every header of region now gets action key at elem. Returns, for every projection
        that meets region, the one its headers there have now."""
        out: dict[int, int] = {}
        within, disjoint = self.space.within, self.space.disjoint
        for pid in self.candidates(region):
            owners = self.owners[pid]
            old = owners.get(elem)
            if old is key:
                out[pid] = pid
                continue
            had = self.region[pid]
            if within(had, region):
                part = had
            elif disjoint(had, region):
                continue
            else:
                part = had & region
            sig = _resig(self._sig[pid], elem, old, key)
            want = _with_action(owners, elem, key)
            other = next((q for q in self._by_sig.get(sig, ()) if self.owners[q] == want), None)
            if part == had and other is None:  # all of it: it keeps its id and label
                self._reindex(pid, elem, old, key, want, sig)
                out[pid] = pid
                continue
            if other is None:
                other = self._new_id()
                self._index(other, want, sig)
                self.region[other] = part
            else:
                self.region[other] = self.region[other] | part
            if part == had:
                self._unindex(pid)
                del self.region[pid]
                self._drop_id(pid)
            else:
                self.region[pid] = had & ~part
            self._relabel(part, other)
            out[pid] = other
        return out


def _classes_meeting_py(disjoint, x, x_first, ys, pair, out, whole, inter, rest, ry_of) -> None:
    """cpc/_leqc.c's classes_meeting in Python, with the given disjointness test: for each
    projection y of ys, the classes of (x, y) as (class, None, whole), all of them when whole
    is given, else those whose region meets inter, whole when it misses rest."""
    for y in ys:
        w = whole
        if whole is None:
            ry = ry_of[y]
            if disjoint(inter, ry):
                continue
            w = disjoint(rest, ry)
        for c in pair[(x, y) if x_first else (y, x)]:
            out.append((c, None, w))


def _sig_of(owners: dict) -> int:
    """An owner set's signature: the sum of its items' hashes (so that one item can be
    swapped without the others)."""
    return sum(hash(item) for item in owners.items()) & _MASK64


def _with_action(owners: dict, elem: int, key) -> dict:
    """A copy of owners with elem's action set to key (None: none)."""
    out = dict(owners)
    if key is None:
        del out[elem]
    else:
        out[elem] = key
    return out


def _index_owners(members: dict, sigs: dict, by_sig: dict, ident: int, owners: dict, sig: int):
    """Index ident (a class or a projection) by its owners: element -> action -> the ids
    with it there, and by the owners' signature."""
    sigs[ident] = sig
    by_sig[sig].add(ident)
    for e, k in owners.items():
        _member_add(members[e], k, ident)


def _unindex_owners(members: dict, sigs: dict, by_sig: dict, ident: int, owners: dict) -> bool:
    """_index_owners undone; True when some element lost its last id with an action."""
    _unindex_sig(by_sig, ident, sigs.pop(ident))
    emptied = False
    for e, k in owners.items():
        emptied |= _member_discard(members[e], k, ident)
    return emptied


def _member_add(keys: dict, key, ident: int) -> None:
    bucket = keys.get(key)
    if bucket is None:
        keys[key] = {ident}
    else:
        bucket.add(ident)


def _member_discard(keys: dict, key, ident: int) -> bool:
    """Take ident out of key's bucket; True when that was its last member."""
    bucket = keys[key]
    bucket.discard(ident)
    if bucket:
        return False
    del keys[key]
    return True


def _unindex_sig(by_sig: dict, ident: int, sig: int) -> None:
    bucket = by_sig.get(sig)
    if bucket is not None:
        bucket.discard(ident)
        if not bucket:
            del by_sig[sig]


def _resig(sig: int, elem: int, old, key) -> int:
    """The signature with elem's action old (None: none) replaced by key."""
    if old is not None:
        sig -= hash((elem, old))
    if key is not None:
        sig += hash((elem, key))
    return sig & _MASK64


FORWARDING, FILTER = 0, 1


class Regions(Mapping):
    """Every class's headers (Partition.bdd_of): class id -> BDD.

    With two labels a class is the intersection of its two projections, which every
    update keeps up to date: a move forgets the regions it changes instead of computing
    them (a difference and a union per class moved, on regions the filters make large),
    and a region is derived again when first read. Most classes move again before anyone
    reads them.
    """

    __slots__ = ("_part", "known")

    def __init__(self, part: Partition) -> None:
        self._part = weakref.proxy(part)  # no reference cycle: a model's BDDs go with it
        self.known: dict[int, object] = {}  # the regions computed, or derived since

    def __getitem__(self, class_id: int):
        u = self.known.get(class_id)
        return u if u is not None else self._part._derive(class_id)

    def __contains__(self, class_id) -> bool:
        return class_id in self._part.owners

    def __iter__(self):
        return iter(self._part.owners)

    def __len__(self) -> int:
        return len(self._part.owners)


class Partition:
    """The network's header classes: regions that every element treats alike.

    The elements fall into two groups, as APKeep keeps two predicate sets: filters (every
    action of the element but the table-miss is one and the same: an ACL's permit) and
    the others. An element starts as a filter and becomes forwarding, for good, when it
    applies a second action. While some filter has headers of its own, each group labels
    the headers with the classes' owners at its elements (Projection) and a class is named
    by its pair of projections: a forwarding update then relabels a label without the
    filters' cuts. Otherwise the classes are labelled directly, in one label.
    """

    def __init__(self, space: HeaderSpace) -> None:
        self.space = space
        self.bdd_of = Regions(self)
        self._known = self.bdd_of.known
        self.owners: dict[int, dict[int, object]] = {}  # class -> {element: action}
        # element -> action -> the classes with it there (no empty sets), and the classes by
        # the signature of their owners: kept while the projections do not hold (_lazy());
        # with two labels the projections keep their own (Projection.members) and a class's
        # owners are named by its pair of projections, so a class split, moved or merged
        # touches no element's set and no signature.
        self._members: dict[int, dict[object, set[int]]] = defaultdict(dict)
        self._sig: dict[int, int] = {}
        self._by_sig: dict[int, set[int]] = defaultdict(set)
        self.group: dict[int, int] = {}  # element -> FORWARDING (absent: FILTER)
        self.direct = Labels(space)  # class ids, and the label while not factored
        self.factored = False
        self._direct_ok, self._proj_ok, self._recheck = True, False, False
        self.proj: tuple[Projection, Projection] = (Projection(space), Projection(space))
        self.pids: dict[int, list[int]] = {}  # class -> [forwarding, filter] projection
        self._pair: dict[tuple[int, int], set[int]] = {}  # projections -> classes
        # Each group's projections -> the other group's that they make classes with.
        self._with: tuple[dict[int, set[int]], dict[int, set[int]]] = ({}, {})
        self._map: dict[int, int] | None = None  # within a move: projection -> the new one
        self._g = FORWARDING  # within a move: the element's group
        first = self.direct._new_id()
        self._known[first] = space.true
        self.owners[first] = {}
        self._sig[first] = 0
        self._by_sig[0].add(first)
        self.direct.label = self.direct._cube_of(first)
        # Bookkeeping of one update, drained by the model: classes whose owners changed or
        # that were created, classes whose extent changed, and classes that disappeared.
        self.moved: set[int] = set()
        self.reshaped: set[int] = set()
        self.gone: set[int] = set()
        self.changed_at: dict[int, set[int]] = defaultdict(set)  # class -> elements it moved at
        self.origin: dict[int, int] = {}  # class split off in this update -> class it came from
        self.merged_into: dict[int, int] = {}  # class merged away in this update -> the one kept
        self.owner_changes: dict[int, set] = defaultdict(set)  # element -> actions in or out
        self.transfers: list[tuple[int, int]] = []  # (from, to): headers moved between classes
        self.track_owners = False  # off during bulk builds (nothing reads them, they are large)

    def __len__(self) -> int:
        return len(self.owners)

    def drop_caches(self) -> None:
        """Forget the candidate lists kept only to answer faster."""
        self._fresh()  # and the second label once no filter holds headers
        self.direct.drop_caches()
        for p in self.proj:
            p.drop_caches()

    def _relabel(self, region, class_id: int) -> None:
        if not self.factored:
            self.direct._relabel(region, class_id)

    # --- the two groups ---------------------------------------------------------------------
    def _set_pids(self, class_id: int, pids: list[int]) -> None:
        if class_id in self.pids:
            self._unset_pids(class_id)
        self.pids[class_id] = pids
        key = (pids[0], pids[1])
        bucket = self._pair.get(key)
        if bucket is None:
            self._pair[key] = {class_id}
            for g in (FORWARDING, FILTER):
                other = self._with[g].get(pids[g])
                if other is None:
                    self._with[g][pids[g]] = {pids[1 - g]}
                else:
                    other.add(pids[1 - g])
        else:
            bucket.add(class_id)

    def _unset_pids(self, class_id: int) -> None:
        pids = self.pids.pop(class_id)
        key = (pids[0], pids[1])
        bucket = self._pair[key]
        bucket.discard(class_id)
        if not bucket:
            del self._pair[key]
            for g in (FORWARDING, FILTER):
                other = self._with[g][pids[g]]
                other.discard(pids[1 - g])
                if not other:
                    del self._with[g][pids[g]]

    def _fresh(self) -> None:
        if self._recheck:
            self._decide()

    def _decide(self) -> None:
        """Move elements that apply two actions to the forwarding group, then label the
        classes by their projections if some filter has headers, else directly."""
        self._recheck = False
        group = self.group
        if self._lazy():
            by_elem = [*self.proj[FORWARDING].members.items(), *self.proj[FILTER].members.items()]
        else:
            by_elem = list(self._members.items())
        for elem, keys in by_elem:
            if elem not in group and len(keys) > 1:
                group[elem] = FORWARDING
        factored = any(e not in group and keys for e, keys in by_elem)
        if factored and not self._lazy():
            self._rebuild()
            self.direct.label = self.space.false  # not kept up to date while factored
            self._members, self._sig, self._by_sig = defaultdict(dict), {}, defaultdict(set)
        elif not factored and not (not self.factored and self._direct_ok):
            if self._lazy():
                self._index_classes()
            self.direct.label = self.space.false
            for c, u in list(self.bdd_of.items()):  # derived while the projections hold
                self.direct._relabel(u, c)
            self.proj = (Projection(self.space), Projection(self.space))
            self.pids, self._pair, self._with = {}, {}, ({}, {})
        self.factored = factored
        self._direct_ok, self._proj_ok = not factored, factored

    def _index_classes(self) -> None:
        """Index the classes by their owners (left to the projections while they held)."""
        members = self._members = defaultdict(dict)
        sigs, by_sig = self._sig, self._by_sig = {}, defaultdict(set)
        for c, owners in self.owners.items():
            _index_owners(members, sigs, by_sig, c, owners, _sig_of(owners))

    # --- what an element applies --------------------------------------------------------------
    def _keys(self, elem: int) -> dict | None:
        """elem's actions -> the classes (or, with two labels, its group's projections) with it."""
        if self._lazy():
            return self.proj[self.group_of(elem)].members.get(elem)
        return self._members.get(elem)

    def actions(self, elem: int) -> set:
        """The actions elem applies to some headers (the table-miss not counted)."""
        return set(self._keys(elem) or ())

    def classes_with(self, elem: int, key) -> set[int] | None:
        """The classes that elem applies key to; None with two labels (the projections
        find the classes there, see parts())."""
        return None if self._lazy() else self._members.get(elem, {}).get(key, set())

    def regions_by_action(self, elem: int) -> dict:
        """elem's actions -> the regions (classes' or projections') that make up the headers
        it applies each to."""
        region = self.proj[self.group_of(elem)].region if self._lazy() else self.bdd_of
        return {k: [region[i] for i in ids] for k, ids in (self._keys(elem) or {}).items()}

    def _rebuild(self) -> None:
        """Make both groups' projections afresh from the classes' owners (every class's
        region is known: see _unproject)."""
        group = self.group
        by: tuple[dict, dict] = (defaultdict(list), defaultdict(list))
        for c, owners in self.owners.items():
            fwd, flt = {}, {}
            for e, k in owners.items():
                (fwd if e in group else flt)[e] = k
            by[0][frozenset(fwd.items())].append(c)
            by[1][frozenset(flt.items())].append(c)
        self.proj = (Projection(self.space), Projection(self.space))
        self.pids, self._pair, self._with = {}, {}, ({}, {})
        pids: dict[int, list[int]] = {c: [0, 0] for c in self.owners}
        for g, proj in enumerate(self.proj):
            for key, classes in by[g].items():
                pid = proj.add(dict(key), self.space.union([self._known[c] for c in classes]))
                for c in classes:
                    pids[c][g] = pid
        for c, p in pids.items():
            self._set_pids(c, p)

    def begin(self, elem: int, region, key, among=None) -> list[tuple[int, object, bool]]:
        """Every header of region is about to get action key at elem: returns the classes
        it meets, as parts() (the labels settled first), and relabels the headers'
        projection at elem's group. The caller moves each, then calls end()."""
        if elem not in self.group and key is not None:
            keys = self._keys(elem)
            if keys and any(k is not key for k in keys):
                self.group[elem] = FORWARDING  # a second action: it forwards
                if self.factored and self._proj_ok:
                    self._regroup(elem)
                else:
                    self._unproject()
            elif not self.factored:
                self._recheck = True  # a filter gets headers of its own
        self._fresh()
        group = self.group_of(elem)
        parts = self.parts(region, among, group)
        if self.factored:
            self._g = group
            self._map = self.proj[self._g].assign(elem, region, key)
            if self.proj[FILTER].emptied:  # maybe no filter has headers of its own now
                self._recheck = True
            self.proj[FORWARDING].emptied = self.proj[FILTER].emptied = False
        return parts

    def end(self) -> None:
        self._map = None

    def forwarding(self, elem: int) -> None:
        """elem applies two actions (a bulk build says so before its moves)."""
        if elem not in self.group:
            self.group[elem] = FORWARDING
            self._unproject()

    def stale(self) -> None:
        """The classes changed outside begin()/end() (a bulk build): relabel on first use.
        (The direct label follows every split, move and merge while it is in use.)"""
        self._unproject()

    def _unproject(self) -> None:
        """The projections no longer follow the classes: derive the regions that were left
        to them first."""
        if self.factored and self._proj_ok:
            known = self._known
            for c in self.owners:
                if c not in known:
                    self._derive(c)
            self._index_classes()
        self._proj_ok = False
        self._recheck = True

    def _regroup(self, elem: int) -> None:
        """elem, a filter until now, forwards: take its owners out of the filter
        projections and into the forwarding ones, from the projections alone.

        A forwarding projection F splits by elem's action k: F ∧ (the filter projections
        that give k); the filter projections that differ only at elem merge. The classes
        keep their regions and owners, and take the new pair.
        """
        space = self.space
        fwd, flt = self.proj
        act = {a: owners.get(elem) for a, owners in flt.owners.items()}  # elem's, by projection
        give: dict = defaultdict(list)  # elem's action -> the filter projections with it
        without: dict = defaultdict(list)  # filter owners but elem's -> those projections
        for a, owners in flt.owners.items():
            give[act[a]].append(a)
            rest = {e: k for e, k in owners.items() if e != elem}
            without[frozenset(rest.items())].append(a)
        new_fwd, new_flt = Projection(space), Projection(space)
        to_flt = {}
        for key, pids in without.items():
            na = new_flt.add(dict(key), space.union([flt.region[a] for a in pids]))
            for a in pids:
                to_flt[a] = na
        taking = {k: space.union([flt.region[a] for a in pids]) for k, pids in give.items()}
        to_fwd = {}
        for f, owners in fwd.owners.items():
            for k in {act[a] for a in self._with[FORWARDING][f]}:
                o = dict(owners)
                if k is not None:
                    o[elem] = k
                to_fwd[(f, k)] = new_fwd.add(o, fwd.region[f] & taking[k])
        pids = {c: [to_fwd[(f, act[a])], to_flt[a]] for c, (f, a) in self.pids.items()}
        self.proj = (new_fwd, new_flt)
        self.pids, self._pair, self._with = {}, {}, ({}, {})
        for c, p in pids.items():
            self._set_pids(c, p)
        self._recheck = True  # maybe no filter has headers of its own now

    def _lazy(self) -> bool:
        """Can a region changed now be left to the projections? Within a move's
        begin()/end() on two labels, or between moves while they are kept."""
        return self.factored and self._proj_ok

    def _derive(self, class_id: int):
        """A class's region: the intersection of its two projections."""
        if class_id not in self.owners:
            raise KeyError(class_id)
        pids = self.pids[class_id]
        if not self._lazy() or self._map is not None or len(self._pair[(pids[0], pids[1])]) > 1:
            # Within a move, or while two classes have the same owners, the projections
            # do not name the class's headers; parts() read every region a move needs.
            raise RuntimeError(f"class {class_id}'s region is not known here")
        u = self.proj[0].region[pids[0]] & self.proj[1].region[pids[1]]
        self._known[class_id] = u
        return u

    # --- lookups ----------------------------------------------------------------------------
    def classify(self, header) -> int:
        """The id of a concrete header's class (header: dict field -> int)."""
        self._fresh()
        if not self.factored:
            return self.direct.classify(header)
        classes = self._pair.get((self.proj[0].classify(header), self.proj[1].classify(header)))
        if classes is not None and len(classes) == 1:
            for c in classes:
                return c
        # Two classes with the same owners exist only within an update, until merged.
        for c in classes or ():
            if self.space.contains(self.bdd_of[c], header):
                return c
        raise LookupError(f"no class holds header {header}")

    def parts(self, pred, among=None, group: int = FORWARDING) -> list[tuple[int, object, bool]]:
        """(class, its headers in pred, whether that is all of it) for every class that
        meets pred (with one label, among these classes when the caller knows that no
        other can; with two, the projections find them without a label lookup).

        With two labels the headers are not computed (None): a move needs only to know
        whether it takes a whole class, and the regions it changes are left to the
        projections (Regions). A class is a projection X of `group` (the group of the
        element that changes: its regions follow X's boundaries) cut by projections of the
        other group: where X lies inside pred, so do its classes; otherwise each other
        projection Y of X's classes is tested against X's headers in pred and against the
        rest (disjoint or not: no BDD of the class's own region X ∧ Y is built).
        """
        self._fresh()
        false, out = self.space.false, []
        if not self.factored:
            known = self._known
            for c in self.direct.candidates(pred) if among is None else among:
                u = known[c]
                p = u & pred
                if p != false:
                    out.append((c, p, p == u))
            return out
        mine, theirs = self.proj[group], self.proj[1 - group]
        region, with_, pair = mine.region, self._with[group], self._pair
        within, leq = self.space.within, self.space.leq_args
        # The tests of X's classes, in C (cpc/_leqc.c: a test costs no Python call), or in
        # Python where dd has no native Cudd_bddLeq.
        if leq is not None:
            meeting = partial(_classes_meeting, leq)
        else:
            meeting = partial(_classes_meeting_py, self.space.disjoint)
        fwd, ry_of = group == FORWARDING, theirs.region
        for x in mine.candidates(pred):
            rx = region[x]
            others = with_[x]
            whole = within(rx, pred)
            if whole or len(others) == 1:
                # Inside pred, or X is one class: all of it, or a part of it.
                meeting(x, fwd, others, pair, out, whole, None, None, None)
            else:
                # Which of X's classes meet pred, and which lie inside it: two tests per
                # class with the other group's projections, which build no BDD (cpc.leq).
                # (The other label could say it in two lookups for all of X's classes, but
                # a lookup costs with that label's size: milliseconds on networks with
                # hundreds of filter projections.)
                meeting(x, fwd, others, pair, out, None, rx & pred, rx & ~pred, ry_of)
        return out

    def candidates(self, pred, group: int = FORWARDING) -> list[int]:
        """Ids of the classes that intersect the header set pred; with two labels, found
        from `group`'s projections (pred's structure is that group's: a filter's region
        meets few filter projections and cuts across the forwarding ones)."""
        return [c for c, _, _ in self.parts(pred, group=group)]

    def group_of(self, elem: int) -> int:
        """FORWARDING or FILTER: the group element elem is in."""
        return self.group.get(elem, FILTER)

    # --- structure ------------------------------------------------------------------------
    def split(self, class_id: int, part) -> int:
        """Carve `part` (a strict, non-empty subset of class `class_id`) into a new class with class_id's owners."""
        new = self.direct._new_id()
        known = self._known
        if self._map is not None:  # within a move on two labels: left to the projections
            known.pop(class_id, None)
        else:
            known[new] = part
            known[class_id] = self.bdd_of[class_id] & ~part
        self._relabel(part, new)
        owners = dict(self.owners[class_id])
        self.owners[new] = owners
        if not self._lazy():
            _index_owners(self._members, self._sig, self._by_sig, new, owners, self._sig[class_id])
        if self.factored:
            self._set_pids(new, list(self.pids[class_id]))
        self.moved.add(new)
        self.reshaped.add(class_id)
        self.origin[new] = self.origin.get(class_id, class_id)
        if class_id in self.changed_at:
            self.changed_at[new] = set(self.changed_at[class_id])
        return new

    def move(self, class_id: int, part, elem: int, key, whole: bool) -> None:
        """Headers `part` (a non-empty subset of class `class_id`) now get action key at elem.

        They join the class that already has exactly the resulting owners, when there is
        one (and that class's walks stay valid); otherwise they become a new class split
        off class_id, or class_id itself when part is all of it. The caller relabels the
        headers' projections once for all the classes (assign).
        """
        owners = self.owners[class_id]
        old = owners.get(elem)
        if old is key:
            return
        target = self._with_owners(owners, elem, old, key, class_id)
        if target is None:
            self.set_owner(class_id if whole else self.split(class_id, part), elem, key)
            return
        if self.track_owners:
            self.owner_changes[elem].update((old, key))
        if whole:
            self._merge(keep=target, drop=class_id)
            return
        known = self._known
        if self._map is not None:
            known.pop(class_id, None)
            known.pop(target, None)
        else:
            known[class_id] = self.bdd_of[class_id] & ~part
            known[target] = self.bdd_of[target] | part
        self._relabel(part, target)
        self.reshaped.update((class_id, target))
        self.transfers.append((class_id, target))

    def _with_owners(self, owners: dict, elem: int, old, key, skip: int) -> int | None:
        """The class (other than skip) whose owners are `owners` (skip's) with elem's action
        old set to key."""
        if self._map is not None:
            # Within a move on two labels the projections name it: a class's owners are its
            # two projections' (one of a kind per group), but at elem for a class not yet
            # moved whose projection took the new action in place. So no owner dict (about a
            # hundred elements with ACLs) is copied and compared.
            pids, g = self.pids[skip], self._g
            new = self._map.get(pids[g], pids[g])
            pair = (new, pids[1]) if g == FORWARDING else (pids[0], new)
            for other in self._pair.get(pair, ()):
                if other != skip and self.owners[other].get(elem) == key:
                    return other
            return None
        sig = _resig(self._sig[skip], elem, old, key)
        bucket = self._by_sig.get(sig)
        if not bucket:
            return None
        want = _with_action(owners, elem, key)
        for other in bucket:
            if other != skip and self.owners[other] == want:
                return other
        return None

    def set_owner(self, class_id: int, elem: int, key) -> None:
        """Record that element elem applies action key to class `class_id` (None: table-miss)."""
        owners = self.owners[class_id]
        old = owners.get(elem)
        if old is key:
            return
        if self.track_owners:
            self.owner_changes[elem].update((old, key))
        indexed = not self._lazy()  # else the projections' members changed in begin()
        if indexed:
            sig = self._sig[class_id]
            _unindex_sig(self._by_sig, class_id, sig)
            keys = self._members[elem]
            emptied = old is not None and _member_discard(keys, old, class_id)
            if emptied and self.factored and elem not in self.group:
                self._recheck = True  # maybe no filter has headers of its own now
            if key is not None:
                _member_add(keys, key, class_id)
        if key is None:
            del owners[elem]
        else:
            owners[elem] = key
        if self._map is not None:
            pids = self.pids[class_id]
            g = self._g
            new = self._map[pids[g]]
            if new != pids[g]:
                pids = list(pids)
                pids[g] = new
                self._set_pids(class_id, pids)
        elif self.factored or (key is not None and elem not in self.group):
            self.stale()  # outside begin()/end(): a bulk build (indexes the classes anew)
        if indexed:
            sig = self._sig[class_id] = _resig(sig, elem, old, key)
            self._by_sig[sig].add(class_id)
        self.moved.add(class_id)
        self.changed_at[class_id].add(elem)

    def merge_alike(self, class_ids) -> None:
        """Merge each of class_ids into another class with exactly the same owners, if there is one."""
        lazy = self._lazy()
        for class_id in list(class_ids):
            if class_id not in self.owners:
                continue
            if lazy:  # the same owners: the same pair of projections
                pids = self.pids[class_id]
                alike = self._pair[(pids[0], pids[1])]
            else:
                owners = self.owners[class_id]
                alike = [c for c in self._by_sig[self._sig[class_id]] if self.owners[c] == owners]
            for other in alike:
                if other != class_id:
                    self._merge(keep=min(class_id, other), drop=max(class_id, other))
                    break

    def _merge(self, keep: int, drop: int) -> None:
        known, lazy = self._known, self._lazy()
        if lazy:
            known.pop(drop, None)
            known.pop(keep, None)
        else:
            part = known.pop(drop)
            known[keep] = known[keep] | part
            self._relabel(part, keep)
        owners = self.owners.pop(drop)
        if not lazy:
            _unindex_owners(self._members, self._sig, self._by_sig, drop, owners)
        if self.factored:
            self._unset_pids(drop)
        self.direct._drop_id(drop)
        self.gone.add(drop)
        self.merged_into[drop] = keep  # a chain when keep is merged later: see survivor()
        self.changed_at[keep] |= self.changed_at.pop(drop, set())
        # origin[drop] stays: the model compares the dropped headers with where they came from.
        self.moved.discard(drop)
        self.reshaped.add(keep)

    def survivor(self, class_id: int) -> int | None:
        """The class that a class merged away in this update ended up in (None: not merged)."""
        keep = self.merged_into.get(class_id)
        while keep is not None and keep in self.merged_into:
            keep = self.merged_into[keep]
        return keep

    def drain(self) -> tuple[set[int], set[int], set[int]]:
        """The classes moved, reshaped and gone since the last drain (see also changed_at, origin)."""
        out = (self.moved - self.gone, self.reshaped - self.gone, self.gone)
        self.moved, self.reshaped, self.gone = set(), set(), set()
        self.direct.release_ids()
        return out

    def forget_changes(self) -> None:
        self.changed_at.clear()
        self.origin.clear()
        self.merged_into.clear()
        self.owner_changes.clear()
        self.transfers.clear()
        if self.factored:
            for p in self.proj:
                p.release_ids()
