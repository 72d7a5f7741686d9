"""A header set summarised for an operator: grouped by destination, each group as one
ovs-ofctl match (the narrowest that holds it) and the headers of that match it leaves
out, with counts in powers of two.

A BDD's own cubes split a set along the variable order (`10.0.10.0/24 minus one port`
becomes twenty cubes of port ranges); the summary instead finds, per destination, the
bits every header of the group shares (the group's hull, one match) and lists what of
the hull is missing as a few exception matches. Destinations whose headers agree on
everything else form one group, their prefixes collapsed, or written as a cover with its
holes (`10.0.0.0/8 except 10.0.1.0/24`) when that is shorter.
"""

from __future__ import annotations

import ipaddress
import math

from .fields import FIELD_NAMES, PREFIX_LENGTH, WIDTH, format_value
from .ofctl import format_match
from .rules import Match

__all__ = ["count_text", "summarize"]

MAX_DST_CUBES = 4096  # destination cubes looked at; beyond, the summary says it stopped
MAX_EXCEPT_COUNT = 1000  # exception matches counted for "N more"
OTHER_FIELDS = [f for f in FIELD_NAMES if f != "ipv4_dst"]


def count_text(n: int) -> str:
    """A header count an operator can read: exact below 10,000, else a power of two
    (`2^24`, or `≈2^23.6` when it is none)."""
    if n < 10_000:
        return str(n)
    k = n.bit_length() - 1
    if n == 1 << k:
        return f"2^{k}"
    return f"≈2^{math.log2(n):.1f}"


def _cube_match(cube: dict[str, tuple[int, int]], skip=()) -> str:
    fields = tuple((f, *cube[f]) for f in FIELD_NAMES if f in cube and f not in skip)
    return format_match(Match(fields, None)) or "any"


def _hull(space, u, fields) -> dict[str, tuple[int, int]]:
    """The bits of `fields` that every header of u has alike, as {field: (value, mask)}."""
    out: dict[str, tuple[int, int]] = {}
    level = 0
    for f in FIELD_NAMES:
        width = WIDTH[f]
        if f in fields:
            value = mask = 0
            for i in range(width):
                lit = space.bdd.var(space.header_names[level + i])
                shift = width - 1 - i
                if space.within(u, ~lit):
                    mask |= 1 << shift
                elif space.within(u, lit):
                    value |= 1 << shift
                    mask |= 1 << shift
            if mask:
                out[f] = (value, mask)
        level += width
    return out


MAX_SPLIT_BITS = 4  # a mask with up to this many holes is written as its 2^k prefixes


def _as_prefixes(value: int, mask: int) -> list[tuple[int, int]]:
    """A masked destination as prefixes: 10.0.1.0/255.255.251.0 is 10.0.1.0/24 and
    10.0.5.0/24. Left as it is when that takes more than 2^MAX_SPLIT_BITS prefixes."""
    if mask in PREFIX_LENGTH:
        return [(value, mask)]
    low = mask & -mask  # the prefix ends at the mask's lowest set bit
    full = (0xFFFFFFFF ^ (low - 1)) & 0xFFFFFFFF
    holes = [b for b in range(32) if full >> b & 1 and not mask >> b & 1]
    if len(holes) > MAX_SPLIT_BITS:
        return [(value, mask)]
    out = []
    for k in range(1 << len(holes)):
        v = value
        for i, b in enumerate(holes):
            v |= (k >> i & 1) << b
        out.append((v, full))
    return out


def _dst_text(dsts: list[tuple[int, int]], most: int) -> str:
    """Destinations (value, mask) as prefixes, collapsed, or as a cover and its holes."""
    dsts = [x for v, m in dsts for x in _as_prefixes(v, m)]
    if not all(m in PREFIX_LENGTH for _, m in dsts):
        return _listed([format_value("ipv4_dst", v, m) for v, m in dsts], most)
    nets = list(
        ipaddress.collapse_addresses(ipaddress.IPv4Network((v, PREFIX_LENGTH[m])) for v, m in dsts)
    )
    if len(nets) == 1:
        return str(nets[0])
    lo, hi = int(nets[0].network_address), int(nets[-1].broadcast_address)
    length = 32 - (lo ^ hi).bit_length()
    cover = ipaddress.IPv4Network((lo >> (32 - length) << (32 - length), length))
    holes = [cover]
    for n in nets:
        holes = [
            x
            for h in holes
            for x in (h.address_exclude(n) if n.subnet_of(h) else () if h.subnet_of(n) else [h])
        ]
    holes = list(ipaddress.collapse_addresses(holes))
    if len(holes) + 1 < len(nets):
        return f"{cover} except {_listed([str(h) for h in holes], most)}"
    return _listed([str(n) for n in nets], most)


def _listed(items: list[str], most: int) -> str:
    if len(items) <= most:
        return ", ".join(items)
    return f"{', '.join(items[:most])} and {len(items) - most} more"


def summarize(space, u, limit: int = 20, exceptions: int = 3) -> dict:
    """{"groups": [{"nw_dst", "headers", "match", "except", "more_except"}, ...] (at most
    `limit`, the largest first), "more_groups", "complete"}. `except` lists up to
    `exceptions` matches of headers the group's match holds and u does not; "complete" is
    False when the destinations were more than MAX_DST_CUBES (the groups then cover only
    the first ones)."""
    dsts = space.exist_fields(u, OTHER_FIELDS)
    groups: dict[object, list] = {}  # the headers beyond the destination -> destinations
    complete = True
    for n, cube in enumerate(space.cubes(dsts)):
        if n >= MAX_DST_CUBES:
            complete = False
            break
        dst = cube.get("ipv4_dst", (0, 0))
        d = space.match_bdd((("ipv4_dst", *dst),)) if dst[1] else space.true
        ud = u & d
        rest = space.exist_fields(ud, ["ipv4_dst"])
        # Alike beyond the destination (ud = d x rest): one group for all such d.
        key = rest if (rest & d) == ud else ud
        g = groups.setdefault(key, [space.false, []])
        g[0] = g[0] | ud
        g[1].append(dst)
    ranked = sorted(((space.count(p), p, ds) for p, ds in groups.values()), key=lambda g: -g[0])
    out = []
    for count, part, dst_list in ranked[:limit]:
        hull = _hull(space, part, OTHER_FIELDS)
        d_all = space.union(
            space.match_bdd((("ipv4_dst", *x),)) if x[1] else space.true for x in dst_list
        )
        hull_bdd = space.match_bdd(tuple((f, *hull[f]) for f in FIELD_NAMES if f in hull))
        missing = (hull_bdd & d_all) & ~part
        one_dst = dst_list[0] if len(dst_list) == 1 else None
        ex = [
            _cube_match(c, skip=("ipv4_dst",) if c.get("ipv4_dst") == one_dst else ())
            for c in space.cubes(missing, limit=exceptions + 1)
        ]
        more = 0
        if len(ex) > exceptions:
            more = sum(1 for _ in space.cubes(missing, limit=MAX_EXCEPT_COUNT)) - exceptions
            ex = ex[:exceptions]
        out.append(
            {
                "nw_dst": "any" if dst_list == [(0, 0)] else _dst_text(dst_list, 4),
                "headers": count,
                "match": _cube_match(hull),
                "except": ex,
                "more_except": more,
            }
        )
    return {"groups": out, "more_groups": max(0, len(ranked) - limit), "complete": complete}
