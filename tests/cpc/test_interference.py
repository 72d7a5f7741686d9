"""Interference findings against a brute-force check of every header class at every in_port."""

from __future__ import annotations

import os

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from cpc.interference import App, Apps, InterferenceChecker, ekey
from cpc.model import Model
from cpc.rules import FlowMod, Instructions, ModelError
from cpc.topology import Topology
from fuzzer.hspace import is_valid
from tests.cpc.netgen import DSTS, matches

PORTS = [1, 2, 3, 4]
OTHER_PORT = 99  # an in_port no entry matches on
APPS = Apps([App("a", 0x1, 0xFF), App("b", 0x2, 0xFF), App("c", 0x3, 0xFF)])  # 0: unknown


def _universe() -> list[dict]:
    """One header of every class the generated matches can tell apart."""
    out = []
    for dst in [*DSTS, 0x0B000001]:
        out.append({"eth_type": 0x0806})
        out.append({"eth_type": 0x0800, "ipv4_dst": dst, "ip_proto": 17, "tp_dst": 1000})
        for tp in (22, 80, 443, 1000):
            out.append({"eth_type": 0x0800, "ipv4_dst": dst, "ip_proto": 6, "tp_dst": tp})
    return out


UNIVERSE = _universe()


def _topo() -> Topology:
    topo = Topology()
    topo.add_switch(1, "s1", PORTS)
    for p in PORTS:
        topo.add_edge((1, p))
    return topo


@st.composite
def entry_mods(draw, ntables):
    table = draw(st.integers(0, ntables - 1))
    kinds = ["out1", "out2", "drop"] + (["goto"] * 2 if table + 1 < ntables else [])
    kind = draw(st.sampled_from(kinds))
    if kind == "goto":
        ins = Instructions(goto=draw(st.integers(table + 1, ntables - 1)))
    elif kind == "drop":
        ins = Instructions()
    else:
        ins = Instructions((("output", int(kind[-1])),))
    return FlowMod(
        "add",
        1,
        table,
        draw(st.sampled_from([1, 2, 3, 5])),
        draw(matches(PORTS)),
        ins,
        cookie=draw(st.sampled_from([0x1, 0x2, 0x3, 0x0])),
    )


@st.composite
def scenarios(draw):
    ntables = draw(st.integers(1, 3))
    adds = draw(st.lists(entry_mods(ntables), min_size=1, max_size=14))
    ops = []
    for fm in adds:
        ops.append(fm)
        if draw(st.integers(0, 2)) == 0:  # delete an earlier one
            old = draw(st.sampled_from(adds[: adds.index(fm) + 1]))
            ops.append(FlowMod("delete_strict", 1, old.table, old.priority, old.match))
    batches = draw(st.lists(st.integers(1, 4), min_size=1, max_size=len(ops)))
    return ops, batches


def _apply_ref(entries: dict, fm: FlowMod) -> None:
    """The entry table after fm, oldest first (an add over an entry keeps its age)."""
    key = (fm.dpid, fm.table, fm.match.fields, fm.priority, fm.match.in_port)
    if fm.command == "add":
        entries[key] = fm.entry()
    else:
        entries.pop(key, None)


def _matching(entries, table, h, port):
    return [k for k, e in entries.items() if e.table == table and e.match.contains(h, port)]


def _levels(entries, ks):
    """(the top-priority entries, the entries at the next priority level)."""
    if not ks:
        return [], []
    top = max(entries[k].priority for k in ks)
    p1 = [k for k in ks if entries[k].priority == top]
    rest = [k for k in ks if entries[k].priority < top]
    if not rest:
        return p1, []
    nxt = max(entries[k].priority for k in rest)
    return p1, [k for k in rest if entries[k].priority == nxt]


def _walk(entries, h, port):
    """Every table h visits at this in_port: [(table, top entries, next level)]."""
    order = {k: i for i, k in enumerate(entries)}
    out, t = [], 0
    while t is not None:
        p1, p2 = _levels(entries, _matching(entries, t, h, port))
        if not p1:
            break
        out.append((t, p1, p2))
        t = entries[min(p1, key=order.get)].instructions.goto
    return out


def oracle(entries: dict) -> dict:
    """{(a, b): relation}, by evaluating every header class at every in_port."""
    owner = {k: APPS.owner(e.cookie) for k, e in entries.items()}
    ports = sorted({e.match.in_port for e in entries.values()} - {None})
    over, same, effect, cross = {}, {}, set(), set()
    for port in [OTHER_PORT, *ports]:
        for h in UNIVERSE:
            for _t, p1, p2 in _walk(entries, h, port):
                if len(p1) > 1:
                    for i, a in enumerate(p1):
                        for b in p1[i + 1 :]:
                            if owner[a] != owner[b]:
                                pair = tuple(sorted((a, b), key=repr))
                                same[pair] = entries[a].instructions != entries[b].instructions
                    continue
                (a,) = p1
                effect.add(a)
                for b in p2:
                    if owner[a] != owner[b]:
                        over[(a, b)] = entries[a].instructions != entries[b].instructions
                for s in p2:
                    t2 = entries[s].instructions.goto
                    if t2 is None or t2 == entries[a].instructions.goto:
                        continue
                    q1, _ = _levels(entries, _matching(entries, t2, h, port))
                    if len(q1) == 1 and owner[q1[0]] != owner[a]:
                        cross.add((a, q1[0]))
    out = {}
    for (a, b), conflict in over.items():
        rel = "redundancy" if not conflict else "partial_override" if b in effect else "shadowing"
        out[(a, b)] = rel
    for pair, conflict in same.items():
        out[pair] = "same_priority" if conflict else "redundancy"
    for pair in cross:
        out[pair] = "cross_table"
    return out


