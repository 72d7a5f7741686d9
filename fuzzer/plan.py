"""Probe areas of one ingress and the endless probe schedule over them (Algorithm 2 and more).

For an ingress i and its selected exits e, from the model's corpus (S_i, S_e):

  covered(i)  = the union of S_i(i, e) over every exit e: what production traffic from i
                exercises already. Never probed.
  sweep(i, e) = V ∧ S_e ∧ ¬S_i: headers the exit switch would send out of e but the model
                never delivers there from i (V = fuzzer.hspace.valid_headers).
  boundary    = headers just outside covered(i): ±1 on every range edge of a covered cube
                (ports, protocol, EtherType, VLAN, then address ranges), and one set per field
                of the headers one bit flip of that field away from covered(i) (fat-fingers,
                the holes that ACLs cut and their neighbours).
  region      = headers just outside the covered region in one field: a field's covered
                values merged into maximal intervals, probed outside each edge at every
                distance scale (RegionEdges), the other fields from a covered header.
  class       = V ∧ ¬covered(i) ∧ C for every model class C that meets it: one area per
                behaviour of the uncovered space (an ACL's dropped headers towards one route,
                the table-miss headers of one switch, ...), however small; one draw in
                EDGE_EVERY at the exact edges of the cell's blocks of ipv4_dst (an
                ACL's dropped /24: its first and last address, then inward at every
                scale; region.BlockEdges).
  random      = V ∧ ¬covered(i), uniform.
  delivered   = V ∧ covered(i) ∧ M for every distinct match M of the model's entries that
                meets it, only with a positive `shares["delivered"]` (default 0): what the
                model delivers from i that production traffic may still never exercise (a
                route nobody uses, the rewrite of an idle prefix), one area per entry's
                match so that a /24 gets as many turns as the /8 around it; and one more
                area, with as many weighted turns as those together, at the edges of
                every prefix matched, covered or not (the blocks beside and inside it
                where a mask typed wrong shows: region.MaskEdges). Where probes are marked
                (ovs-patches 0008) the exit switch drops them; else they reach hosts, as
                any delivered packet.

Every area is probed forever, not once: a hidden rule can be installed at any moment
and can sit in any part of an area. The plan is a stride schedule over the area groups
(sweep, boundary, region, class, delivered, random; `shares`, by default from the
network's sFlow sampling: `default_shares`), round-robin over the areas of a group, and
within an area an evenly spread, endless sequence of headers (a golden-ratio walk over the
area's index order, `Sampler`), so that successive visits of one area land in different
parts of it: a sub-region that holds a fraction f of an area is reached after about 1/f
visits of the area. `revisit_s` gives the resulting period per group.

Every probe is a canonical header, outside covered(i) but for the delivered group's.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import partial

from cpc.fields import FIELD_NAMES, WIDTH
from cpc.results import Port
from cpc.space import HeaderSpace

from .hspace import (
    MAC_GROUP_BIT,
    CountCache,
    Membership,
    Sampler,
    canonicalize,
    local_mac,
    valid_headers,
)
from .region import BlockEdges, MaskEdges, RegionEdges

__all__ = ["IngressPlan", "PairArea", "Probe", "boundary_regions"]

# Fields whose range edges are probed first (small, semantically meaningful values).
_EDGE_FIRST = ("ip_proto", "tp_dst", "tp_src", "eth_type", "vlan_vid")
_FULL = {f: (1 << w) - 1 for f, w in WIDTH.items()}
_GOLDEN = 0x9E3779B97F4A7C15F39CC0605CEDC834  # frac(golden ratio) * 2**128


@dataclass(slots=True)
class Probe:
    ingress: Port
    header: dict[str, int]
    area: str  # "sweep" | "boundary" | "class" | "random" | "critical" | "reprobe" | "confirm"
    pair: tuple[Port, Port] | None = None
    seq: int = 0
    label: str = ""  # the area's name within its group ("delivered" + the entry's match)


@dataclass
class PairArea:
    ingress: Port
    egress: Port
    s_i: object
    s_e: object
    uncovered: object  # V ∧ ¬S_i: the coverage denominator
    sweep: object  # V ∧ S_e ∧ ¬S_i
    sweep_iter: Iterator | None = None
    probes: int = 0
    version: int = 0
    extra: dict = field(default_factory=dict)


def _is_prefix(mask: int, width: int) -> bool:
    inv = ~mask & ((1 << width) - 1)
    return inv & (inv + 1) == 0


def boundary_regions(cube: dict[str, tuple[int, int]], stage: int) -> Iterator[dict]:
    """Regions just outside one covered cube, by stage.

    stage 0: ±1 on range edges of small fields (ip_proto, ports, eth_type, vlan_vid);
    stage 1: ±1 on range edges of the other fields (addresses: the adjacent ranges);
    stage 2: the sibling of every masked value (lowest mask bit flipped);
    stage 3: every other single-bit flip of a masked value, lowest bit first.
    A region is the cube with one field replaced: {field: (value, mask)}.
    """
    names = [f for f in FIELD_NAMES if f in cube]
    if stage in (0, 1):
        for f in names:
            if (f in _EDGE_FIRST) != (stage == 0):
                continue
            v, m = cube[f]
            w = WIDTH[f]
            if not _is_prefix(m, w):
                continue
            lo, hi = v & m, (v & m) | (~m & _FULL[f])
            for x in (lo - 1, hi + 1):
                if 0 <= x <= _FULL[f]:
                    r = dict(cube)
                    r[f] = (x, _FULL[f])
                    yield r
    elif stage == 2:
        for f in names:
            v, m = cube[f]
            low = m & -m
            r = dict(cube)
            r[f] = ((v ^ low) & m, m)
            yield r
    else:
        bits = []
        for f in names:
            v, m = cube[f]
            low = m & -m
            mm = m & ~low
            while mm:
                b = mm & -mm
                bits.append((b.bit_length(), f, b))
                mm &= ~b
        for _, f, b in sorted(bits, key=lambda x: x[0]):
            v, m = cube[f]
            r = dict(cube)
            r[f] = ((v ^ b) & m, m)
            yield r


def canonical_region(region: dict[str, tuple[int, int]]) -> dict[str, tuple[int, int]]:
    """The part of a region that a canonical header keeps: no IP fields under a fixed
    non-IPv4 EtherType, no ports under a fixed protocol other than TCP/UDP."""
    r = dict(region)
    et = r.get("eth_type")
    if et is not None and et[1] == 0xFFFF and et[0] != 0x0800:
        for f in ("ipv4_dst", "ipv4_src", "ip_proto", "tp_dst", "tp_src"):
            r.pop(f, None)
    pr = r.get("ip_proto")
    if pr is not None and pr[1] == 0xFF and pr[0] not in (6, 17):
        r.pop("tp_dst", None)
        r.pop("tp_src", None)
    return r


def fill(region: dict[str, tuple[int, int]], rng: random.Random) -> dict[str, int]:
    """A canonical header in (or next to) a region: free bits random, then canonicalized."""
    h = {}
    for f in FIELD_NAMES:
        v, m = region.get(f, (0, 0))
        h[f] = (v & m) | (rng.getrandbits(WIDTH[f]) & ~m)
    if "eth_type" not in region and any(f in region for f in ("ipv4_dst", "ipv4_src", "ip_proto")):
        h["eth_type"] = 0x0800
    if "ip_proto" not in region and any(f in region for f in ("tp_dst", "tp_src")):
        h["ip_proto"] = rng.choice((6, 17))
    if "vlan_vid" not in region:
        h["vlan_vid"] = 0
    return canonicalize(h)


class _Area:
    """One area of a plan: how to draw its next header, and when it was probed."""

    __slots__ = ("name", "draw", "pair", "weight", "stride", "sent", "last", "within")

    def __init__(self, name: str, draw, pair=None, weight: float = 1.0, within=None) -> None:
        self.name = name
        # () -> the area's header set (None: not known yet), for the source MAC's check;
        # None: an area of single regions (edges, region), checked against covered(i)
        self.within = within
        self.pair = pair  # (ingress, egress) of a sweep area
        self.weight = weight  # its share of the group's weighted turns
        self.stride = 0.0  # pass value of the weighted turns
        # (plan) -> header | None (None: nothing this turn); raises _Empty when done. It takes
        # the plan as an argument rather than holding it, so that a plan is freed by reference
        # counting: a plan in a reference cycle would be left to the cyclic collector, which
        # may free the BDD manager before the nodes the plan holds (dd then leaks it whole).
        self.draw = draw
        self.sent = 0
        self.last: float | None = None


def sqrt_weight(prior: float, size: float) -> float:
    """An area's weight in its group's weighted turns: sqrt(prior * size). With a hidden
    entry in area k with probability p_k, found after s_k probes of the area on average,
    and x_k of the group's probes going to area k, the expected wait is
    sum_k p_k s_k / x_k; under sum_k x_k = 1 it is least at x_k proportional to
    sqrt(p_k s_k) (Lagrange)."""
    return math.sqrt(max(prior, 0.0) * max(size, 0.0))


# The BDD variable of the I/G bit of eth_src (bit 40 of the value: variable i is the
# value's bit 47 - i).
_SRC_GROUP_VAR = f"eth_src_{47 - 40}"


def _itself(x):
    return x


class _Empty(Exception):
    """An area turned out to be empty (a class cell outside the uncovered space)."""


REGION_AFTER = 64  # probes of a plan before its region group starts

GROUPS = ("sweep", "boundary", "region", "class", "delivered", "random")
DEFAULT_SHARES = {
    "sweep": 0.2,
    "boundary": 0.4,
    "region": 0.1,
    "class": 0.2,
    "delivered": 0.0,
    "random": 0.1,
}


# With sFlow sampling 1/N a hidden entry is found after about N of its probes, so a target
# that takes a share q of the probes waits N/q probes. The bit-flip sets spread over one
# fat-finger per bit of every covered prefix (10^4 to 10^5 targets): at 1/1 one is found
# within minutes, at 1/100 in hours. From SPARSE_SAMPLING on, half of the boundary
# group's share goes to the groups whose targets are larger: random and region.
SPARSE_SAMPLING = 100
SPARSE_SHARES = {
    "sweep": 0.2,
    "boundary": 0.15,
    "region": 0.15,
    "class": 0.2,
    "delivered": 0.0,
    "random": 0.3,
}


def default_shares(sampling: int = 1) -> dict[str, float]:
    """The groups' default shares at sFlow sampling 1/sampling."""
    return dict(SPARSE_SHARES if sampling >= SPARSE_SAMPLING else DEFAULT_SHARES)


