"""cpc.agents: the lint for entries whose effect differs between OpenFlow agents, against
brute force (every pair of entries, and packets drawn from the matches' values)."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from cpc import agents
from cpc.flowmod import check_actions
from cpc.rules import FlowEntry, Group, Instructions, Match, ModelError

IP = {"eth_type": (0x0800, 0xFFFF)}


def entry(prio, values, acts=(("output", 1),), table=0, in_port=None, write=(), source=""):
    return FlowEntry(
        1,
        table,
        prio,
        Match.build(dict(values), in_port),
        Instructions(tuple(acts), tuple(write)),
        source=source,
    )


matches = st.fixed_dictionaries(
    {},
    optional={
        "ipv4_dst": st.sampled_from(
            [(0x0A000000, 0xFF000000), (0x0A000001, 0xFFFFFFFF), (0x0A010000, 0xFFFF0000)]
        ),
        "ip_proto": st.sampled_from([(6, 0xFF), (17, 0xFF)]),
        "eth_dst": st.sampled_from([(1, 0xFFFFFFFFFFFF), (0, 0xFFFFFF000000)]),
    },
)
entries_st = st.lists(
    st.tuples(
        st.sampled_from([10, 20]),
        matches,
        st.sampled_from([1, 2]),
        st.sampled_from([None, 1, 2]),
        st.sampled_from([0, 1]),
    ),
    max_size=8,
)


@settings(max_examples=200, deadline=None)
@given(entries_st)
def test_equal_priority_overlaps_match_brute_force(spec):
    es = [
        entry(p, {**IP, **m}, (("output", out),), table=t, in_port=port)
        for p, m, out, port, t in spec
    ]
    # Two entries with the same key are one entry on a switch: keep the last.
    seen = {}
    for e in es:
        seen[(e.table, e.priority, e.match)] = e
    es = [e for e in es if seen[(e.table, e.priority, e.match)] is e]
    want = {
        (id(a), id(b))
        for a, b in itertools.combinations(es, 2)
        if a.table == b.table
        and a.priority == b.priority
        and a.instructions != b.instructions
        and a.match.overlaps(b.match)
    }
    got = {(id(a), id(b)) for a, b in agents.equal_priority_overlaps(es)}
    assert got == want


def test_lint_names_each_kind():
    es = [
        entry(10, {**IP, "ipv4_dst": (0x0A000000, 0xFF000000)}, source="r:1"),
        entry(10, {**IP, "ip_proto": (6, 0xFF)}, (("output", 2),), source="r:2"),
        entry(10, {**IP, "ip_proto": (17, 0xFF)}, (("output", 1),), source="r:3"),  # same as r:1
        entry(5, {}, (("set_field", "ipv4_dst", 1), ("output", 1)), source="r:4"),
        entry(5, {**IP}, (), write=(("set_field", "eth_dst", 1), ("pop_vlan",)), source="r:5"),
    ]
    groups = [Group(1, 3, "all", (), source="g:1")]
    got = {(w.kind, w.source) for w in agents.lint(es, groups)}
    assert got == {
        ("equal-priority-overlap", "r:2"),  # against r:1; r:3 has r:1's instructions and
        ("equal-priority-overlap", "r:5"),  # does not overlap r:2; r:5 against r:4
        ("set-field-prerequisite", "r:4"),
        ("action-set-order", "r:5"),
        ("empty-group", "g:1"),
    }
    assert all(k in agents.DIVERGENCES for k, _ in got)


def test_no_warning_for_portable_entries():
    es = [
        entry(10, {**IP, "ipv4_dst": (0x0A000000, 0xFFFFFF00)}),
        entry(10, {**IP, "ipv4_dst": (0x0A000100, 0xFFFFFF00)}, (("output", 3),)),
        entry(20, {**IP, "ipv4_dst": (0x0A000000, 0xFF000000)}, (("output", 2),)),
        entry(
            10, {**IP, "ip_proto": (6, 0xFF)}, write=(("pop_vlan",), ("set_field", "eth_dst", 1))
        ),
    ]
    assert agents.lint(es[:3]) == []
    # The last overlaps both /24s at priority 10 with other instructions.
    assert [w.kind for w in agents.lint(es)] == ["equal-priority-overlap"] * 2


def test_check_actions_refuses_what_open_vswitch_refuses():
    def refused(e, groups=()):
        try:
            check_actions(e, lambda g: g in groups)
        except ModelError as ex:
            return str(ex)
        return None

    assert "a VLAN tag" in refused(entry(1, IP, (("set_field", "vlan_vid", 0x1005),)))
    assert refused(entry(1, IP, (("push_vlan",), ("set_field", "vlan_vid", 0x1005)))) is None
    assert "pop_vlan" in refused(entry(1, IP, (("pop_vlan",),)))
    assert refused(entry(1, IP, (), write=(("pop_vlan",),))) is None  # the action set may
    assert "eth_type" in refused(entry(1, {}, (("set_field", "ipv4_src", 1),)))
    assert "ip_proto" in refused(entry(1, IP, (("set_field", "tp_dst", 80),)))
    assert "no port" in refused(entry(1, IP, (("output", 0xFFFFFF00),)))
    assert refused(entry(1, IP, (("output", 0xFFFFFFFC),))) is None  # ALL
    assert "group 4" in refused(entry(1, IP, (("group", 4),)))
    assert refused(entry(1, IP, (("group", 4),)), groups=(4,)) is None


def _model(entries):
    from cpc.model import Model
    from cpc.topology import Topology

    topo = Topology()
    topo.add_switch(1, "s1", (1, 2, 3))
    for p in (1, 2, 3):
        topo.add_edge((1, p))
    m = Model(topo)
    m.add_entries(entries)
    return m


@settings(max_examples=60, deadline=None)
@given(entries_st)
def test_model_ties_match_brute_force(spec):
    es, seen = [], set()
    for p, m, out, port, t in spec:
        e = entry(p, {**IP, **m}, (("output", out),), table=t, in_port=port)
        if (e.table, e.priority, e.match) not in seen:
            seen.add((e.table, e.priority, e.match))
            es.append(e)
    model = _model(es)
    for e in es:
        want = {
            id(o)
            for o in es
            if o is not e
            and o.table == e.table
            and o.priority == e.priority
            and o.instructions != e.instructions
            and o.match.overlaps(e.match)
        }
        assert {id(o) for o in model.ties(e)} == want


def test_proxy_warns_of_agent_dependent_flowmods(caplog):
    from cpc.rules import FlowMod
    from pazzd.proxy import Proxy, ProxyConfig

    first = entry(10, {**IP, "ipv4_dst": (0x0A000000, 0xFF000000)})
    model = _model([first])
    proxy = Proxy(ProxyConfig(audit_delay=-1, audit_interval=0), model=model)
    try:
        ok = FlowMod(
            "add",
            1,
            0,
            10,
            Match.build({**IP, "ipv4_dst": (0x0B000000, 0xFF000000)}),
            Instructions((("output", 2),)),
        )
        tie = FlowMod(
            "add",
            1,
            0,
            10,
            Match.build({**IP, "ip_proto": (6, 0xFF)}),
            Instructions((("output", 2),)),
        )
        model.apply_many([ok, tie])
        with caplog.at_level("WARNING"):
            proxy.feed.agent_lint(model, [ok, tie])
        assert proxy.agent_warnings == 1
        assert "switch's choice" in caplog.text and "ip_proto=6" in caplog.text
    finally:
        proxy.store.close()
