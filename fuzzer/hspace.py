"""Header-space helpers of the fuzzer: valid headers, ranges, canonical packets, a uniform sampler.

`valid_headers(space)` is the BDD of the headers that are real packets (see
`canonicalize`); every area the fuzzer samples from is intersected with it, so a
sampled header needs no repair and stays in its area.

`Sampler(space, u)` draws headers from a BDD uniformly: it counts the satisfying
assignments below every node once (memoized per node, over the header bits only;
the partition's label variables `cls_*` are quantified away first) and then
descends from the root, choosing each branch with probability proportional to
its count. `Sampler.header(r)` is the r-th header of u in the BDD's variable
order, so a uniform r gives a uniform header and a low-discrepancy sequence of
r (`Sampler.spread`) gives headers that are each uniform but together spread
evenly over u (every prefix of the top field gets its share early).
"""

from __future__ import annotations

import random
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from functools import partial

from cpc.fields import (
    ETH_TYPE_IPV4,
    FIELD_NAMES,
    FIELDS,
    HEADER_BITS,
    MAC_GROUP_BIT,
    OFPVID_PRESENT,
    WIDTH,
    parse_mac,
)
from cpc.space import HeaderSpace

__all__ = [
    "INVALID_ETH_TYPES",
    "MAC_GROUP_BIT",
    "local_mac",
    "parse_mac",
    "Membership",
    "Sampler",
    "canonicalize",
    "header_from_bits",
    "is_valid",
    "range_bdd",
    "range_prefixes",
    "valid_headers",
]

# EtherTypes a probe never carries: 802.1Q/802.1ad/QinQ TPIDs (the model has one VLAN level)
# and the Verify shim's own EtherTypes (0x0821: marked). Values below 0x0600 are 802.3
# lengths, not types.
INVALID_ETH_TYPES = (0x8100, 0x88A8, 0x9100, 0x0820, 0x0821)
MAC_LOCAL_BIT = 1 << 41  # the U/L bit: a locally administered address
MIN_ETH_TYPE = 0x0600
_SHIFT = {}
_pos = HEADER_BITS
for _f, _w in FIELDS:
    _pos -= _w
    _SHIFT[_f] = _pos
_FIELD_MASK = {f: (1 << w) - 1 for f, w in FIELDS}
_GOLDEN_NUM = 0x9E3779B97F4A7C15F39CC0605CEDC834  # frac(golden ratio) * 2**128
_IP_ONLY = ("ipv4_dst", "ipv4_src", "ip_proto", "tp_dst", "tp_src")


def range_prefixes(lo: int, hi: int, width: int) -> list[tuple[int, int]]:
    """[lo, hi] as the fewest (value, mask) prefixes of a width-bit field."""
    out: list[tuple[int, int]] = []
    full = (1 << width) - 1
    while lo <= hi:
        size = lo & -lo if lo else 1 << width
        while size > hi - lo + 1:
            size >>= 1
        out.append((lo, full & ~(size - 1)))
        lo += size
    return out


def range_bdd(space: HeaderSpace, field: str, lo: int, hi: int):
    u = space.false
    for v, m in range_prefixes(lo, hi, WIDTH[field]):
        u = u | space.field_bdd(field, v, m)
    return u


def valid_headers(space: HeaderSpace):
    """BDD of the headers that `canonicalize` leaves unchanged (real, parseable packets)."""
    cache = space.derived.get("fuzzer_valid")
    if cache is not None:
        return cache
    f = space.field_bdd
    exact = lambda fld, v: f(fld, v, _FIELD_MASK[fld])  # noqa: E731
    ip = exact("eth_type", ETH_TYPE_IPV4)
    tcpudp = exact("ip_proto", 6) | exact("ip_proto", 17)
    tp0 = exact("tp_dst", 0) & exact("tp_src", 0)
    ip_ok = ip & (tcpudp | (~tcpudp & tp0))
    etype_ok = ~range_bdd(space, "eth_type", 0, MIN_ETH_TYPE - 1) & ~ip
    for t in INVALID_ETH_TYPES:
        etype_ok = etype_ok & ~exact("eth_type", t)
    ip_zero = exact("ipv4_dst", 0) & exact("ipv4_src", 0) & exact("ip_proto", 0) & tp0
    vlan_ok = exact("vlan_vid", 0) | f("vlan_vid", OFPVID_PRESENT, OFPVID_PRESENT)
    src_ok = f("eth_src", 0, MAC_GROUP_BIT)
    v = vlan_ok & src_ok & (ip_ok | (etype_ok & ip_zero))
    space.derived["fuzzer_valid"] = v
    return v


