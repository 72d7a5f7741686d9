"""The edges of the covered region, field by field, and probes just outside them.

A contiguous block of covered prefixes has few edges as a region, where its cubes have
many (docs/fuzzer.md, "Region edges"); `field_intervals` merges a field's covered values
into maximal intervals and `RegionEdges` draws probes outside their edges at every
distance scale.
"""

from __future__ import annotations

import random

from cpc.fields import FIELD_NAMES, WIDTH
from cpc.space import HeaderSpace

from .hspace import CountCache, Sampler, canonicalize

__all__ = ["BlockEdges", "MaskEdges", "RegionEdges", "field_intervals"]

_FULL = {f: (1 << w) - 1 for f, w in WIDTH.items()}


def field_intervals(space: HeaderSpace, u, field_name: str, limit: int = 4096):
    """The values of one field that some header of u has, as sorted, disjoint, maximal
    intervals [(lo, hi)]; None when there are more than `limit` of them."""
    others = [f for f in FIELD_NAMES if f != field_name]
    names = [f"{f}_{i}" for f in others for i in range(WIDTH[f])] + list(space.id_names)
    d = space.bdd.exist(names, u)
    w = WIDTH[field_name]
    full = _FULL[field_name]
    blocks = []
    for cube in space.cubes(d):
        v, m = cube.get(field_name, (0, 0))
        t = (m & -m).bit_length() - 1 if m else w  # free low bits: a block of 2^t values
        free = ~m & full & ~((1 << t) - 1)  # free bits above the block: one block each
        bits = [1 << b for b in range(w) if free >> b & 1]
        if len(blocks) + (1 << len(bits)) > limit:
            return None
        for k in range(1 << len(bits)):
            start = (v & m) | sum(b for j, b in enumerate(bits) if k >> j & 1)
            blocks.append((start, start + (1 << t) - 1))
    blocks.sort()
    out: list[list[int]] = []
    for lo, hi in blocks:
        if out and lo <= out[-1][1] + 1:
            out[-1][1] = max(out[-1][1], hi)
        else:
            out.append([lo, hi])
    return [(lo, hi) for lo, hi in out]


class RegionEdges:
    """Probes just outside the covered REGION, field by field: the covered headers'
    values of a field, merged into maximal intervals, have few edges where the covered
    cubes have many (a block of 5,000 adjacent /24 routes is one interval of ipv4_dst).
    Outside each edge, at every distance scale: stratum j is the values 2^j - 1 to
    2^(j+1) - 2 away from the edge (j = 0: the value next to it), as far as the gap
    reaches, so a hidden entry of any size next to the region is hit by its share of
    the strata. The edges are grouped by field and by the size of the gap they face (a
    power of two); every group gets the same share, so the few edges of a region's
    outside are not drowned by the many small holes inside it. The other fields of a
    probe come from a uniform covered header: the probe is what production traffic
    sends, but for the one field moved out of the region."""

    def __init__(self, space: HeaderSpace, covered, cache: CountCache, rng: random.Random):
        self.space, self.covered, self.cache, self.rng = space, covered, cache, rng
        self._todo = list(FIELD_NAMES)
        self._by_key: dict[tuple[str, int], list[tuple[int, int, int]]] = {}
        self.keys: list[tuple[str, int]] = []
        self.groups: list[list[tuple[int, int, int]]] = []
        self._context: Sampler | None = None

    def grow(self) -> bool:
        """Find the edges of the next field (one per call, so that no probe waits for all
        nine); False once every field is done."""
        if not self._todo:
            return False
        f = self._todo.pop(0)
        iv = field_intervals(self.space, self.covered, f)
        gaps, prev = [], -1
        for lo, hi in iv or ():
            if lo > prev + 1:
                gaps.append((prev + 1, lo - 1))
            prev = hi
        if iv and prev < _FULL[f]:
            gaps.append((prev + 1, _FULL[f]))
        for a, b in gaps:
            g = b - a + 1
            c = g.bit_length() - 1  # the strata 0..c fit in the gap
            if a > 0:  # an interval below: walk up from it
                self._by_key.setdefault((f, c), []).append((a, 1, g))
            if b < _FULL[f]:  # an interval above: walk down from it
                self._by_key.setdefault((f, c), []).append((b, -1, g))
        self.keys = sorted(self._by_key)
        self.groups = [self._by_key[k] for k in self.keys]
        if self.groups and self._context is None:
            self._context = Sampler(self.space, cache=self.cache, u=self.covered)
        return True

    def __len__(self) -> int:
        return sum(len(g) for g in self.groups)

    @property
    def empty(self) -> bool:
        """Every field is done and none has an edge: the region group has nothing."""
        return not self._todo and not self.groups

    def value(self, group: int) -> int:
        """A value of the group's field outside the region: a random edge of the group, a
        random stratum, a random distance in it."""
        rng = self.rng
        _, c = self.keys[group]
        start, step, g = rng.choice(self.groups[group])
        j = rng.randint(0, c)
        lo, hi = (1 << j) - 1, min((1 << (j + 1)) - 1, g)
        return start + step * rng.randrange(lo, hi)

    def draw(self, tries: int = 4) -> dict | None:
        """A probe just outside the region; None when none was found this turn (or no
        field with an edge is done yet)."""
        self.grow()
        if self._context is None:
            return None
        for _ in range(tries):
            k = self.rng.randrange(len(self.groups))
            h = self._context.uniform(self.rng)
            h[self.keys[k][0]] = self.value(k)
            h = canonicalize(h)
            if not self.space.contains(self.covered, h):
                return h
        return None


