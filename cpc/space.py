"""The header space as BDDs (dd.cudd, dynamic reordering off).

Header bits come first, in the order documented in `cpc.fields`. Below them sit
CLASS_ID_BITS variables that the partition uses to label equivalence classes
(see `cpc.partition`): keeping them at the bottom makes classifying a concrete
header a single walk from the root that stops at the first label variable.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

import dd.cudd as cudd

from .fields import FIELD_NAMES, FIELDS, HEADER_BITS, WIDTH
from .leq import Leq

CLASS_ID_BITS = 22  # up to 4M classes alive at once
_HEADER = frozenset({"<header variables>"})  # stands for the header cube in _BDD.cube


class _BDD(cudd.BDD):
    """dd's CUDD manager, able to hand dd.cudd.and_exists the prebuilt header cube.

    and_exists (CUDD's bddAndAbstract: ∃ vars. u ∧ v in one pass, without building the
    conjunction) asks the manager for the cube of its variable names on every call,
    which costs more than the operation itself for the 235 header variables.
    """

    header_cube = None

    def cube(self, dvars):
        if dvars == _HEADER:
            return self.header_cube
        return super().cube(dvars)


class HeaderSpace:
    """A BDD manager with the model's variables and fast match encoding."""

    def __init__(self) -> None:
        self.bdd = _BDD()
        # Reordering off: with it on, building 100k prefix BDDs takes ~50x longer.
        self.bdd.configure(reordering=False)
        names: list[str] = []
        self.level_field: list[str] = []  # level -> field name
        self.level_shift: list[int] = []  # level -> bit shift within the field value
        for field, width in FIELDS:
            for i in range(width):
                names.append(f"{field}_{i}")
                self.level_field.append(field)
                self.level_shift.append(width - 1 - i)
        self.id_names = [f"cls_{i}" for i in range(CLASS_ID_BITS)]
        self.bdd.declare(*names, *self.id_names)
        self.header_names = names
        # Built once for exists_and: dd would build it from the names on every call.
        self.bdd.header_cube = self.bdd.cube({n: True for n in names})
        self.true = self.bdd.true
        self.false = self.bdd.false
        # within(u, v): u ⊆ v; disjoint(u, v): u ∩ v = ∅, neither building a BDD (cpc.leq)
        leq = Leq(self.bdd)
        self.within, self.disjoint = leq.within, leq.disjoint
        self.leq_args = leq.native_args  # for cpc._leqc; None: no native Cudd_bddLeq
        self._lit = [self.bdd.var(n) for n in names]
        self._first_level = {}
        level = 0
        for field, width in FIELDS:
            self._first_level[field] = level
            level += width
        self.id_level = HEADER_BITS
        self._id_lit = [self.bdd.var(n) for n in self.id_names]
        self._field_cache: dict[tuple[str, int, int], object] = {}
        self._byte_cache: dict[tuple[str, int, int, int], object] = {}
        self._match_cache: dict[tuple, object] = {}
        self._id_cubes: dict[int, object] = {}
        # BDDs that other packages derive from this space and keep with it, by name
        # (fuzzer.hspace: the valid headers). Not dropped by drop_caches.
        self.derived: dict[str, object] = {}

    def __del__(self) -> None:
        # The manager holds its header cube, and the cube its manager: a cycle, which the
        # cyclic GC may break by dropping the manager before the cube's node is released.
        # dd then skips Cudd_Quit ("nodes referenced upon shutdown") and every node of the
        # manager leaks. Breaking the cycle here frees the manager by reference counting.
        bdd = getattr(self, "bdd", None)
        if bdd is not None:
            bdd.header_cube = None

    def drop_caches(self) -> None:
        """Forget the encodings kept only to answer faster (fields, bytes, matches, id cubes)."""
        self._field_cache.clear()
        self._byte_cache.clear()
        self._match_cache.clear()
        self._id_cubes.clear()

    # --- encoding -------------------------------------------------------------------------
    def field_bdd(self, field: str, value: int, mask: int):
        """BDD of 'field & mask == value'. Cached: the same prefix recurs on many switches."""
        key = (field, value, mask)
        u = self._field_cache.get(key)
        if u is None:
            width = WIDTH[field]
            u = self.true
            # One AND per byte (cached byte cubes), lowest byte first so each AND puts the
            # next byte's nodes on top: BDD operations cost about 1 µs each through dd,
            # whatever their size, so 4 ANDs beat 32 for an address.
            for shift in range(0, width, 8):
                m = (mask >> shift) & 0xFF
                if m:
                    u = self._byte_cube(field, width, shift, (value >> shift) & m, m) & u
            self._field_cache[key] = u
        return u

    def _byte_cube(self, field: str, width: int, shift: int, value: int, mask: int):
        """BDD of the field's bits shift..shift+7 (counted from the least significant)."""
        key = (field, shift, value, mask)
        u = self._byte_cache.get(key)
        if u is None:
            base = self._first_level[field]
            u = self.true
            for b in range(min(8, width - shift)):  # lowest level (least significant) first
                if mask >> b & 1:
                    lit = self._lit[base + width - 1 - shift - b]
                    u = (lit & u) if value >> b & 1 else (~lit & u)
            self._byte_cache[key] = u
        return u

    def match_bdd(self, fields: tuple[tuple[str, int, int], ...]):
        """BDD of a ternary match given as ((field, value, mask), ...) in model field order."""
        u = self._match_cache.get(fields)
        if u is None:
            u = self.true
            for field, value, mask in reversed(fields):
                f = self.field_bdd(field, value, mask)
                u = f if u is self.true else f & u
            if len(self._match_cache) > 500_000:
                self._match_cache.clear()
            self._match_cache[fields] = u
        return u

    def header_bdd(self, header: Mapping[str, int]):
        """The single-header BDD (a full cube) of a concrete header."""
        return self.match_bdd(
            tuple((f, header.get(f, 0), (1 << WIDTH[f]) - 1) for f in FIELD_NAMES)
        )

    def id_cube(self, ident: int):
        u = self._id_cubes.get(ident)
        if u is not None:
            return u
        u = self.true
        for i in range(CLASS_ID_BITS - 1, -1, -1):
            lit = self._id_lit[i]
            u = (lit & u) if (ident >> (CLASS_ID_BITS - 1 - i)) & 1 else (~lit & u)
        self._id_cubes[ident] = u
        return u

    # --- queries --------------------------------------------------------------------------
    def contains(self, u, header: Mapping[str, int]) -> bool:
        """Is the concrete header in the header set u? One walk from the root."""
        node, comp = u, 0
        lf, ls = self.level_field, self.level_shift
        while True:
            level = node.level
            if level >= self.id_level:
                return (int(node) ^ comp) == int(self.true)
            comp ^= node.negated
            node = node.high if header.get(lf[level], 0) >> ls[level] & 1 else node.low

    def exists_and(self, u, v):
        """∃ header . u ∧ v: what of u's label variables v's headers meet."""
        return cudd.and_exists(u, v, _HEADER)

    def count(self, u) -> int:
        """Number of headers in u (over the header bits only)."""
        return int(self.bdd.count(u, nvars=HEADER_BITS))

    def is_empty(self, u) -> bool:
        return u == self.false

    def pick(self, u) -> dict[str, int] | None:
        """One header of u (unset bits 0, the low branch where both lead to a header),
        or None when u is empty. One descent from the root: in a reduced BDD every node
        but the false leaf has a path to true."""
        false_id = int(self.false)
        if int(u) == false_id:
            return None
        out = dict.fromkeys(FIELD_NAMES, 0)
        node, comp = u, 0
        level_field, level_shift, id_level = self.level_field, self.level_shift, self.id_level
        while node.level < id_level:
            comp2 = comp ^ node.negated
            low = node.low
            if (int(low) ^ comp2) != false_id:
                node, comp = low, comp2
            else:
                level = node.level
                out[level_field[level]] |= 1 << level_shift[level]
                node, comp = node.high, comp2
        return out

    def cubes(self, u, limit: int | None = None) -> Iterator[dict[str, tuple[int, int]]]:
        """Disjoint cubes of u as {field: (value, mask)} (fields without constraint left out)."""
        for n, cube in enumerate(self._cube_iter(u), 1):
            yield cube
            if limit is not None and n >= limit:
                return

    def _cube_iter(self, u):
        # Depth-first over the BDD paths to true; each path is one disjoint cube.
        stack = [(u, 0, {})]
        true_id, false_id = int(self.true), int(self.false)
        while stack:
            node, comp, lits = stack.pop()
            level = node.level
            if level >= self.id_level:
                if (int(node) ^ comp) == true_id:
                    yield self._lits_to_cube(lits)
                continue
            comp2 = comp ^ node.negated
            for bit, child in ((1, node.high), (0, node.low)):
                if (int(child) ^ comp2) == false_id:
                    continue
                lits2 = dict(lits)
                lits2[level] = bit
                stack.append((child, comp2, lits2))

    def _lits_to_cube(self, lits: dict[int, int]) -> dict[str, tuple[int, int]]:
        cube: dict[str, tuple[int, int]] = {}
        for level, bit in lits.items():
            field = self.level_field[level]
            shift = self.level_shift[level]
            value, mask = cube.get(field, (0, 0))
            cube[field] = (value | (bit << shift), mask | (1 << shift))
        return cube

    def one_dst(self, u) -> int | None:
        """The one ipv4_dst of every header in u (None: u is empty or holds several). The
        destination's bits are the top of the variable order, so this follows one path of
        at most 32 nodes."""
        node, comp, value = u, 0, 0
        false_id = int(self.false)
        for level in range(32):
            if node.level != level:  # the bit is free: two destinations (or u is empty)
                return None
            comp2 = comp ^ node.negated
            high_ok = (int(node.high) ^ comp2) != false_id
            low_ok = (int(node.low) ^ comp2) != false_id
            if high_ok == low_ok:  # both: several destinations; neither cannot happen
                return None
            node, comp = (node.high, comp2) if high_ok else (node.low, comp2)
            value = value << 1 | high_ok
        return value

    def union(self, items):
        """OR of many BDDs, pairwise: cheaper than growing one accumulator."""
        items = list(items)
        if not items:
            return self.false
        while len(items) > 1:
            items = [
                items[i] | items[i + 1] if i + 1 < len(items) else items[i]
                for i in range(0, len(items), 2)
            ]
        return items[0]

    def exist_fields(self, u, fields):
        """∃ fields . u  (used for set_field images)."""
        names = [f"{f}_{i}" for f in fields for i in range(WIDTH[f])]
        return self.bdd.exist(names, u)
