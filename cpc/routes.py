"""The classes of a bulk load, cut from the routing entries' prefix trie.

Moving each element's action regions into the partition would first union every
entry's region per element and action: one BDD OR per entry, most of a 100k-entry
build. Routes (eth_type=IPv4 and an ipv4_dst prefix, nothing else) are taken together
instead. The distinct prefixes of all elements form one trie, and each of its cells (a
prefix minus the longer prefixes under it) is treated alike by every element: one walk
down the trie gives each cell its owners, and a class is the union of its cells. That
is one OR per distinct prefix in the network, not one per entry. The model then moves
the other entries' regions as usual (Model._bulk_add).
"""

from __future__ import annotations

from collections import defaultdict

from .fields import PREFIX_MASKS as _MASKS

ROUTE_TYPE = ("eth_type", 0x0800, 0xFFFF)


def is_route(fields: tuple[tuple[str, int, int], ...]) -> bool:
    """A match on eth_type=IPv4 and at most an ipv4_dst (fields are in model order)."""
    if len(fields) == 2:
        return fields[1] == ROUTE_TYPE and fields[0][0] == "ipv4_dst"
    return fields == (ROUTE_TYPE,)


def cut_route_classes(part, space, at: dict[tuple[int, int], list]) -> dict[int, object]:
    """Cut a fresh partition (one class, no owners) into the classes of the routes.

    at: (prefix length, value) -> [(element index, priority, -seq, action)], where the
    highest priority wins and then the lowest seq (the earlier entry), and action None is
    an entry that drops like the table-miss. Returns, per element, the headers that its
    routes match.
    """
    # Walk the trie in order (ancestors first): a cell's winners are its parent's, then
    # the entries at its own prefix where they rank higher.
    cells: dict[frozenset, list] = defaultdict(list)  # (element, action) pairs -> cells
    children: dict[tuple[int, int], list] = defaultdict(list)
    stack: list[tuple[tuple[int, int], dict]] = []
    for pfx in sorted(at, key=lambda p: (p[1], p[0])):
        plen, value = pfx
        while stack and (
            stack[-1][0][0] > plen or value & _MASKS[stack[-1][0][0]] != stack[-1][0][1]
        ):
            stack.pop()
        win = dict(stack[-1][1]) if stack else {}
        if stack:
            children[stack[-1][0]].append(pfx)
        for el, prio, nseq, act in at[pfx]:
            cur = win.get(el)
            if cur is None or (prio, nseq) > cur[:2]:
                win[el] = (prio, nseq, act)
        stack.append((pfx, win))
        cells[frozenset((el, w[2]) for el, w in win.items())].append(pfx)

    def cell(pfx):
        u = space.field_bdd("ipv4_dst", pfx[1], _MASKS[pfx[0]])
        under = children.get(pfx)
        if under:
            u = u & ~space.union([space.field_bdd("ipv4_dst", v, _MASKS[n]) for n, v in under])
        return u

    route_type = space.field_bdd(*ROUTE_TYPE)
    classes: dict[frozenset, list] = defaultdict(list)  # owners -> regions
    matched: dict[int, list] = defaultdict(list)  # element -> regions its routes match
    for pairs, pfxs in cells.items():
        u = space.union([cell(p) for p in pfxs]) & route_type
        if u == space.false:
            continue
        classes[frozenset((el, act) for el, act in pairs if act is not None)].append(u)
        for el, _ in pairs:
            matched[el].append(u)
    (first,) = part.bdd_of
    for owners, regions in classes.items():
        if owners:  # headers with no owner stay in the first class
            class_id = part.split(first, space.union(regions))
            for el, act in owners:
                part.set_owner(class_id, el, act)
    return {el: space.union(regions) for el, regions in matched.items()}