def _found(checker) -> dict:
    out = {}
    for f in checker.findings.values():
        a, b = f.entries
        if a[3] == b[3] and a[1] == b[1]:
            a, b = sorted((a, b), key=repr)
        out[(a, b)] = f.relation
    return out


def _check_witness(entries, f) -> None:
    h, port = f.witness, OTHER_PORT if f.in_port is None else f.in_port
    assert is_valid(h), f
    order = {k: i for i, k in enumerate(entries)}
    a, b = f.entries
    walk = {t: (p1, p2) for t, p1, p2 in _walk(entries, h, port)}
    if f.relation == "cross_table":
        assert walk[a[1]][0] == [a], f
        q1, _ = _levels(entries, _matching(entries, b[1], h, port))
        assert q1 == [b], f
        return
    p1, p2 = walk[a[1]]
    assert a in p1 and (b in p1 or b in p2), f
    picked = min(p1, key=order.get)
    assert {"a": a, "b": b}.get(f.winner) == (picked if picked in (a, b) else None), f


@settings(max_examples=int(os.environ.get("PAZZ_EXAMPLES", 300)), deadline=None)
@given(scenarios())
def test_findings_match_brute_force(sc):
    ops, batches = sc
    model = Model(_topo())
    checker = InterferenceChecker(model, APPS)
    checker.attach()
    entries: dict = {}
    i = 0
    for n in batches + [len(ops)]:
        chunk, i = ops[i : i + n], i + n
        if not chunk:
            break
        _, errors = model.apply_many(chunk)
        assert not errors
        for fm in chunk:
            _apply_ref(entries, fm)
    expected = oracle(entries)
    for rel in set(expected.values()):
        event(rel)
    assert _found(checker) == expected
    for f in checker.findings.values():
        _check_witness(entries, f)
    fresh = InterferenceChecker(model, APPS)
    fresh.scan()
    assert _found(fresh) == expected
    # Drained: what is open is what was reported open and not resolved since.
    opened, resolved = checker.drain()
    assert {f.key for f in opened} <= set(checker.findings)
    assert not set(resolved) & set(checker.findings)


def test_drain_reports_open_and_resolve():
    model = Model(_topo())
    checker = InterferenceChecker(model, APPS)
    checker.attach()
    ip = {"eth_type": (0x0800, 0xFFFF)}
    from cpc.rules import Match

    route = Match.build({**ip, "ipv4_dst": (0x0A000000, 0xFFFFFF00)})
    acl = Match.build({**ip, "ipv4_dst": (0x0A000001, 0xFFFFFFFF)})
    model.apply(FlowMod("add", 1, 0, 10, route, Instructions((("output", 1),)), cookie=1))
    model.apply(FlowMod("add", 1, 0, 20, acl, Instructions(), cookie=2))
    opened, resolved = checker.drain()
    assert [f.relation for f in opened] == ["partial_override"] and not resolved
    (f,) = opened
    assert (f.a.owner, f.b.owner, f.winner) == ("b", "a", "a")
    assert f.witness["ipv4_dst"] == 0x0A000001
    model.apply(FlowMod("delete_strict", 1, 0, 20, acl))
    assert checker.drain() == ([], [f.key])
    assert ekey(model.entries()[0]) in {k for k in checker._entries}


def test_apps_errors_name_the_field():
    with pytest.raises(ModelError, match=r"apps\[1\]\.name"):
        Apps([App("a", 1, 0xFF), App("a", 2, 0xFF)])
    with pytest.raises(ModelError, match=r"apps\[0\]\.cookie"):
        Apps([App("a", 0x100, 0xFF)])
    with pytest.raises(ModelError, match=r"apps\[0\]\.mask"):
        Apps([App("a", 0, -1)])
    with pytest.raises(ModelError, match=r"apps\[0\]\.name"):
        Apps([App("unknown", 0, 1)])
    assert APPS.owner(0x102) == "b" and APPS.owner(0) == "unknown"


def test_a_delete_uncovers_the_pair_it_hid():
    from cpc.rules import Match

    model = Model(_topo())
    checker = InterferenceChecker(model, APPS)
    checker.attach()
    ip = {"eth_type": (0x0800, 0xFFFF)}
    wide = Match.build(ip)
    host = Match.build({**ip, "ipv4_dst": (0x0A000001, 0xFFFFFFFF)})
    model.apply(FlowMod("add", 1, 0, 1, wide, Instructions((("output", 1),)), cookie=1))
    model.apply(FlowMod("add", 1, 0, 3, wide, Instructions((("output", 3),)), cookie=1))
    model.apply(FlowMod("add", 1, 0, 2, host, Instructions((("output", 2),)), cookie=2))
    # a's priority-3 entry hides both others: b's entry against it is shadowing, and b's
    # entry against a's priority-1 entry is no finding (no header has one above the other).
    assert sorted(f.relation for f in checker.findings.values()) == ["shadowing"]
    model.apply(FlowMod("delete_strict", 1, 0, 3, wide))
    (f,) = checker.findings.values()
    assert (f.relation, f.a.priority, f.b.priority) == ("partial_override", 2, 1)