def is_valid(h: Mapping[str, int]) -> bool:
    return canonicalize(h) == {f: h.get(f, 0) for f in FIELD_NAMES}


def canonicalize(h: Mapping[str, int]) -> dict[str, int]:
    """The real packet closest to h: fields the frame cannot carry are 0.

    Non-IPv4 EtherType: IP and transport fields 0 (an 802.3 length or a TPID becomes
    ARP). IPv4 without TCP/UDP: ports 0. vlan_vid without OFPVID_PRESENT: untagged. A
    group source MAC: its I/G bit cleared (a source address is an individual one).
    """
    out = {f: h.get(f, 0) for f in FIELD_NAMES}
    out["eth_src"] &= ~MAC_GROUP_BIT
    if not out["vlan_vid"] & OFPVID_PRESENT:
        out["vlan_vid"] = 0
    et = out["eth_type"]
    if et == ETH_TYPE_IPV4:
        if out["ip_proto"] not in (6, 17):
            out["tp_dst"] = out["tp_src"] = 0
    else:
        if et < MIN_ETH_TYPE or et in INVALID_ETH_TYPES:
            out["eth_type"] = 0x0806
        for f in _IP_ONLY:
            out[f] = 0
    return out


def local_mac(ingress: tuple[int, int]) -> int:
    """A locally administered unicast MAC for probes from an ingress whose host's MAC is
    not known: 02:50:5a (the U/L bit, "PZ") and the low 24 bits of dpid and port."""
    dpid, port = ingress
    return MAC_LOCAL_BIT | 0x505A << 24 | ((dpid << 8 | port & 0xFF) & 0xFFFFFF)


def header_from_bits(bits: int) -> dict[str, int]:
    """Split a HEADER_BITS-wide integer (level 0 = most significant bit) into fields."""
    return {f: (bits >> _SHIFT[f]) & _FIELD_MASK[f] for f in FIELD_NAMES}


class CountCache:
    """Per-node counts shared by samplers over one manager: {regular node id: (node, models,
    paths to true, paths to false)}. Holding the node keeps its id alive and unique."""

    def __init__(
        self, space: HeaderSpace, max_entries: int = 2_000_000, max_derived: int = 256
    ) -> None:
        self.space = space
        self.max_entries = max_entries
        self.memo: dict[int, tuple] = {}
        # Results of set operations by the identity of their inputs (derive), the latest
        # max_derived of them: a plan rebuilt for an unchanged covered set (most ingresses
        # after a FlowMod) finds its bit-flip sets and edge regions here.
        self.max_derived = max_derived
        self.derived: OrderedDict[tuple, tuple] = OrderedDict()

    def derive(self, key: tuple, inputs: tuple, make: Callable[[], object]):
        """make(), or its earlier result for the same key. A key names BDD inputs by their
        node ids (int(u)); `inputs` holds those nodes, so that the ids stay theirs while the
        entry lives. The result depends on nothing but the inputs named in the key."""
        hit = self.derived.get(key)
        if hit is not None:
            self.derived.move_to_end(key)
            return hit[1]
        value = make()
        self.derived[key] = (inputs, value)
        while len(self.derived) > self.max_derived:
            self.derived.popitem(last=False)
        return value

    def trim(self) -> None:
        if len(self.memo) > self.max_entries:
            self.memo.clear()

    def regular(self, fn) -> tuple:
        """(node, models over [level, HEADER_BITS), paths to true, paths to false) of fn's
        regular node (fn a non-constant node)."""
        key = int(fn) & ~1
        r = self.memo.get(key)
        if r is not None:
            return r
        # Iterative post-order: BDDs can be deep and wide.
        memo = self.memo
        stack = [fn]
        while stack:
            node = stack[-1]
            k = int(node) & ~1
            if k in memo:
                stack.pop()
                continue
            lv = node.level
            lo, hi = node.low, node.high
            parts = []
            missing = False
            for ch in (lo, hi):
                clv = ch.level
                if clv >= HEADER_BITS:
                    neg = (int(ch) & 1) ^ (int(self.space.true) & 1)
                    parts.append((0, 1, 0, 1) if neg else (1, 1, 1, 0))
                    parts[-1] = (parts[-1][0], HEADER_BITS, parts[-1][2], parts[-1][3])
                    continue
                cr = memo.get(int(ch) & ~1)
                if cr is None:
                    stack.append(ch)
                    missing = True
                    continue
                m, p1, p0 = cr[1], cr[2], cr[3]
                if ch.negated:
                    m = (1 << (HEADER_BITS - clv)) - m
                    p1, p0 = p0, p1
                parts.append((m, clv, p1, p0))
            if missing:
                continue
            stack.pop()
            (m0, l0, a0, b0), (m1, l1, a1, b1) = parts
            models = (m0 << (l0 - lv - 1)) + (m1 << (l1 - lv - 1))
            memo[k] = (node, models, a0 + a1, b0 + b1)
        return memo[key]


