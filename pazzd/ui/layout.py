"""Where each switch and host of a topology is drawn: deterministic, no randomness.

- ``tiers``: when the switches with edge ports (hosts) and the hop distance from them
  give layers that the links join (a fat-tree, leaf-spine, a tree): the edge tier at the
  bottom with its hosts below, each tier above it in a row, rows ordered by barycentre
  sweeps that keep the order with the fewest link crossings.
- ``stress``: otherwise (a grid, a ring, a random mesh; every switch may have hosts), a
  stress majorization of the hop distances (Gansner, Koren and North, 2004) from a
  classical MDS start, turned so that the links lie as close to the axes as they can (a
  grid comes out as a grid). Hosts go where their switch has room, away from its links.
- ``rows``: more than STRESS_MAX switches: rows in name order (readable enough to find a
  switch; the stress layout is quadratic per sweep in pure Python).
"""

from __future__ import annotations

import math
import re
from collections import deque
from dataclasses import dataclass

from cpc.results import Port
from cpc.topology import Topology

__all__ = ["Layout", "crossings", "layout"]

SPACING = 120.0  # between neighbouring switches
HOST_GAP = 62.0  # from a switch to its hosts
HOST_SPACING = 44.0  # between the hosts of one switch (in a row)
HOST_FAN = 0.45  # radians between the hosts of one switch (around it)
MARGIN = 50.0
BOX_W, BOX_H = 62.0, 30.0  # a switch's box as drawn (pazzd.ui.svg)
BOX_GAP = 6.0  # at least this much between two boxes
STRESS_MAX = 150
MAX_SAME_TIER = 0.25  # links inside a tier (of all links) beyond which tiers read badly


@dataclass
class Layout:
    kind: str  # "tiers", "stress" or "rows"
    switches: dict[int, tuple[float, float]]
    hosts: dict[Port, tuple[float, float]]
    width: float
    height: float


def natural_key(name: str) -> tuple:
    """s2 before s10."""
    # ASCII digits only: str.isdigit and \d also take '²' and other digits int() refuses
    return tuple(
        (0, int(t), "") if t.isascii() and t.isdigit() else (1, 0, t)
        for t in re.split(r"([0-9]+)", name)
    )


def _adjacency(topo: Topology) -> dict[int, set[int]]:
    adj: dict[int, set[int]] = {d: set() for d in topo.switches}
    for (a, _), (b, _) in topo.links.items():
        if a != b:
            adj[a].add(b)
    return adj


def _bfs(adj: dict[int, set[int]], sources) -> dict[int, int]:
    dist = dict.fromkeys(sources, 0)
    q = deque(dist)
    while q:
        u = q.popleft()
        for v in adj[u]:
            if v not in dist:
                dist[v] = dist[u] + 1
                q.append(v)
    return dist