class BlockEdges:
    """The exact edges of the blocks of one uncovered cell, field by field (ipv4_dst):
    the cell's values of the field merged into maximal intervals of up to a /16 (an ACL's
    dropped /24 is one), and probes at the first and last value of each (the addresses just outside the
    covered prefixes around it, inside the block), then inward at every distance scale:
    stratum j holds the values 2^(j-1) to 2^j - 1 from the edge (j >= 1), as far as the
    block reaches. Even draws are exact edges, block by block and side by side, so the
    exact edge of each side of each of B blocks is probed once in every 4B draws; odd
    draws take the strata in turn, j = 1, 2, ..., a random value in it, for the blocks in
    turn. A hidden entry that holds a block's edge (a /28 at the end of an ACL's /24) is
    hit by its exact-edge probe. The other fields come from a header of the cell."""

    MAX_BLOCKS = 64  # a cell with more intervals is no block (the table-miss remainder)
    # Blocks up to a /16: a wider one is the space far from every route (a wide hidden
    # route there is the walk's and the random group's), and its edges are the region
    # group's (RegionEdges).
    MAX_SIZE = 1 << 16

    def __init__(
        self,
        space: HeaderSpace,
        cell,
        cache: CountCache,
        rng: random.Random,
        field_name: str = "ipv4_dst",
    ) -> None:
        self.space, self.cell, self.cache, self.rng = space, cell, cache, rng
        self.field = field_name
        # the intervals depend on the cell alone: plans over the same cell share them
        iv = cache.derive(
            ("intervals", int(cell), field_name, self.MAX_BLOCKS),
            (cell,),
            lambda: field_intervals(space, cell, field_name, limit=self.MAX_BLOCKS),
        )
        full = _FULL[field_name]
        # one interval over the whole field: no edge (the cell is not bounded in it)
        if iv is None or iv == [(0, full)]:
            iv = []
        self.blocks = [(lo, hi) for lo, hi in iv if hi - lo < self.MAX_SIZE]
        self.turn = 0
        self._edge_smp: dict[int, Sampler] = {}
        self._inner = Sampler(space, cell, cache=cache) if self.blocks else None

    def __len__(self) -> int:
        return len(self.blocks)

    def value(self, k: int) -> int:
        """The field's value of draw k."""
        n = len(self.blocks)
        if k % 2 == 0:  # exact edges
            e = (k // 2) % (2 * n)
            lo, hi = self.blocks[e // 2]
            return lo if e % 2 == 0 else hi
        m = k // 2
        lo, hi = self.blocks[(m // 2) % n]
        size = hi - lo + 1
        strata = max(size.bit_length() - 1, 0)  # j = 1..strata fit in the block
        if strata == 0:
            return lo if m % 2 == 0 else hi
        j = 1 + (m // (2 * n)) % strata
        off = self.rng.randrange(1 << (j - 1), min(1 << j, size))
        return lo + off if m % 2 == 0 else hi - off

    def draw(self) -> dict | None:
        """The next probe (None: the cell is no block)."""
        if not self.blocks:
            return None
        v = self.value(self.turn)
        self.turn += 1
        f = self.field
        # a header of the cell with this value: from the cell's own headers when the cell
        # is a product (an ACL's match), else by the cell and the value together
        for _ in range(2):
            h = self._inner.uniform(self.rng)
            h[f] = v
            h = canonicalize(h)
            if self.space.contains(self._inner.u, h):
                return h
        smp = self._edge_smp.get(v)
        if smp is None:
            u = self._inner.u & self.space.field_bdd(f, v, _FULL[f])
            smp = Sampler(self.space, u, cache=self.cache)
            if len(self._edge_smp) < 256:
                self._edge_smp[v] = smp
        return smp.uniform(self.rng)


# Fields whose matches are prefixes, where a mask typed wrong (a fat finger) moves the
# block's edges.
_PREFIX_FIELDS = ("ipv4_dst", "ipv4_src")
# A mask typed wide by up to this many bits is caught by the blocks next to the prefix.
MASK_SLIP = 4


class MaskEdges:
    """Probes where a prefix installed with a wrong mask forwards otherwise: for each
    distinct match and each prefix field in it (ipv4_dst, ipv4_src) of length n, with the
    match's other fields, the *targets* of level j = 1 .. MASK_SLIP:
    - inside the block, the upper sibling of the /n+j under its value: a mask typed j
      bits narrower keeps the value's /n+j and leaves these of levels 1 to j to others;
    - beside it, the sibling of the /n-j+1 around it: a mask typed j bits wider takes
      these of levels 1 to j.
    Level 1 alone meets every slip; a deeper level catches one where other entries hold
    the shallower targets, so level j gets half the turns of level j-1. A target is drawn
    uniformly inside `region` (the plan's valid headers V: a slip shows in covered space,
    where the typed entry takes headers from another, and in uncovered space, where it
    delivers what was dropped), so that where other entries hold part of it, later visits
    land in other parts. Per level, the first pass goes
    through the matches from a random start (ingresses do not probe the same targets
    together) and tests each target against the region, at most `tries` a draw; later
    passes cycle over those that met it. Nothing is listed up front: a plan over the
    100k-entry fat-tree's matches costs no more to build."""

    def __init__(
        self, space: HeaderSpace, matches, region, cache: CountCache, rng: random.Random
    ) -> None:
        self.space, self.region, self.cache, self.rng = space, region, cache, rng
        self.matches = matches
        self.keys: list | None = None  # the matches, listed at the first draw
        self.start = 0  # where the first pass starts in keys (random, at the first draw)
        self.levels = {j: _Level(j) for j in range(1, MASK_SLIP + 1)}
        self.cell = None  # the last drawn target's header set (the area's `within`)

    def _inside(self, tf):
        u = self.space.match_bdd(tf) & self.region
        return None if u == self.space.false else u

    def targets(self, level: int):
        """Every target of one level, in its first pass's order (for tests)."""
        self._list()
        lv = _Level(level)
        while (tf := lv.next_target(self.keys, self.start)) is not None:
            yield tf

    def _list(self) -> None:
        if self.keys is None:
            self.keys = list(self.matches)
            self.start = self.rng.randrange(len(self.keys)) if self.keys else 0

    def draw(self, tries: int = 4) -> dict | None:
        """The next probe; None when `tries` targets in a row missed the region."""
        self._list()
        if not self.levels:
            return None
        lv = min(self.levels.values(), key=lambda x: (x.stride, x.j))
        lv.stride += 1 << (lv.j - 1)
        u = None
        if not lv.done_first:
            for _ in range(tries):
                tf = lv.next_target(self.keys, self.start)
                if tf is None:
                    lv.done_first, lv.seen = True, set()
                    if not lv.live:
                        del self.levels[lv.j]
                    break
                u = self._inside(tf)
                if u is not None:
                    lv.live.append(tf)
                    break
        else:
            u = self._inside(lv.live[lv.turn % len(lv.live)])
            lv.turn += 1
        if u is None:
            return None
        self.cell = u
        return Sampler(self.space, u, cache=self.cache).uniform(self.rng)

    @property
    def done(self) -> bool:
        """Every level's first pass is over and no target met the region."""
        return not self.levels


class _Level:
    """One level of MaskEdges: its first pass's place and the targets that met the region."""

    __slots__ = ("j", "tested", "pending", "seen", "live", "done_first", "turn", "stride")

    def __init__(self, j: int) -> None:
        self.j = j
        self.tested = 0  # matches of the first pass taken
        self.pending: list[tuple] = []  # targets of the match taken last, not tested yet
        self.seen: set[tuple] = set()
        self.live: list[tuple] = []
        self.done_first = False
        self.turn = 0
        self.stride = 0

    def next_target(self, keys: list, start: int) -> tuple | None:
        """The next target of the first pass not tested yet; None once it is over."""
        while not self.pending:
            if self.tested >= len(keys):
                return None
            fields = keys[(start + self.tested) % len(keys)]
            self.tested += 1
            for i, (f, v, m) in enumerate(fields):
                if f in _PREFIX_FIELDS and m:
                    for t in _mask_targets(WIDTH[f], v & m, m, self.j):
                        tf = fields[:i] + ((f, *t),) + fields[i + 1 :]
                        if tf not in self.seen:
                            self.seen.add(tf)
                            self.pending.append(tf)
        return self.pending.pop()


def _mask_targets(
    width: int, value: int, mask: int, level: int | None = None
) -> list[tuple[int, int]]:
    """(value, mask) of the prefixes MaskEdges probes for the prefix value/mask of length
    n, of one level j or of all (level None): inside, the upper sibling of the /n+j under
    the value; beside it, the sibling of the /n-j+1 around it."""
    full = (1 << width) - 1
    n = bin(mask).count("1")
    out = []
    for j in range(1, MASK_SLIP + 1) if level is None else (level,):
        if n + j <= width:
            bit = 1 << (width - n - j)  # the lowest bit of the /n+j prefix
            out.append((value | bit, (full << (width - n - j)) & full))
        if j <= n:
            bit = 1 << (width - n + j - 1)  # the lowest bit of the /n-j+1 prefix
            out.append(((value & ~(bit - 1) & full) ^ bit, (full << (width - n + j - 1)) & full))
    return out