class Membership:
    """`space.contains(u, h)` for one BDD u, many headers: the nodes a walk passes are
    kept as (level, complement bit, low id, high id) by node id, so that later walks
    through them read a dict instead of the BDD library's node objects (the same answers,
    several times faster once the top of u has been walked)."""

    __slots__ = ("space", "u", "root", "nodes", "fns")

    def __init__(self, space: HeaderSpace, u) -> None:
        self.space = space
        self.u = u  # holds every node below it alive, and so their ids
        self.root = int(u)
        self.nodes: dict[int, tuple] = {}
        self.fns: dict[int, object] = {self.root: u}  # nodes not expanded yet

    def _expand(self, k: int) -> tuple:
        fn = self.fns.pop(k)
        lv = fn.level
        if lv >= self.space.id_level:
            e = (lv, 0, 0, 0)
        else:
            lo, hi = fn.low, fn.high
            lo_k, hi_k = int(lo), int(hi)
            for ck, c in ((lo_k, lo), (hi_k, hi)):
                if ck not in self.nodes:
                    self.fns.setdefault(ck, c)
            e = (lv, int(fn.negated), lo_k, hi_k)
        self.nodes[k] = e
        return e

    def __call__(self, header: Mapping[str, int]) -> bool:
        sp = self.space
        lf, ls, id_level = sp.level_field, sp.level_shift, sp.id_level
        nodes = self.nodes
        k, comp = self.root, 0
        while True:
            e = nodes.get(k) or self._expand(k)
            lv = e[0]
            if lv >= id_level:
                return (k ^ comp) == int(sp.true)
            comp ^= e[1]
            k = e[3] if header.get(lf[lv], 0) >> ls[lv] & 1 else e[2]


def _header_bits_only(space: HeaderSpace, u):
    """u with the partition's label variables (cls_*) quantified away."""
    if any(n.startswith("cls_") for n in space.bdd.support(u)):
        return space.bdd.exist(space.id_names, u)
    return u