# The delivered group's share where probes are marked: the switches report each probe at
# its exit and drop it there, so probes into delivered space reach no host (pazzd's default
# fuzz.delivered_share then; docs/fuzzer.md, "The delivered group"). It found 13 of 16 lab
# faults by the data plane where the default shares found 8 (docs/detection.md).
DELIVERED_SHARE_MARKED = 0.2


def shares_with_delivered(share: float, sampling: int = 1) -> dict[str, float]:
    """The default shares (at sampling 1/sampling) with `share` of the probes
    (0 <= share < 1) going to the delivered group and the rest split as by default."""
    rest = {g: w * (1.0 - share) for g, w in default_shares(sampling).items()}
    return {**rest, "delivered": share}


def _sweep_draw(p: PairArea, plan: IngressPlan) -> dict:
    """The next header of a pair's sweep: an endless spread walk over V ∧ S_e ∧ ¬S_i."""
    if p.sweep_iter is None:
        p.sweep_iter = Sampler(plan.space, cache=plan.cache, u=p.sweep).spread(plan.rng)
    return next(p.sweep_iter)


# One draw in EDGE_EVERY of a class cell probes its block edges (region.BlockEdges), the
# others walk the cell: the square-root rule between the two (docs/fuzzer.md, "The probe
# budget"). An exact edge of B blocks comes round every 4B edge draws, a /32 anywhere in
# B /24 blocks after about 256B walk draws; with equal priors the rule gives the edges
# sqrt(4B) : sqrt(256B) = 1 : 8 of the cell's draws, whatever B is.
EDGE_EVERY = 1 + round(math.sqrt(256 / 4))


