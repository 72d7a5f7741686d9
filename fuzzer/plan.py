"""Probe areas of one ingress and the probes in them (Algorithm 2 and more).

For an ingress i and its selected exits e, from the model's corpus (S_i, S_e):

  covered(i)  = the union of S_i(i, e) over every exit e: what production traffic from i
                exercises already.
  sweep(i, e) = V ∧ S_e ∧ ¬S_i: headers the exit switch would send out of e but the model
                never delivers there from i (V = fuzzer.hspace.valid_headers).
  boundary    = headers just outside each covered cube (HeaderSpace.cubes of S_i(i, e)):
                ±1 on every range edge of a field (ports, protocol, EtherType, VLAN,
                address ranges), then the sibling of every prefix/masked value (its last
                mask bit flipped), then every other single-bit flip of a masked value,
                lowest bit first. A region that another ingress has already probed in this
                model version waits for a second pass (a hidden rule repeated on every switch
                shows up from any ingress).
  random      = V ∧ ¬covered(i) ∧ ¬sweeps, uniform (fuzzer.hspace.Sampler, golden-ratio
                spread); once every sweep area is exhausted, V ∧ ¬covered(i).

Every probe is a canonical header outside covered(i).
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass, field

from cpc.fields import FIELD_NAMES, WIDTH
from cpc.results import Port
from cpc.space import HeaderSpace

from .hspace import CountCache, Sampler, canonicalize, valid_headers

__all__ = ["IngressPlan", "PairArea", "Probe", "boundary_regions"]

# Fields whose range edges are probed first (small, semantically meaningful values).
_EDGE_FIRST = ("ip_proto", "tp_dst", "tp_src", "eth_type", "vlan_vid")
_FULL = {f: (1 << w) - 1 for f, w in WIDTH.items()}
_GOLDEN = 0x9E3779B97F4A7C15F39CC0605CEDC834  # frac(golden ratio) * 2**128


@dataclass(slots=True)
class Probe:
    ingress: Port
    header: dict[str, int]
    area: str  # "sweep" | "boundary" | "random" | "critical"
    pair: tuple[Port, Port] | None = None
    seq: int = 0


@dataclass
class PairArea:
    ingress: Port
    egress: Port
    s_i: object
    s_e: object
    uncovered: object  # V ∧ ¬S_i: the coverage denominator
    sweep: object  # V ∧ S_e ∧ ¬S_i
    sweep_sampler: Sampler | None = None
    sweep_iter: Iterator | None = None
    sweep_done: bool = False
    sweep_sent: int = 0
    boundary_done: bool = False
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


class IngressPlan:
    """The probe plan of one ingress for one model version. Build with `from_corpus`."""

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
        random_share: float = 0.25,
        sweep_max: int = 4096,
        max_cubes: int = 20000,
        cache: CountCache | None = None,
        warmup: int = 24,
    ) -> None:
        """corpora: {egress: (S_i, S_e)} for the selected pairs of this ingress; others:
        {egress: S_i} for the exits that are not selected (they still count as covered)."""
        self.space = space
        self.cache = cache or CountCache(space)
        self.warmup = warmup  # boundary turns before the (slower) bit-flip sets are built
        self.ingress = ingress
        self.version = version
        self.rng = rng
        self.random_share = random_share
        self.sweep_max = sweep_max
        self.max_cubes = max_cubes
        self.seen = seen if seen is not None else {}
        v = valid_headers(space)
        covered = space.false
        for s_i, _ in corpora.values():
            covered = covered | s_i
        for s_i in (others or {}).values():
            covered = covered | s_i
        self.covered = covered
        self.pairs: dict[Port, PairArea] = {}
        sweeps = space.false
        for egress, (s_i, s_e) in corpora.items():
            ns = ~s_i
            sweep = v & s_e & ns
            self.pairs[egress] = PairArea(ingress, egress, s_i, s_e, v & ns, sweep, version=version)
            sweeps = sweeps | sweep
        self.sweeps = sweeps
        self._residual = v & ~covered
        self._random: Iterator | None = None
        self._random_area = None
        self._edges = self._edge_iter()
        self._edges_done = False
        self._flip_todo = [f for f in _EDGE_FIRST] + [
            f for f in FIELD_NAMES if f not in _EDGE_FIRST
        ]
        self._fsets: list = []
        self._fturn = 0
        self._btick = 0
        self._boundary_area = space.false
        self.boundary_exhausted = False
        self._tick = 0

    # --- areas -----------------------------------------------------------------------------
    def random_area(self):
        pending = any(not p.sweep_done for p in self.pairs.values())
        return self._residual & ~self.sweeps if pending else self._residual

    def _random_sampler(self) -> Sampler:
        area = self.random_area()
        if self._random is None or area != self._random_area:
            self._random_area = area
            self._random = Sampler(self.space, cache=self.cache, u=area)
        return self._random

    def _shared_index(self, key, n: int) -> int:
        """The next index of a golden-ratio walk over [0, n) whose start and position are
        shared by every ingress in this model version (kept in `seen`): ingresses probing
        nearly the same set split one evenly spread sequence instead of repeating it."""
        shared = self.seen.setdefault(key, [self.rng.random(), 0])
        k = shared[1]
        shared[1] += 1
        step = max(1, (_GOLDEN * n) >> 128)
        return (int(shared[0] * n) + k * step) % n

    # --- the three phases -------------------------------------------------------------------
    def _next_sweep(self, probed) -> Probe | None:
        for p in self.pairs.values():
            if p.sweep_done:
                continue
            if p.sweep == self.space.false or p.sweep_sent >= self.sweep_max:
                p.sweep_done = True
                continue
            if p.sweep_iter is None:
                p.sweep_sampler = Sampler(self.space, cache=self.cache, u=p.sweep)
                p.sweep_iter = p.sweep_sampler.spread(self.rng)
            if probed is not None and probed(p.sweep):
                p.sweep_done = True
                continue
            h = next(p.sweep_iter)
            p.sweep_sent += 1
            return Probe(self.ingress, h, "sweep", (self.ingress, p.egress))
        return None

    def _edge_iter(self) -> Iterator[tuple[tuple, dict]]:
        """±1 range edges of the covered cubes (small fields first, then addresses)."""
        for cube in self.space.cubes(self.covered, limit=self.max_cubes):
            for region in boundary_regions(cube, 0):
                yield tuple(sorted(region.items())), region

    def _next_edge(self, tries: int = 4) -> Probe | None:
        """The next ±1 edge probe; looks at no more than `tries` candidate regions per call
        (most edges of a decomposed covered set lie in another covered cube)."""
        contains = self.space.contains
        for key, region in self._edges:
            region = canonical_region(region)
            key = ("edge", tuple(sorted(region.items())))
            if key in self.seen:
                continue
            tries -= 1
            h = fill(region, self.rng)
            if contains(self.covered, h):
                if tries <= 0:
                    return None
                continue  # the edge lies in covered space (next to another covered cube)
            self.seen[key] = self.ingress
            return Probe(self.ingress, h, "boundary", None)
        self._edges_done = True
        return None

    def _flip_set(self, field_name: str):
        """Headers outside covered(i) one bit flip of field_name away from a covered header."""
        sp = self.space
        u = sp.false
        for i in range(WIDTH[field_name]):
            name = f"{field_name}_{i}"
            u = u | sp.bdd.let({name: ~sp.bdd.var(name)}, self.covered)
        return u & self._residual

    def _next_flip(self) -> Probe | None:
        """One probe from the bit-flip sets (one per field): half of the turns go to the set
        with the fewest probes, half by number of disjoint cubes (regions), until a set has
        had two probes per region. Sets are computed one per call, small fields first. Each set is
        walked with the shared golden-ratio sequence (`_shared_index`)."""
        if self._flip_todo and self._btick > self.warmup:
            f = self._flip_todo.pop(0)
            u = self._flip_set(f)
            if u != self.space.false:
                smp = Sampler(self.space, cache=self.cache, u=u)
                self._fsets.append([f, smp, max(4, 2 * smp.paths())])
                self._boundary_area = self._boundary_area | u
        # Odd turns: the set with the fewest probes (small sets, such as the holes that
        # ACLs cut and their port and protocol neighbours, are done early); even turns: the
        # set with the fewest probes per region (big sets get a share by their size).
        self._fturn += 1
        by_regions = self._fturn % 2 == 0
        best, best_load = None, None
        for ent in self._fsets:
            used = self.seen.get(("flip", ent[0]), (0, 0))[1]
            if used >= ent[2]:
                continue
            load = (used + 1) / ent[2] if by_regions else used
            if best_load is None or load < best_load:
                best, best_load = ent, load
        if best is None:
            if self._flip_todo and self._btick > self.warmup:
                return self._next_flip()
            return None
        f, smp, _ = best
        r = self._shared_index(("flip", f), smp.total)
        return Probe(self.ingress, smp.header(r), "boundary", None)

    def _next_boundary(self) -> Probe | None:
        self._btick += 1
        if self._btick <= self.warmup:
            return None  # the first batch after a new corpus: sweep and random only
        edge_turn = self._btick % 4 == 1 and not self._edges_done
        first = self._next_edge if edge_turn else self._next_flip
        second = self._next_flip if first is self._next_edge else self._next_edge
        pr = first()
        if pr is None and not self._edges_done:
            pr = second()
        if pr is None and not self.boundary_exhausted:
            self.boundary_exhausted = True
            for p in self.pairs.values():
                p.boundary_done = True
        return pr

    def _repair(self, region) -> dict | None:
        """A header of region outside covered(i), from the BDD (slow path)."""
        sp = self.space
        u = sp.match_bdd(tuple((f, *region[f]) for f in FIELD_NAMES if f in region))
        u = u & self._residual
        if u == sp.false:
            return None
        return Sampler(sp, u, self.cache).uniform(self.rng)

    def next_probe(self, probed=None) -> Probe | None:
        """The next probe: sweep first, then boundary, with `random_share` of the slots
        for random probes while those last; then random only."""
        self._tick += 1
        use_random = self.random_share > 0 and (
            self._tick * self.random_share % 1 < self.random_share
        )
        if not use_random:
            pr = self._next_sweep(probed)
            if pr is None:
                pr = self._next_boundary()
            if pr is not None:
                return pr
        smp = self._random_sampler()
        if not smp.total:
            return None
        h = smp.header(self._shared_index(("random",), smp.total))
        return Probe(self.ingress, h, "random", None)