def layout(topo: Topology) -> Layout:
    names = {d: s.name for d, s in topo.switches.items()}
    order = sorted(topo.switches, key=lambda d: (natural_key(names[d]), d))
    adj = _adjacency(topo)
    hosts_of: dict[int, list[Port]] = {}
    for p in sorted(topo.edges):
        hosts_of.setdefault(p[0], []).append(p)
    tiers = _tiers(adj, order, hosts_of)
    if tiers is not None:
        sw, hs = _tiered(adj, order, tiers, hosts_of)
        kind = "tiers"
    elif len(order) <= STRESS_MAX:
        sw = _separate(_stress(adj, order), order)
        hs = _hosts_around(sw, adj, hosts_of)
        kind = "stress"
    else:
        cols = math.ceil(math.sqrt(len(order)))
        sw = {d: ((i % cols) * SPACING, (i // cols) * SPACING) for i, d in enumerate(order)}
        hs = _hosts_around(sw, adj, hosts_of)
        kind = "rows"
    return _fit(kind, sw, hs)


def _separate(sw: dict, order: list[int], rounds: int = 100) -> dict:
    """Push overlapping boxes apart along the axis where they overlap least, until none
    overlaps (a stress layout can put two switches of a dense part closer than a box)."""
    pos = {d: list(sw[d]) for d in order}
    need_x, need_y = BOX_W + BOX_GAP, BOX_H + BOX_GAP
    for _ in range(rounds):
        moved = False
        for i, a in enumerate(order):
            for b in order[i + 1 :]:
                pa, pb = pos[a], pos[b]
                dx, dy = pb[0] - pa[0], pb[1] - pa[1]
                ox, oy = need_x - abs(dx), need_y - abs(dy)
                if ox <= 0 or oy <= 0:
                    continue
                moved = True
                if ox / need_x <= oy / need_y:
                    k = (ox / 2 + 0.5) * (1 if dx >= 0 else -1)
                    pa[0] -= k
                    pb[0] += k
                else:
                    k = (oy / 2 + 0.5) * (1 if dy >= 0 else -1)
                    pa[1] -= k
                    pb[1] += k
        if not moved:
            break
    return {d: (p[0], p[1]) for d, p in pos.items()}


# --- tiers -----------------------------------------------------------------------------------
def _tiers(adj, order, hosts_of) -> dict[int, int] | None:
    """Tier = hops from the nearest switch with hosts; None when that gives no layering
    (one tier, a switch no host reaches, links skipping a tier, too many inside a tier)."""
    if not hosts_of:
        return None
    tier = _bfs(adj, [d for d in order if d in hosts_of])
    if len(tier) < len(order) or max(tier.values()) == 0:
        return None
    links = same = 0
    for a in order:
        for b in adj[a]:
            if a < b:
                links += 1
                gap = abs(tier[a] - tier[b])
                if gap > 1:
                    return None
                same += gap == 0
    if same > MAX_SAME_TIER * links:
        return None
    return tier


def crossings(upper: list[int], lower: list[int], adj) -> int:
    """Link crossings between two rows drawn in these orders."""
    pu = {d: i for i, d in enumerate(upper)}
    pl = {d: i for i, d in enumerate(lower)}
    segs = [(pu[a], pl[b]) for a in upper for b in adj[a] if b in pl]
    n = 0
    for i in range(len(segs)):
        a1, b1 = segs[i]
        for a2, b2 in segs[i + 1 :]:
            n += (a1 - a2) * (b1 - b2) < 0
    return n


def _total_crossings(rows, adj) -> int:
    return sum(crossings(rows[t + 1], rows[t], adj) for t in range(len(rows) - 1))


def _sweep(rows, adj, t: int, ref: int) -> None:
    """Order row t by the mean position of each switch's neighbours in row ref (stable:
    a switch without any keeps its place among equals)."""
    pos = {d: i for i, d in enumerate(rows[ref])}
    cur = {d: i for i, d in enumerate(rows[t])}

    def bary(d):
        ps = [pos[v] for v in adj[d] if v in pos]
        return sum(ps) / len(ps) if ps else cur[d]

    rows[t] = sorted(rows[t], key=lambda d: (bary(d), cur[d]))


def _tiered(adj, order, tier, hosts_of):
    top = max(tier.values())
    rows = [[d for d in order if tier[d] == t] for t in range(top + 1)]
    best, best_n = [list(r) for r in rows], _total_crossings(rows, adj)
    if sum(len(adj[d]) for d in order) <= 4000:  # crossing counts are quadratic in links
        for _ in range(6):
            for t in range(top - 1, -1, -1):
                _sweep(rows, adj, t, t + 1)
            for t in range(1, top + 1):
                _sweep(rows, adj, t, t - 1)
            n = _total_crossings(rows, adj)
            if n < best_n:
                best, best_n = [list(r) for r in rows], n
    rows = best
    most_hosts = max((len(h) for h in hosts_of.values()), default=0)
    step = max(SPACING, most_hosts * HOST_SPACING + 30.0)
    sw, hs = {}, {}
    for t, row in enumerate(rows):
        y = (top - t) * SPACING * 1.1
        for i, d in enumerate(row):
            sw[d] = ((i - (len(row) - 1) / 2) * step, y)
    for d, ports in hosts_of.items():
        x, y = sw[d]
        for j, p in enumerate(ports):
            hs[p] = (x + (j - (len(ports) - 1) / 2) * HOST_SPACING, y + HOST_GAP)
    return sw, hs


# --- stress ----------------------------------------------------------------------------------
def _distances(adj, order) -> list[list[float]]:
    n = len(order)
    rows = []
    for d in order:
        dist = _bfs(adj, [d])
        rows.append([float(dist[v]) if v in dist else math.inf for v in order])
    finite = [x for r in rows for x in r if x != math.inf]
    far = (max(finite) if finite else 1.0) + 1.0
    return [[far if rows[i][j] == math.inf else rows[i][j] for j in range(n)] for i in range(n)]


def _mds(dist) -> list[list[float]]:
    """Classical MDS: the top two eigenvectors of the double-centred squared distances,
    by power iteration from fixed start vectors (deterministic)."""
    n = len(dist)
    sq = [[x * x for x in r] for r in dist]
    rmean = [sum(r) / n for r in sq]
    tmean = sum(rmean) / n
    b = [[-0.5 * (sq[i][j] - rmean[i] - rmean[j] + tmean) for j in range(n)] for i in range(n)]
    axes: list[list[float]] = []
    for k in range(2):
        v = [math.cos(1.0 + i * (1.7 + k)) for i in range(n)]
        lam = 0.0
        for _ in range(200):
            w = [sum(b[i][j] * v[j] for j in range(n)) for i in range(n)]
            for u in axes:  # deflate: orthogonal to the eigenvector found first
                c = sum(a * x for a, x in zip(u, w, strict=True))
                w = [a - c * x for a, x in zip(w, u, strict=True)]
            lam = math.sqrt(sum(x * x for x in w))
            if lam < 1e-12:
                break
            v = [x / lam for x in w]
        axes.append(v)
        axes[-1] = [x * math.sqrt(lam) for x in v] if k else v
    # axes[0] is still a unit vector (the deflation needs it so): scale it last.
    lam0 = sum(axes[0][i] * sum(b[i][j] * axes[0][j] for j in range(n)) for i in range(n))
    return [[axes[0][i] * math.sqrt(max(lam0, 0.0)), axes[1][i]] for i in range(n)]


def _stress(adj, order) -> dict[int, tuple[float, float]]:
    n = len(order)
    if n == 1:
        return {order[0]: (0.0, 0.0)}
    dist = _distances(adj, order)
    pos = _mds(dist)
    if max(abs(c) for p in pos for c in p) < 1e-9:  # degenerate: start on a circle
        pos = [[math.cos(2 * math.pi * i / n), math.sin(2 * math.pi * i / n)] for i in range(n)]
    for _ in range(300):
        moved = 0.0
        for i in range(n):
            sx = sy = sw = 0.0
            xi, yi = pos[i]
            for j in range(n):
                if i == j:
                    continue
                d = dist[i][j]
                w = 1.0 / (d * d)
                dx, dy = xi - pos[j][0], yi - pos[j][1]
                r = math.hypot(dx, dy) or 1e-9
                sx += w * (pos[j][0] + d * dx / r)
                sy += w * (pos[j][1] + d * dy / r)
                sw += w
            nx, ny = sx / sw, sy / sw
            moved = max(moved, abs(nx - xi) + abs(ny - yi))
            pos[i] = [nx, ny]
        if moved < 1e-4:
            break
    pos = _align(
        pos,
        [(i, j) for i, a in enumerate(order) for j, b in enumerate(order) if b in adj[a] and i < j],
    )
    return {d: (pos[i][0] * SPACING, pos[i][1] * SPACING) for i, d in enumerate(order)}


def _align(pos, links):
    """Turn the drawing so that the links lie closest to the axes (0.5 degree steps)."""
    if not links:
        return pos

    def off_axis(theta: float) -> float:
        c, s = math.cos(theta), math.sin(theta)
        total = 0.0
        for i, j in links:
            dx, dy = pos[j][0] - pos[i][0], pos[j][1] - pos[i][1]
            rx, ry = c * dx - s * dy, s * dx + c * dy
            total += min(abs(rx), abs(ry)) / (math.hypot(rx, ry) or 1.0)
        return total

    best = min((k * math.pi / 360 for k in range(180)), key=lambda t: (round(off_axis(t), 9), t))
    c, s = math.cos(best), math.sin(best)
    out = [[c * x - s * y, s * x + c * y] for x, y in pos]
    cx = sum(p[0] for p in out) / len(out)
    cy = sum(p[1] for p in out) / len(out)
    out = [[x - cx, y - cy] for x, y in out]
    # Of the eight quarter turns and mirror images, the one that reads in name order
    # (left to right, top to bottom) the best: a grid named row by row comes out so.
    return min(
        (_dihedral(out, k) for k in range(8)),
        key=lambda p: sum(abs(r - i) for i, r in enumerate(_reading_ranks(p))),
    )


def _dihedral(pos, k: int):
    out = []
    for x, y in pos:
        for _ in range(k % 4):
            x, y = -y, x
        out.append([-x, y] if k >= 4 else [x, y])
    return out


def _reading_ranks(pos) -> list[int]:
    """Each point's rank in reading order (rows of half a spacing, then x)."""
    order = sorted(range(len(pos)), key=lambda i: (round(pos[i][1] * 2), pos[i][0], i))
    ranks = [0] * len(pos)
    for r, i in enumerate(order):
        ranks[i] = r
    return ranks


def _hosts_around(sw, adj, hosts_of) -> dict[Port, tuple[float, float]]:
    """Each switch's hosts on the side with the most room: away from its links, and
    outward from the drawing's centre when there is a choice."""
    cx = sum(x for x, _ in sw.values()) / len(sw)
    cy = sum(y for _, y in sw.values()) / len(sw)
    out = {}
    for d, ports in hosts_of.items():
        x, y = sw[d]
        links = [math.atan2(sw[v][1] - y, sw[v][0] - x) for v in adj[d]]
        outward = math.atan2(y - cy, x - cx) if math.hypot(x - cx, y - cy) > 1 else math.pi / 2
        fan = [(j - (len(ports) - 1) / 2) * HOST_FAN for j in range(len(ports))]
        a = max(
            (k * math.pi / 12 for k in range(24)),
            key=lambda a, links=links, fan=fan, outward=outward: _host_score(
                a, links, fan, outward
            ),
        )
        for p, f in zip(ports, fan, strict=True):
            out[p] = (x + HOST_GAP * math.cos(a + f), y + HOST_GAP * math.sin(a + f))
    return out


def _host_score(a: float, links: list[float], fan: list[float], outward: float) -> tuple:
    """Room between the hosts fanned out at angle a and the switch's links; then nearness
    to the outward direction."""
    room = min((_angle_gap(a + f, b) for b in links for f in fan), default=math.pi)
    return (round(room, 3), -_angle_gap(a, outward))


def _angle_gap(a: float, b: float) -> float:
    d = abs(a - b) % (2 * math.pi)
    return min(d, 2 * math.pi - d)


def _fit(kind, sw, hs) -> Layout:
    pts = list(sw.values()) + list(hs.values())
    x0 = min(x for x, _ in pts) - MARGIN
    y0 = min(y for _, y in pts) - MARGIN
    x1 = max(x for x, _ in pts) + MARGIN
    y1 = max(y for _, y in pts) + MARGIN

    def move(p):
        return (round(p[0] - x0, 1), round(p[1] - y0, 1))

    return Layout(
        kind,
        {d: move(p) for d, p in sw.items()},
        {p: move(q) for p, q in hs.items()},
        round(x1 - x0, 1),
        round(y1 - y0, 1),
    )
