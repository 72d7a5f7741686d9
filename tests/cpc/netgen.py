"""Hypothesis strategies for small random networks and FlowMod sequences."""

from __future__ import annotations

from hypothesis import strategies as st

from cpc.rules import (
    OFPP_ALL,
    OFPP_CONTROLLER,
    OFPP_FLOOD,
    OFPP_IN_PORT,
    FlowMod,
    Group,
    Instructions,
    Match,
)
from cpc.topology import Topology

DSTS = [0x0A000000 + i for i in range(8)]  # 10.0.0.0 .. 10.0.0.7: small, so rules overlap


@st.composite
def networks(draw):
    n = draw(st.integers(2, 6))
    topo = Topology()
    for d in range(1, n + 1):
        topo.add_switch(d, f"s{d}", [1, 2, 3, 4])
    free = {d: [1, 2, 3, 4] for d in range(1, n + 1)}
    for d in range(2, n + 1):  # a random tree, then a few extra links
        peer = draw(st.integers(1, d - 1))
        if free[peer] and free[d]:
            topo.add_link((peer, free[peer].pop(0)), (d, free[d].pop(0)))
    for _ in range(draw(st.integers(0, 2))):
        a, b = draw(st.integers(1, n)), draw(st.integers(1, n))
        if a != b and free[a] and free[b]:
            topo.add_link((a, free[a].pop(0)), (b, free[b].pop(0)))
    for d in range(1, n + 1):
        for _ in range(draw(st.integers(1 if d in (1, n) else 0, 2))):
            if free[d]:
                topo.add_edge((d, free[d].pop(0)))
    return topo


@st.composite
def matches(draw, ports):
    values = {}
    if draw(st.booleans()):
        plen = draw(st.sampled_from([29, 30, 31, 32]))
        mask = (0xFFFFFFFF << (32 - plen)) & 0xFFFFFFFF
        values["ipv4_dst"] = (draw(st.sampled_from(DSTS)) & mask, mask)
    if draw(st.integers(0, 3)) == 0:
        values["ip_proto"] = (6, 0xFF)
        if draw(st.booleans()):
            values["tp_dst"] = (draw(st.sampled_from([22, 80, 443])), 0xFFFF)
    if values:
        values["eth_type"] = (0x0800, 0xFFFF)
    in_port = draw(st.sampled_from(ports)) if draw(st.integers(0, 4)) == 0 else None
    return Match.build(values, in_port)


@st.composite
def action_lists(draw, ports, groups, rewrite):
    acts = []
    for _ in range(draw(st.integers(0, 2))):
        kind = draw(st.integers(0, 9))
        if kind <= 5:
            acts.append(("output", draw(st.sampled_from(ports))))
        elif kind == 6:
            acts.append(
                (
                    "output",
                    draw(st.sampled_from([OFPP_FLOOD, OFPP_ALL, OFPP_IN_PORT, OFPP_CONTROLLER])),
                )
            )
        elif kind == 7 and groups:
            acts.append(("group", draw(st.sampled_from(groups))))
        elif kind >= 8 and rewrite:
            acts.insert(0, ("set_field", "ipv4_dst", draw(st.sampled_from(DSTS))))
    return tuple(acts)


@st.composite
def flowmods(draw, topo, ntables, rewrite=True, group_ids=(1, 2)):
    dpid = draw(st.sampled_from(sorted(topo.switches)))
    ports = topo.ports_of(dpid)
    table = draw(st.integers(0, ntables - 1))
    goto = None
    if table + 1 < ntables and draw(st.integers(0, 3)) == 0:
        goto = draw(st.integers(table + 1, ntables - 1))
    write = ()
    if draw(st.integers(0, 5)) == 0:
        write = (("output", draw(st.sampled_from(ports))),)
    ins = Instructions(draw(action_lists(ports, list(group_ids), rewrite)), write, False, goto)
    command = draw(
        st.sampled_from(["add"] * 6 + ["modify", "modify_strict", "delete", "delete_strict"])
    )
    fm = FlowMod(
        command=command,
        dpid=dpid,
        table=table,
        priority=draw(st.integers(1, 40)),
        match=draw(matches(ports)),
        instructions=ins,
        cookie=draw(st.sampled_from([0, 1, 2])),
        rule_id=draw(st.sampled_from([0, 0, 7])),
    )
    if command.startswith(("modify", "delete")):
        fm.cookie_mask = draw(st.sampled_from([0, 0, 3]))
    if command.startswith("delete") and draw(st.integers(0, 3)) == 0:
        fm.out_port = draw(st.sampled_from(ports))
    return fm


@st.composite
def groups_for(draw, topo):
    out = []
    for dpid in sorted(topo.switches):
        ports = topo.ports_of(dpid)
        for gid in (1, 2):
            if draw(st.booleans()):
                gtype = draw(st.sampled_from(["all", "select", "indirect"]))
                nb = 1 if gtype == "indirect" else draw(st.integers(1, 3))
                buckets = tuple((("output", draw(st.sampled_from(ports))),) for _ in range(nb))
                out.append(Group(dpid, gid, gtype, buckets))
    return out


@st.composite
def headers(draw):
    h = {"eth_type": 0x0800, "ipv4_dst": draw(st.sampled_from(DSTS + [0x0B000001]))}
    if draw(st.booleans()):
        h["ip_proto"] = 6
        h["tp_dst"] = draw(st.sampled_from([22, 80, 443, 8080]))
    return h


@st.composite
def scenarios(draw, rewrite=True):
    """(topology, groups, FlowMods, headers to check)."""
    topo = draw(networks())
    ntables = draw(st.integers(1, 3))
    groups = draw(groups_for(topo))
    fms = draw(st.lists(flowmods(topo, ntables, rewrite=rewrite), min_size=1, max_size=25))
    hs = draw(st.lists(headers(), min_size=1, max_size=6))
    return topo, groups, fms, hs
