"""Equivalence classes of headers (atomic predicates), maintained incrementally.

A class is a set of headers that every table of the network treats alike: at
each element (one switch table, or the in_port-specific part of one) all its
headers are owned by the same behaviour (the entry's Verify identity and
instructions). Updates split and move only the classes that a rule's match
touches, in the style of APKeep, and merge classes that become alike again.

The classes are labelled inside one BDD, `label`, whose header variables are
followed by CLASS_ID_BITS label variables: for every header h, label(h, id) is
true for exactly the id of h's class. Two operations fall out of it:
  * classify(h): a single walk from the root, guided by h's bits, that stops at
    the first label variable (typically after the destination prefix length);
  * candidates(p): the classes that intersect a predicate p, from the label
    nodes reachable in `label & p` - its cost grows with the header space that
    p touches, not with the number of classes.
"""

from __future__ import annotations

from collections import defaultdict

from .space import CLASS_ID_BITS, HeaderSpace

_MASK64 = (1 << 64) - 1


class Partition:
    def __init__(self, space: HeaderSpace) -> None:
        self.space = space
        self.bdd_of: dict[int, object] = {}
        self.owners: dict[int, dict[int, object]] = {}  # class -> {element index: behaviour}
        self.members: dict[int, dict[object, set[int]]] = defaultdict(lambda: defaultdict(set))
        self._sig: dict[int, int] = {}
        self._by_sig: dict[int, set[int]] = defaultdict(set)
        self._free: list[int] = []
        self._pending_free: list[int] = []  # ids of classes gone in this update, reused after it
        self._next = 0
        self._cube: dict[int, object] = {}
        self._id_of_node: dict[int, int] = {}
        first = self._new_id()
        self.bdd_of[first] = space.true
        self.owners[first] = {}
        self._sig[first] = 0
        self._by_sig[0].add(first)
        self.label = self._cube[first]
        # Bookkeeping of one update, drained by the model: classes whose owners changed or
        # that were created, classes whose extent changed, and classes that disappeared.
        self.moved: set[int] = set()
        self.reshaped: set[int] = set()
        self.gone: set[int] = set()

    def __len__(self) -> int:
        return len(self.bdd_of)

    # --- labels ---------------------------------------------------------------------------
    def _new_id(self) -> int:
        if self._free:
            ident = self._free.pop()
        else:
            ident = self._next
            self._next += 1
            if ident >= 1 << CLASS_ID_BITS:
                raise OverflowError("too many header classes for the label width")
        cube = self.space.id_cube(ident)
        self._cube[ident] = cube
        self._id_of_node[int(cube)] = ident
        return ident

    def _drop_id(self, ident: int) -> None:
        cube = self._cube.pop(ident)
        del self._id_of_node[int(cube)]
        self._pending_free.append(ident)

    def classify(self, header) -> int:
        """The class of a concrete header (dict field -> int)."""
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
        """Classes that intersect the header set pred."""
        u = self.label & pred
        id_level = self.space.id_level
        ids = self._id_of_node
        out: list[int] = []
        seen: set[int] = set()
        stack = [(u, 0)]
        while stack:
            node, comp = stack.pop()
            k = int(node) ^ comp
            if k in seen:
                continue
            seen.add(k)
            if node.level >= id_level:
                ident = ids.get(k)
                if ident is not None:
                    out.append(ident)
                continue
            comp ^= node.negated
            stack.append((node.low, comp))
            stack.append((node.high, comp))
        return out

    # --- structure ------------------------------------------------------------------------
    def split(self, ap: int, part) -> int:
        """Carve `part` (a strict, non-empty subset of class ap) into a new class with ap's owners."""
        new = self._new_id()
        self.bdd_of[new] = part
        self.bdd_of[ap] = self.bdd_of[ap] & ~part
        self.label = (self.label & ~part) | (part & self._cube[new])
        owners = dict(self.owners[ap])
        self.owners[new] = owners
        for elem, key in owners.items():
            self.members[elem][key].add(new)
        sig = self._sig[ap]
        self._sig[new] = sig
        self._by_sig[sig].add(new)
        self.moved.add(new)
        self.reshaped.add(ap)
        return new

    def set_owner(self, ap: int, elem: int, key) -> None:
        """Record that element elem hands class ap to behaviour key (None: table-miss)."""
        owners = self.owners[ap]
        old = owners.get(elem)
        if old is key:
            return
        sig = self._sig[ap]
        self._by_sig[sig].discard(ap)
        if old is not None:
            sig -= hash((elem, old))
            bucket = self.members[elem][old]
            bucket.discard(ap)
            if not bucket:
                del self.members[elem][old]
        if key is None:
            del owners[elem]
        else:
            owners[elem] = key
            sig += hash((elem, key))
            self.members[elem][key].add(ap)
        sig &= _MASK64
        self._sig[ap] = sig
        self._by_sig[sig].add(ap)
        self.moved.add(ap)

    def merge_alike(self, aps) -> None:
        """Merge each of aps into another class with exactly the same owners, if there is one."""
        for ap in list(aps):
            if ap not in self.owners:
                continue
            sig = self._sig[ap]
            owners = self.owners[ap]
            for other in self._by_sig[sig]:
                if other != ap and self.owners[other] == owners:
                    self._merge(keep=min(ap, other), drop=max(ap, other))
                    break

    def _merge(self, keep: int, drop: int) -> None:
        part = self.bdd_of.pop(drop)
        self.bdd_of[keep] = self.bdd_of[keep] | part
        self.label = (self.label & ~part) | (part & self._cube[keep])
        for elem, key in self.owners.pop(drop).items():
            bucket = self.members[elem][key]
            bucket.discard(drop)
        self._by_sig[self._sig.pop(drop)].discard(drop)
        self._drop_id(drop)
        self.gone.add(drop)
        self.moved.discard(drop)
        self.reshaped.add(keep)

    def drain(self) -> tuple[set[int], set[int], set[int]]:
        out = (self.moved - self.gone, self.reshaped - self.gone, self.gone)
        self.moved, self.reshaped, self.gone = set(), set(), set()
        self._free.extend(self._pending_free)
        self._pending_free.clear()
        return out