class _CellDraw:
    """An endless spread walk over a BDD inside a region (empty: _Empty), and, with edges,
    every EDGE_EVERY-th draw at the exact edges of the cell's blocks."""

    __slots__ = ("bdd", "region", "it", "cell", "edges", "turn", "with_edges")

    def __init__(self, bdd, region, edges: bool = False) -> None:
        self.bdd, self.region, self.it, self.cell = bdd, region, None, None
        self.edges, self.turn, self.with_edges = None, 0, edges

    def within(self):
        return self.cell

    def __call__(self, plan: IngressPlan) -> dict:
        if self.it is None:
            bdd, region = self.bdd, self.region
            cell = plan.cache.derive(
                ("cell", int(bdd), int(region)), (bdd, region), lambda: bdd & region
            )
            if cell == plan.space.false:
                raise _Empty
            self.cell = cell
            self.it = Sampler(plan.space, cache=plan.cache, u=cell).spread(plan.rng)
        self.turn += 1
        if self.with_edges and self.turn % EDGE_EVERY == 0:
            if self.edges is None:  # built at the first edge draw, not in the first batch
                edges = BlockEdges(plan.space, self.cell, plan.cache, plan.rng)
                self.edges = edges if len(edges) else False
            if self.edges:
                return self.edges.draw()
        return next(self.it)