class Sampler:
    """Uniform sampling from a header set (BDD). Counts live in a CountCache (shared or
    private), which holds the nodes whose ids it memoizes."""

    def __init__(self, space: HeaderSpace, u, cache: CountCache | None = None) -> None:
        self.space = space
        self.cache = cache or CountCache(space)
        if u != space.false and u != space.true:
            u = self.cache.derive(("headers", int(u)), (u,), partial(_header_bits_only, space, u))
        self.u = u
        self._true_id = int(space.true)
        self.total = self._count_fn(u, 0) << self._lvl(u)

    @staticmethod
    def _lvl(fn) -> int:
        lv = fn.level
        return HEADER_BITS if lv >= HEADER_BITS else lv

    def _count_fn(self, fn, neg: int) -> int:
        """Models of (fn, complemented by neg) over [lvl(fn), HEADER_BITS)."""
        lv = fn.level
        if lv >= HEADER_BITS:  # a constant (no header variable left)
            return 1 if (int(fn) ^ neg) == self._true_id else 0
        r = self.cache.regular(fn)[1]
        return ((1 << (HEADER_BITS - lv)) - r) if neg ^ fn.negated else r

    def paths(self) -> int:
        """Number of disjoint cubes of u (paths to true): the regions HeaderSpace.cubes yields."""
        u = self.u
        if u.level >= HEADER_BITS:
            return 1 if u == self.space.true else 0
        _, _, a, b = self.cache.regular(u)
        return b if u.negated else a

    def __len__(self) -> int:  # may overflow for huge sets; use .total
        return min(self.total, 1 << 62)

    def bits(self, r: int) -> int:
        """The r-th header of u (0 <= r < total) as a HEADER_BITS-wide integer."""
        if not 0 <= r < self.total:
            raise IndexError("sample index out of range")
        fn, neg, level, bits = self.u, 0, 0, 0
        true_id = int(self.space.true)
        while True:
            lv = fn.level
            if lv >= HEADER_BITS:  # constant true: the remaining levels are free
                if (int(fn) ^ neg) != true_id:
                    raise AssertionError("sampler descended into false")
                return (bits << (HEADER_BITS - level)) | r
            eff = neg ^ fn.negated
            if lv > level:  # free levels above this node
                c = self._count_fn(fn, neg)
                free = lv - level
                bits = (bits << free) | (r // c)
                r %= c
                level = lv
            lo, hi = fn.low, fn.high
            n_lo = self._count_fn(lo, eff) << (self._lvl(lo) - lv - 1)
            level = lv + 1
            if r < n_lo:
                bits <<= 1
                fn, neg = lo, eff
            else:
                r -= n_lo
                bits = (bits << 1) | 1
                fn, neg = hi, eff
            # Levels skipped between this node and the child are handled at the child.

    def header(self, r: int) -> dict[str, int]:
        return header_from_bits(self.bits(r))

    def _paths(self, fn, neg: int) -> int:
        """Paths to true of (fn, complemented by neg)."""
        if fn.level >= HEADER_BITS:
            return 1 if (int(fn) ^ neg) == self._true_id else 0
        _, _, p1, p0 = self.cache.regular(fn)
        return p0 if neg ^ fn.negated else p1

    def path_bits(self, r: int, rng: random.Random) -> int:
        """A header of the r-th disjoint cube of u (0 <= r < paths()), its free bits random:
        a uniform r gives every cube the same chance, however many headers it holds (the
        sibling of a /24 as often as the sibling of a /8)."""
        if not 0 <= r < self.paths():
            raise IndexError("path index out of range")
        fn, neg, level, bits = self.u, 0, 0, 0
        while True:
            lv = fn.level
            if lv >= HEADER_BITS:
                free = HEADER_BITS - level
                return (bits << free) | (rng.getrandbits(free) if free else 0)
            if lv > level:
                bits = (bits << (lv - level)) | rng.getrandbits(lv - level)
            eff = neg ^ fn.negated
            lo, hi = fn.low, fn.high
            n_lo = self._paths(lo, eff)
            level = lv + 1
            if r < n_lo:
                bits <<= 1
                fn, neg = lo, eff
            else:
                r -= n_lo
                bits = (bits << 1) | 1
                fn, neg = hi, eff

    def by_cube(self, rng: random.Random) -> dict[str, int] | None:
        """A header from a cube of u chosen uniformly (see path_bits); None when u is empty."""
        n = self.paths()
        return header_from_bits(self.path_bits(rng.randrange(n), rng)) if n else None

    def uniform(self, rng: random.Random) -> dict[str, int] | None:
        """One header of u, uniformly at random; None when u is empty."""
        if not self.total:
            return None
        return self.header(rng.randrange(self.total))

    def spread(self, rng: random.Random) -> Iterator[dict[str, int]]:
        """Endless headers of u, each uniform, together spread evenly (golden-ratio steps
        over the index r from a random start): any interval of the variable order of
        relative size L, such as a prefix of ipv4_dst, is hit after about 1/L headers
        rather than the geometric wait of independent draws."""
        n = self.total
        if not n:
            return
        step = (_GOLDEN_NUM * n) >> 128
        step = max(1, step)
        r = rng.randrange(n)
        while True:
            yield self.header(r)
            r = (r + step) % n
