"""Owners by cookie range or by controller connection (cpc.interference.Apps)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from cpc.interference import UNKNOWN, App, Apps, InterferenceChecker, connection_source
from cpc.model import Model
from cpc.rules import FlowMod, Instructions, Match
from cpc.topology import Topology

CONNS = ["c1", "c2", "c3"]


@st.composite
def app_lists(draw):
    apps, used = [], set()
    for i in range(draw(st.integers(0, 4))):
        ranged = draw(st.booleans())
        conn = draw(st.sampled_from([None, *(c for c in CONNS if c not in used)]))
        if not ranged and conn is None:
            conn = next((c for c in CONNS if c not in used), None)
            if conn is None:
                ranged = True
        if conn is not None:
            used.add(conn)
        mask = draw(st.sampled_from([0xF, 0xF0, 0xFF])) if ranged else None
        cookie = draw(st.integers(0, 0xFF)) & mask if ranged else None
        apps.append(App(f"app{i}", cookie, mask, conn))
    return apps


@given(app_lists(), st.integers(0, 0xFF), st.sampled_from(["", *CONNS, "other"]))
def test_owner_is_the_cookie_range_then_the_connection(apps, cookie, conn):
    owner = Apps(apps).owner(cookie, connection_source(conn))
    by_range = [a.name for a in apps if a.mask is not None and cookie & a.mask == a.cookie]
    by_conn = [a.name for a in apps if conn and a.controller == conn]
    assert owner == (by_range + by_conn + [UNKNOWN])[0]


def test_two_connections_same_cookie_interfere():
    topo = Topology()
    topo.add_switch(1, "s1", [1, 2])
    model = Model(topo)
    model.build()
    apps = Apps([App("router", controller="c1"), App("lb", controller="c2")])
    checker = InterferenceChecker(model, apps)
    checker.attach()
    ip = (0x0800, 0xFFFF)
    m24 = Match.build({"eth_type": ip, "ipv4_dst": (0x0A000300, 0xFFFFFF00)})
    m25 = Match.build({"eth_type": ip, "ipv4_dst": (0x0A000300, 0xFFFFFF80)})
    out = Instructions((("output", 1),))
    model.apply(FlowMod("add", 1, 0, 24, m24, out, source=connection_source("c1")))
    model.apply(
        FlowMod(
            "add", 1, 0, 24, m25, Instructions((("output", 2),)), source=connection_source("c2")
        )
    )
    (f,) = checker.findings.values()
    assert (f.relation, f.apps) == ("same_priority", "lb,router")
    # the same entries from one connection are no pair
    checker.apps = Apps([App("both", controller="c1"), App("lb", controller="c3")])
    checker.scan()
    assert (sorted(f.apps for f in checker.findings.values())) == ["both,unknown"]