def _mask_edge_draw(e: MaskEdges, plan: IngressPlan) -> dict | None:
    h = e.draw()
    if h is None and e.done:
        raise _Empty
    return h


def _mask_edge_cell(e: MaskEdges):
    return e.cell


class _FlipDraw:
    """A bit-flip set's draws: every other one uniform over the set's headers, the others
    over its disjoint cubes (a set holds the fat-fingers of /8 and /24 routes alike, and
    by header count the /8s' would take every probe)."""

    __slots__ = ("field_name", "smp", "turn")

    def __init__(self, field_name: str, smp: Sampler) -> None:
        self.field_name, self.smp, self.turn = field_name, smp, 0

    def __call__(self, plan: IngressPlan) -> dict:
        self.turn += 1
        smp = self.smp
        if self.turn % 2:
            return smp.by_cube(plan.rng)
        # The walk is shared by the ingresses: a hidden route repeated on every switch
        # shows up from any ingress, and together they spread over the set faster.
        return smp.header(plan._shared_index(("flip", self.field_name), smp.total))


def flip_set(space: HeaderSpace, covered, field_name: str, residual):
    """Headers of `residual` one bit flip of field_name away from a header of `covered`
    (residual ⊆ ¬covered). A bit that covered does not test is skipped: flipping it maps
    covered onto itself, which residual does not meet."""
    bdd = space.bdd
    support = bdd.support(covered) if covered != space.false else set()
    u = space.false
    for i in range(WIDTH[field_name]):
        name = f"{field_name}_{i}"
        if name in support:
            u = u | bdd.let({name: ~bdd.var(name)}, covered)
    return u & residual


def _edge_iter(space: HeaderSpace, covered, max_cubes: int) -> Iterator[dict]:
    """±1 range edges of the covered cubes (small fields first, then addresses)."""
    for cube in space.cubes(covered, limit=max_cubes):
        yield from boundary_regions(cube, 0)


class _EdgeRegions:
    """The edge regions of one covered set as (canonical region, seen key), in
    `_edge_iter` order, listed as far as a plan has read them: plans over the same covered
    set share one list (CountCache.derive), so a rebuilt plan does not walk the cubes again."""

    __slots__ = ("items", "_it")

    def __init__(self, space: HeaderSpace, covered, max_cubes: int) -> None:
        self.items: list[tuple[dict, tuple]] = []
        self._it: Iterator[dict] | None = _edge_iter(space, covered, max_cubes)

    def get(self, k: int) -> tuple[dict, tuple] | None:
        """The k-th edge region, or None past the last."""
        items = self.items
        while len(items) <= k and self._it is not None:
            region = next(self._it, None)
            if region is None:
                self._it = None
                break
            region = canonical_region(region)
            items.append((region, ("edge", tuple(sorted(region.items())))))
        return items[k] if k < len(items) else None


