"""Entries that overlap many others (an ACL line over any destination in a routing
table): one class move per pair of actions, and the new entry's region taken from the
entries above it. Checked against the reference data plane and a model built afresh."""

from __future__ import annotations

import random

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cpc import ofctl
from cpc.model import Model
from cpc.refdp import RefDataPlane
from cpc.rules import FlowMod
from cpc.topology import load_topology

TOPO = """\
switches:
  - {name: s1, dpid: 1, ports: [1, 2, 3, 4]}
edge: [s1:1, s1:2, s1:3, s1:4]
"""
ROUTES = 40  # more than an insert ORs piece by piece (cpc.tables._UNION_MAX)


def routes(rng: random.Random) -> list[str]:
    return [
        f"priority={rng.choice((24, 16))},ip,nw_dst=10.0.{i}.0/24,"
        f"actions=output:{rng.choice((1, 2, 3))}"
        for i in range(ROUTES)
    ]


def wide(rng: random.Random, priority: int) -> str:
    """An entry over every destination, cut by source, protocol or port."""
    cut = rng.choice(
        (
            f"tcp,tp_dst={rng.choice((22, 80))}",
            f"ip,nw_src={rng.choice(('192.168.0.0/16', '192.168.1.0/24'))}",
            f"udp,nw_src=192.168.0.0/16,tp_dst={rng.choice((53, 80))}",
            "ip,nw_dst=10.0.0.0/18",
        )
    )
    act = rng.choice(("drop", "output:4", "output:1"))
    return f"priority={priority},{cut},actions={act}"


def headers(rng: random.Random) -> list[dict]:
    out = []
    for _ in range(24):
        proto = rng.choice((6, 17))
        out.append(
            {
                "eth_type": 0x0800,
                "ip_proto": proto,
                "ipv4_dst": 0x0A000000 | rng.randrange(ROUTES + 2) << 8 | rng.randrange(256),
                "ipv4_src": rng.choice((0xC0A80001, 0xC0A80101, 0x01020304)),
                "tp_dst": rng.choice((22, 53, 80)),
            }
        )
    return out


def key(d):
    return (d.kind, d.egress, d.hops, d.verify_port, d.verify_rule)


def check(model: Model, topo, hdrs) -> None:
    ref = RefDataPlane(topo, model.entries(), model.groups())
    for ing in topo.edge_ports():
        for h in hdrs:
            want = ref.send(ing, h)
            assert sorted(map(key, model.trace(ing, h))) == sorted(map(key, want)), (ing, h)
            for d in want:
                if d.kind == "egress":
                    assert model.allows(d.egress, h, d.verify_port, d.verify_rule)
    fresh = Model(topo)
    fresh.add_entries(model.entries())
    assert fresh.class_count() == model.class_count()


def delete_strict(e) -> FlowMod:
    return FlowMod("delete_strict", e.dpid, e.table, e.priority, e.match)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2**32 - 1), st.booleans())
def test_wide_entries_over_many_routes(tmp_path_factory, seed, batched):
    path = tmp_path_factory.mktemp("t") / "t.yaml"
    path.write_text(TOPO)
    topo = load_topology(path)
    rng = random.Random(seed)
    hdrs = headers(rng)
    model = Model(topo)
    model.add_entries([])
    for text in routes(rng):
        model.add_flow(1, text)
    # Unique priorities among the wide entries: overlapping ties are undefined in OpenFlow.
    prios = rng.sample(range(100, 200), 6) + rng.sample(range(1, 16), 2)
    steps = [ofctl.parse_flow(wide(rng, p), 1, "add") for p in prios]
    if batched:
        model.apply_many(steps)
    else:
        for fm in steps:
            model.apply(fm)
    check(model, topo, hdrs)
    # Take them away again in a random order, with a route or two changing between.
    wides = [e for e in model.entries() if e.priority not in (16, 24)]
    rng.shuffle(wides)
    for e in wides[:4]:
        model.apply(delete_strict(e))
        if rng.random() < 0.5:
            model.add_flow(1, routes(rng)[rng.randrange(ROUTES)])
    check(model, topo, hdrs)
    for e in wides[4:]:
        model.apply(delete_strict(e))
    check(model, topo, hdrs)
