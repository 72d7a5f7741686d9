"""Equivalence classes of headers (atomic predicates), maintained incrementally.

A class is a set of headers that every table of the network treats alike: at
each element (one switch table, or the in_port-specific part of one) all its
headers get the same action (the matched entry's instructions; which entry it was
is kept per element, cpc.tables.Identities). Updates split and move only the
classes whose action changes at an element, in the style of APKeep, and merge
classes that become alike again.

The classes are labelled inside one BDD, `label`, whose header variables are
followed by CLASS_ID_BITS label variables: for every header h, label(h, id) is
true for exactly the id of h's class. Two operations fall out of it:
  * classify(h): a single walk from the root, guided by h's bits, that stops at
    the first label variable (typically after the destination prefix length);
  * candidates(p): the classes that intersect a predicate p, by quantifying the
    header variables out of `label & p` in one CUDD pass that never builds the
    conjunction, at a cost that grows with the header space p touches, not with
    the number of classes.
"""

from __future__ import annotations

from collections import defaultdict

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


class Partition(Labels):
    """The network's header classes: regions that every element treats alike."""

    def __init__(self, space: HeaderSpace) -> None:
        super().__init__(space)
        self.bdd_of: dict[int, object] = {}
        self.owners: dict[int, dict[int, object]] = {}  # class -> {element index: action}
        self.members: dict[int, dict[object, set[int]]] = defaultdict(lambda: defaultdict(set))
        self._sig: dict[int, int] = {}
        self._by_sig: dict[int, set[int]] = defaultdict(set)
        first = self._new_id()
        self.bdd_of[first] = space.true
        self.owners[first] = {}
        self._sig[first] = 0
        self._by_sig[0].add(first)
        self.label = self._cube_of(first)
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
        return len(self.bdd_of)

    # --- structure ------------------------------------------------------------------------
    def split(self, class_id: int, part) -> int:
        """Carve `part` (a strict, non-empty subset of class `class_id`) into a new class with class_id's owners."""
        new = self._new_id()
        self.bdd_of[new] = part
        self.bdd_of[class_id] = self.bdd_of[class_id] & ~part
        self._relabel(part, new)
        owners = dict(self.owners[class_id])
        self.owners[new] = owners
        for elem, key in owners.items():
            self.members[elem][key].add(new)
        sig = self._sig[class_id]
        self._sig[new] = sig
        self._by_sig[sig].add(new)
        self.moved.add(new)
        self.reshaped.add(class_id)
        self.origin[new] = self.origin.get(class_id, class_id)
        if class_id in self.changed_at:
            self.changed_at[new] = set(self.changed_at[class_id])
        return new

    def move(self, class_id: int, part, elem: int, key) -> None:
        """Headers `part` (a non-empty subset of class `class_id`) now get action key at elem.

        They join the class that already has exactly the resulting owners, when there is
        one (one relabel, and that class's walks stay valid); otherwise they become a new
        class split off class_id, or class_id itself when part is all of it.
        """
        owners = self.owners[class_id]
        old = owners.get(elem)
        if old is key:
            return
        sig = self._sig[class_id]
        if old is not None:
            sig -= hash((elem, old))
        if key is not None:
            sig += hash((elem, key))
        target = self._with_owners(sig & _MASK64, owners, elem, key, class_id)
        whole = part == self.bdd_of[class_id]
        if target is None:
            self.set_owner(class_id if whole else self.split(class_id, part), elem, key)
            return
        if self.track_owners:
            self.owner_changes[elem].update((old, key))
        if whole:
            self._merge(keep=target, drop=class_id)
            return
        self.bdd_of[class_id] = self.bdd_of[class_id] & ~part
        self.bdd_of[target] = self.bdd_of[target] | part
        self._relabel(part, target)
        self.reshaped.update((class_id, target))
        self.transfers.append((class_id, target))

    def _with_owners(self, sig: int, owners: dict, elem: int, key, skip: int) -> int | None:
        """The class (other than skip) whose owners are `owners` with elem set to key."""
        bucket = self._by_sig.get(sig)
        if not bucket:
            return None
        want = dict(owners)
        if key is None:
            del want[elem]
        else:
            want[elem] = key
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
        sig = self._sig[class_id]
        self._unindex_sig(class_id, sig)
        if self.track_owners:
            self.owner_changes[elem].update((old, key))
        if old is not None:
            sig -= hash((elem, old))
            bucket = self.members[elem][old]
            bucket.discard(class_id)
            if not bucket:
                del self.members[elem][old]
        if key is None:
            del owners[elem]
        else:
            owners[elem] = key
            sig += hash((elem, key))
            self.members[elem][key].add(class_id)
        sig &= _MASK64
        self._sig[class_id] = sig
        self._by_sig[sig].add(class_id)
        self.moved.add(class_id)
        self.changed_at[class_id].add(elem)

    def _unindex_sig(self, class_id: int, sig: int) -> None:
        bucket = self._by_sig.get(sig)
        if bucket is not None:
            bucket.discard(class_id)
            if not bucket:
                del self._by_sig[sig]

    def merge_alike(self, class_ids) -> None:
        """Merge each of class_ids into another class with exactly the same owners, if there is one."""
        for class_id in list(class_ids):
            if class_id not in self.owners:
                continue
            sig = self._sig[class_id]
            owners = self.owners[class_id]
            for other in self._by_sig.get(sig, ()):
                if other != class_id and self.owners[other] == owners:
                    self._merge(keep=min(class_id, other), drop=max(class_id, other))
                    break

    def _merge(self, keep: int, drop: int) -> None:
        part = self.bdd_of.pop(drop)
        self.bdd_of[keep] = self.bdd_of[keep] | part
        self._relabel(part, keep)
        for elem, key in self.owners.pop(drop).items():
            bucket = self.members[elem][key]
            bucket.discard(drop)
        self._unindex_sig(drop, self._sig.pop(drop))
        self._drop_id(drop)
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
        self._free.extend(self._pending_free)
        self._pending_free.clear()
        return out

    def forget_changes(self) -> None:
        self.changed_at.clear()
        self.origin.clear()
        self.merged_into.clear()
        self.owner_changes.clear()
        self.transfers.clear()