class IngressPlan:
    """The endless probe schedule of one ingress for one model version."""

    def __init__(
        self,
        space: HeaderSpace,
        ingress: Port,
        corpora: dict[Port, tuple[object, object]],
        others: dict[Port, object] | None = None,
        *,
        rng: random.Random,
        seen: dict | None = None,
        version: int = 0,
        random_share: float | None = None,
        shares: dict[str, float] | None = None,
        classes: dict[int, object] | None = None,
        matches: dict[tuple, object] | None = None,
        max_cubes: int = 20000,
        cache: CountCache | None = None,
        warmup: int = 24,
        src_mac: int | None = None,
        block_edges: bool = True,
    ) -> None:
        """corpora: {egress: (S_i, S_e)} for the selected pairs of this ingress; others:
        {egress: S_i} for the exits that are not selected (they still count as covered);
        classes: {class id: BDD} of the model, for the class areas (None: no class areas);
        matches: {match fields: BDD} of the model's entries, for the delivered areas;
        shares: each group's share of the ingress's probes (groups without areas give
        theirs to the others); random_share overrides shares["random"]; src_mac: the
        source MAC of the probes wherever their area leaves eth_src free (the MAC of the
        host behind the ingress, else a locally administered one: hspace.local_mac)."""
        self.space = space
        self.cache = cache or CountCache(space)
        self.warmup = warmup  # probes before the (slower) bit-flip sets are built
        self.ingress = ingress
        self.version = version
        self.rng = rng
        self.max_cubes = max_cubes
        self.seen = seen if seen is not None else {}
        self.src_mac = local_mac(ingress) if src_mac is None else src_mac
        if self.src_mac & MAC_GROUP_BIT:
            raise ValueError(
                f"ingress {ingress}: source MAC {self.src_mac:012x} is a group address"
            )
        sh = dict(DEFAULT_SHARES if shares is None else shares)
        if random_share is not None:
            sh["random"] = random_share
        self.shares = {g: float(sh.get(g, 0.0)) for g in GROUPS}
        v = valid_headers(space)
        covered = space.false
        for s_i, _ in corpora.values():
            covered = covered | s_i
        for s_i in (others or {}).values():
            covered = covered | s_i
        self.covered = covered
        self.pairs: dict[Port, PairArea] = {}
        self.areas: dict[str, list[_Area]] = {g: [] for g in GROUPS}
        for egress, (s_i, s_e) in corpora.items():
            ns = ~s_i
            sweep = v & s_e & ns
            p = PairArea(ingress, egress, s_i, s_e, v & ns, sweep, version=version)
            self.pairs[egress] = p
            if sweep != space.false:
                name = f"sweep {egress[0]}:{egress[1]}"
                self._add(
                    "sweep",
                    name,
                    partial(_sweep_draw, p),
                    (ingress, egress),
                    within=partial(_itself, sweep),
                )
        self._residual = v & ~covered
        if self._residual != space.false:
            self._add(
                "random",
                "random",
                IngressPlan._random_draw,
                within=partial(_itself, self._residual),
            )
            for c in sorted(classes or {}):
                d = _CellDraw(classes[c], self._residual, edges=block_edges)
                self._add("class", f"class {c}", d, within=d.within)
        if self.shares["delivered"] > 0:
            delivered = v & covered
            for k, m in sorted((matches or {}).items()):
                d = _CellDraw(m, delivered)
                self._add("delivered", f"delivered {k}", d, within=d.within)
            if matches:
                # As many weighted turns as all the cells together (about a quarter of the
                # group's probes): a prefix installed with a wrong mask shows in small
                # blocks next to it, where a cell's walk lands by chance. Drawn over all of
                # V, covered or not (region.MaskEdges).
                e = MaskEdges(space, matches, v, self.cache, rng)
                self._add(
                    "delivered",
                    "delivered edges",
                    partial(_mask_edge_draw, e),
                    weight=float(len(matches)),
                    within=partial(_mask_edge_cell, e),
                )
        self._random: Sampler | None = None
        self._edges = self.cache.derive(
            ("edges", int(covered), max_cubes),
            (covered,),
            partial(_EdgeRegions, space, covered, max_cubes),
        )
        self._edge_pos = 0  # the next region of self._edges to look at
        self._in_covered = self.cache.derive(
            ("member", int(covered)), (covered,), partial(Membership, space, covered)
        )
        self._edges_done = False
        self._edge_regions: list[dict] = []  # regions that gave a probe, cycled once done
        self._edge_next = 0
        self._add("boundary", "edges", IngressPlan._edge_draw)
        self._region: RegionEdges | None = None
        if self._residual != space.false and self.shares["region"] > 0:
            self._add("region", "region", IngressPlan._region_draw)
        self._flip_todo = [f for f in _EDGE_FIRST] + [
            f for f in FIELD_NAMES if f not in _EDGE_FIRST
        ]
        self._btick = 0
        self._pass = dict.fromkeys(GROUPS, 0.0)
        self._rr = dict.fromkeys(GROUPS, 0)

    def _add(
        self, group: str, name: str, draw, pair=None, weight: float = 1.0, within=None
    ) -> None:
        self.areas[group].append(_Area(name, draw, pair, weight, within))

    # --- source MACs ------------------------------------------------------------------------
    def _member(self, u) -> Membership:
        return self.cache.derive(("member", int(u)), (u,), partial(Membership, self.space, u))

    def _tests_src(self, u) -> bool:
        """Does u test a bit of eth_src other than its I/G bit (a rule matches eth_src)?
        (V tests the I/G bit alone: a source MAC is an individual one.)"""
        return self.cache.derive(
            ("tests eth_src", int(u)),
            (u,),
            lambda: any(
                n.startswith("eth_src_") and n != _SRC_GROUP_VAR for n in self.space.bdd.support(u)
            ),
        )

    def _covered_tests_src(self) -> bool:
        """Does covered(i) depend on eth_src (a rule on the way matches it)?"""
        return self._tests_src(self.covered)

    def _with_src(self, a: _Area, h: dict) -> dict:
        """h with the plan's source MAC, where that keeps h in its area: an area that
        constrains eth_src (a rule matching on it) keeps the drawn one (unicast, as V
        has it)."""
        mac = self.src_mac
        if h.get("eth_src") == mac:
            return h
        moved = dict(h)
        moved["eth_src"] = mac
        if a.within is None:  # single regions next to covered(i): edges, region
            return h if self._covered_tests_src() else moved
        u = a.within()
        if u is None:
            return h
        if not self._tests_src(u):  # only the I/G bit, which the MAC has clear
            return moved
        return moved if self._member(u)(moved) else h

    # --- areas -----------------------------------------------------------------------------
    def _shared_index(self, key, n: int) -> int:
        """The next index of a golden-ratio walk over [0, n) whose start and position are
        shared by every ingress in this model version (kept in `seen`): ingresses probing
        nearly the same set split one evenly spread sequence instead of repeating it."""
        shared = self.seen.setdefault(key, [self.rng.random(), 0])
        k = shared[1]
        shared[1] += 1
        step = max(1, (_GOLDEN * n) >> 128)
        return (int(shared[0] * n) + k * step) % n

    def _random_draw(self):
        if self._random is None:
            self._random = Sampler(self.space, cache=self.cache, u=self._residual)
        smp = self._random
        return smp.header(self._shared_index(("random",), smp.total))

    def _region_draw(self) -> dict | None:
        # Not in the first batch after a new corpus: the intervals and the sampler of
        # covered headers took 85 ms with a cold count cache on the 100k-rule fat-tree.
        if self._btick <= REGION_AFTER:
            return None
        if self._region is None:
            self._region = RegionEdges(self.space, self.covered, self.cache, self.rng)
        h = self._region.draw()
        if h is None and self._region.empty:
            raise _Empty
        return h

    def _edge_draw(self, tries: int = 4) -> dict | None:
        """The next ±1 edge probe. The first pass walks the edge regions (looking at no
        more than `tries` candidates per call: most edges of a decomposed covered set lie
        in another covered cube; a region another ingress took in this version is left to
        it); later passes cycle over the regions that gave a probe, with fresh free bits."""
        in_covered = self._in_covered
        if not self._edges_done:
            while True:
                item = self._edges.get(self._edge_pos)
                if item is None:
                    break
                self._edge_pos += 1
                region, key = item
                if key in self.seen:
                    continue
                tries -= 1
                h = fill(region, self.rng)
                if in_covered(h):
                    if tries <= 0:
                        return None
                    continue  # the edge lies in covered space (next to another covered cube)
                self.seen[key] = self.ingress
                self._edge_regions.append(region)
                return h
            self._edges_done = True
        regions = self._edge_regions
        for _ in range(min(tries, len(regions))):
            region = regions[self._edge_next % len(regions)]
            self._edge_next += 1
            h = fill(region, self.rng)
            if not in_covered(h):
                return h
        if not regions:
            raise _Empty
        return None

    def _flip_set(self, field_name: str):
        """Headers outside covered(i) one bit flip of field_name away from a covered header
        (the same set for the same covered set: CountCache.derive)."""
        return self.cache.derive(
            ("flip", field_name, int(self.covered)),
            (self.covered,),
            partial(flip_set, self.space, self.covered, field_name, self._residual),
        )

    def _grow_boundary(self) -> None:
        """After the first `warmup` probes, build one bit-flip set per probe (small fields
        first): the first batch after a new corpus needs only the area BDDs and one sampler."""
        self._btick += 1
        if self._flip_todo and self._btick > self.warmup:
            f = self._flip_todo.pop(0)
            u = self._flip_set(f)
            if u != self.space.false:
                smp = Sampler(self.space, cache=self.cache, u=u)
                # Weighted turns by the set's number of disjoint cubes: the ipv4_dst set
                # holds a fat-finger region for every bit of every covered prefix.
                self._add(
                    "boundary",
                    f"flip {f}",
                    _FlipDraw(f, smp),
                    weight=sqrt_weight(smp.paths(), smp.paths()),
                    within=partial(_itself, u),
                )

    # --- the schedule -----------------------------------------------------------------------
    def _pick(self, group: str) -> int:
        """The index of the group's next area: every other turn round robin (each area in
        turn, so a small area is revisited within a bounded period), the other turns by
        weight (stride scheduling, so big areas get probes in proportion to their size)."""
        areas = self.areas[group]
        self._rr[group] += 1
        turn = self._rr[group]
        if turn % 2 or len(areas) == 1:
            return (turn // 2) % len(areas)
        k = min(range(len(areas)), key=lambda j: areas[j].stride)
        a = areas[k]
        a.stride += 1.0 / max(a.weight, 1e-9)
        return k

    def _draw(self, group: str, now: float | None) -> Probe | None:
        """One probe from the next area of a group; None if no area gave one."""
        areas = self.areas[group]
        for _ in range(len(areas) + 1):
            if not areas:
                return None
            k = self._pick(group)
            a = areas[k]
            try:
                h = a.draw(self)
            except (_Empty, StopIteration):
                del areas[k]
                continue
            if h is None:
                continue
            a.sent += 1
            a.last = now
            return Probe(self.ingress, self._with_src(a, h), group, a.pair, label=a.name)
        return None

    def next_probe(self, now: float | None = None) -> Probe | None:
        """The next probe: the group with the least pass value (stride scheduling by
        `shares`) that has an area giving a probe now; `now` is noted as the area's last
        probe time."""
        self._grow_boundary()
        order = sorted(
            (g for g in GROUPS if self.areas[g] and self.shares[g] > 0),
            key=lambda g: (self._pass[g], GROUPS.index(g)),
        )
        for g in order:
            pr = self._draw(g, now)
            if pr is not None:
                self._pass[g] += 1.0 / self.shares[g]
                # A group that was empty or idle does not bank credit.
                low = self._pass[g] - 1.0 / self.shares[g]
                for o in order:
                    self._pass[o] = max(self._pass[o], low)
                return pr
        return None

    # --- the guarantee ----------------------------------------------------------------------
    def live_shares(self) -> dict[str, float]:
        """Each group's effective share of this ingress's probes (groups without areas out)."""
        live = {g: self.shares[g] for g in GROUPS if self.areas[g] and self.shares[g] > 0}
        total = sum(live.values())
        return {g: w / total for g, w in live.items()} if total else {}

    def revisit_s(self, rate: float) -> dict[str, float]:
        """Seconds between two probes of the same area, per group, when this ingress gets
        `rate` probes per second: the bound of the round-robin turns, half of the group's
        (weighted turns only shorten it)."""
        out = {}
        for g, w in self.live_shares().items():
            n = len(self.areas[g])
            per_area = rate * w / (2 * n if n > 1 else 1)
            out[g] = 1.0 / per_area if per_area > 0 else float("inf")
        return out

    def probes_bound(self, group: str, draws: int) -> int:
        """At most this many probes of this plan (from now) until every area the group has
        now has had `draws` more draws, when its areas always give a probe (the class
        group's do): the group gets its live share s of the turns, within one turn per
        group (stride scheduling; a group that gives no probe leaves its turn to the
        others), and each of its n areas one round-robin turn in every 2n of the group's
        (one more round for areas dropped as empty, which shift the turns)."""
        share = self.live_shares().get(group, 0.0)
        if share <= 0:
            return 0
        n = len(self.areas[group])
        return math.ceil((2 * n * (draws + 1) + len(GROUPS)) / share)

    def area_ages(self, now: float) -> list[tuple[str, str, int, float | None]]:
        """(group, area name, probes sent, seconds since its last probe or None) of every
        area."""
        return [
            (g, a.name, a.sent, None if a.last is None else max(now - a.last, 0.0))
            for g in GROUPS
            for a in self.areas[g]
        ]

    def area_stats(self, now: float, window: float) -> tuple[int, int]:
        """(areas, areas probed within the last `window` seconds)."""
        n = recent = 0
        for areas in self.areas.values():
            for a in areas:
                n += 1
                if a.last is not None and now - a.last <= window:
                    recent += 1
        return n, recent
