"""The model against an independent brute-force data plane, on random networks and FlowMods."""

from __future__ import annotations

import contextlib
import random
from collections import Counter

from hypothesis import HealthCheck, Phase, find, given, settings
from hypothesis import strategies as st

from cpc import ofctl
from cpc.index import Dropped
from cpc.model import Model
from cpc.refdp import RefDataPlane
from cpc.rules import FlowMod, Group, Instructions, Match, ModelError
from cpc.selecthash import group_bucket
from cpc.topology import Topology
from cpc.walk import WalkResult
from pazzdata.workloads import generate
from tests.cpc.netgen import DSTS, scenarios


def outcome_key(d):
    return (d.ingress, d.kind, d.egress, d.verify_port, d.verify_rule, d.hops, d.reason)


def unique_priorities(model, fm):
    """Equal-priority overlaps are undefined in OpenFlow; keep the random tables clear of them."""
    return not any(
        e.priority == fm.priority
        and e.table == fm.table
        and e.match.overlaps(fm.match)
        and e.match != fm.match
        for e in model.entries(fm.dpid)
    )


def apply_checking_updates(model: Model, fms, after_each=None) -> None:
    """Apply each FlowMod the model accepts (with unique priorities); after each, every pair
    whose S_i changed must be in Update.pairs and every egress whose S_e changed in
    Update.exits (corpora compared before and after); then call after_each()."""
    edges = model.topo.edge_ports()

    def corpora():
        return {
            (i, e): tuple(list(model.space.cubes(x)) for x in model.corpus(i, e))
            for i in edges
            for e in edges
            if i != e
        }

    before = corpora()
    for fm in fms:
        if fm.command == "add" and not unique_priorities(model, fm):
            continue
        try:
            upd = model.apply(fm)
        except ModelError:
            continue
        after = corpora()
        for pair, (s_i, s_e) in after.items():
            old_i, old_e = before[pair]
            if s_i != old_i:
                assert pair in upd.pairs, (fm, pair)
            if s_e != old_e:
                assert pair[1] in upd.exits, (fm, pair)
        before = after
        if after_each is not None:
            after_each()


def apply_flowmods(model: Model, fms, after_each=None) -> Model:
    """Apply each FlowMod the model accepts (with unique priorities), then after_each(its
    Update)."""
    for fm in fms:
        if fm.command == "add" and not unique_priorities(model, fm):
            continue
        try:
            upd = model.apply(fm)
        except ModelError:
            continue
        if after_each is not None:
            after_each(upd)
    return model


def run_flowmods(topo, groups, fms):
    model = Model(topo)
    model.add_entries([], groups)
    return apply_flowmods(model, fms)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_trace_equals_bruteforce(sc):
    topo, groups, fms, hs = sc
    model = run_flowmods(topo, groups, fms)
    ref = RefDataPlane(topo, model.entries(), model.groups())
    for h in hs:
        for ing in topo.edge_ports():
            got = Counter(outcome_key(d) for d in model.trace(ing, h))
            want = Counter(outcome_key(d) for d in ref.send(ing, h))
            assert got == want, (ing, h, got - want, want - got)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios(rewrite=False))
def test_expected_equals_bruteforce(sc):
    """Inverse reachability: every egress report the brute force produces, and nothing else."""
    topo, groups, fms, hs = sc
    model = run_flowmods(topo, groups, fms)
    ref = RefDataPlane(topo, model.entries(), model.groups())
    for h in hs:
        want: dict = {}
        for ing in topo.edge_ports():
            for d in ref.send(ing, h):
                if d.kind == "egress":
                    want.setdefault(d.egress, Counter())[
                        (d.ingress, d.hops, d.verify_port, d.verify_rule)
                    ] += 1
        for eg in topo.edge_ports():
            got = Counter(
                (x.ingress, x.hops, x.verify_port, x.verify_rule) for x in model.expected(eg, h)
            )
            assert got == want.get(eg, Counter()), (eg, h)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_incremental_equals_rebuilt(sc):
    topo, groups, fms, hs = sc
    inc = run_flowmods(topo, groups, fms)
    rebuilt = Model(topo)
    rebuilt.add_entries(inc.entries(), inc.groups())
    for h in hs:
        for ing in topo.edge_ports():
            a = Counter(outcome_key(d) for d in inc.trace(ing, h))
            b = Counter(outcome_key(d) for d in rebuilt.trace(ing, h))
            assert a == b
        for eg in topo.edge_ports():
            a = Counter((x.ingress, x.verify_port, x.verify_rule) for x in inc.expected(eg, h))
            b = Counter((x.ingress, x.verify_port, x.verify_rule) for x in rebuilt.expected(eg, h))
            assert a == b
        for ing in topo.edge_ports():
            for eg in topo.edge_ports():
                # Two BDD managers: compare the canonical cube lists.
                a, b = inc.reach(ing, eg), rebuilt.reach(ing, eg)
                assert list(inc.space.cubes(a)) == list(rebuilt.space.cubes(b))
    # Classes partition the header space: they are disjoint and cover it.
    space = inc.space
    total = space.false
    for u in inc.part.bdd_of.values():
        assert (total & u) == space.false
        total = total | u
    assert total == space.true


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_apply_many_equals_one_by_one(sc):
    topo, groups, fms, hs = sc
    one = Model(topo)
    one.add_entries([], groups)
    chosen = []  # the FlowMods run_flowmods would apply, one by one
    for fm in fms:
        if fm.command == "add" and not unique_priorities(one, fm):
            continue
        with contextlib.suppress(ModelError):
            one.apply(fm)
        chosen.append(fm)
    batch = Model(topo)
    batch.add_entries([], groups)
    batch.apply_many(chosen)
    # Classes are the maximal header sets with the same actions everywhere: both agree.
    assert one.class_count() == batch.class_count()
    for h in hs:
        for ing in topo.edge_ports():
            a = Counter(outcome_key(d) for d in one.trace(ing, h))
            b = Counter(outcome_key(d) for d in batch.trace(ing, h))
            assert a == b
        for eg in topo.edge_ports():
            a = Counter((x.ingress, x.verify_port, x.verify_rule) for x in one.expected(eg, h))
            b = Counter((x.ingress, x.verify_port, x.verify_rule) for x in batch.expected(eg, h))
            assert a == b


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_update_names_every_changed_pair_and_exit_switch(sc):
    """Update.pairs covers every pair whose S_i changed, Update.exits every egress whose S_e
    changed (the fuzzer re-plans only the ingresses of those)."""
    topo, groups, fms, _ = sc
    model = Model(topo)
    model.add_entries([], groups)
    apply_checking_updates(model, fms)


def test_drop_after_a_rewrite_names_the_dropping_entry(tmp_path):
    """A header rewritten in table 0 and dropped by an entry of table 1: the drop's hop
    lists both entries and their Verify_Rule (found by the property test above: the drop
    used to be recorded with the state from before the rewrite's copy)."""
    from cpc.topology import load_topology

    path = tmp_path / "t.yaml"
    path.write_text("switches:\n  - {name: s2, dpid: 2, ports: [1, 2]}\nedge: [s2:1, s2:2]\n")
    topo = load_topology(path)
    h = {"eth_type": 0x0800, "ipv4_dst": 0x0A000000, "ip_proto": 6, "tp_dst": 22}
    for first in ("mod_nw_dst:10.0.0.1,goto_table:1", "goto_table:1"):
        for second in ("drop", "output:1"):
            flows = [f"table=1,priority=1,tcp,actions={second}", f"priority=1,tcp,actions={first}"]
            model = Model(topo)
            model.add_entries([])
            for text in flows:
                model.add_flow(2, text)
            ref = RefDataPlane(topo, model.entries(), model.groups())
            got = Counter(outcome_key(d) for d in model.trace((2, 2), h))
            want = Counter(outcome_key(d) for d in ref.send((2, 2), h))
            assert got == want, (first, second)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios(rewrite=False), st.data())
def test_ports_down_and_up(sc, data):
    """Ports go down (edge or link), more FlowMods arrive, ports come back: expected()
    equals the brute force throughout (nothing enters or leaves at a down port), and the
    model ends as a rebuilt one."""
    topo, groups, fms, hs = sc
    half = len(fms) // 2
    model = run_flowmods(topo, groups, fms[:half])
    ports = sorted({*topo.edges, *topo.links})
    down = data.draw(st.lists(st.sampled_from(ports), max_size=3, unique=True))
    for dpid, port in down:
        model.port_status(dpid, port, up=False)
    for fm in fms[half:]:
        if fm.command == "add" and not unique_priorities(model, fm):
            continue
        with contextlib.suppress(ModelError):
            model.apply(fm)
    ref = RefDataPlane(topo, model.entries(), model.groups())  # reads topo.down too
    for h in hs:
        want: dict = {}
        for ing in topo.edge_ports():
            if ing in topo.down:
                continue  # nothing arrives at a down port
            for d in ref.send(ing, h):
                if d.kind == "egress":
                    want.setdefault(d.egress, Counter())[(d.ingress, d.hops, d.verify_port)] += 1
        for eg in topo.edge_ports():
            got = Counter((x.ingress, x.hops, x.verify_port) for x in model.expected(eg, h))
            assert got == want.get(eg, Counter()), (eg, h, down)
    for dpid, port in down:
        model.port_status(dpid, port, up=True)
    rebuilt = Model(topo)
    rebuilt.add_entries(model.entries(), model.groups())
    for ing in topo.edge_ports():
        for eg in topo.edge_ports():
            a, b = model.reach(ing, eg), rebuilt.reach(ing, eg)
            assert list(model.space.cubes(a)) == list(rebuilt.space.cubes(b))


def test_a_down_edge_port_sends_nothing_in():
    """Edge ports of a switch share their walk; one going down leaves the group, also when
    the switch forwards over a link (the shared walk never outputs to an edge port)."""
    topo = Topology()
    topo.add_switch(1, "s1", [1, 2, 3])
    topo.add_switch(2, "s2", [1, 2])
    topo.add_edge((1, 1))
    topo.add_edge((1, 3))
    topo.add_link((1, 2), (2, 1))
    topo.add_edge((2, 2))
    model = Model(topo)
    model.add_entries([])
    model.add_flow(1, "priority=1,actions=output:2")
    model.add_flow(2, "priority=1,actions=output:2")
    h = {"eth_type": 0x0800}
    assert {x.ingress for x in model.expected((2, 2), h)} == {(1, 1), (1, 3)}
    model.port_status(1, 1, up=False)
    model.add_flow(2, "priority=2,ip,nw_dst=10.0.0.1,actions=output:2")  # a partial re-walk
    ref = RefDataPlane(topo, model.entries(), model.groups())
    for hdr in (h, {"eth_type": 0x0800, "ipv4_dst": 0x0A000001}):
        want = {d.ingress for ing in ((1, 3),) for d in ref.send(ing, hdr)}
        assert {x.ingress for x in model.expected((2, 2), hdr)} == want == {(1, 3)}
    model.port_status(1, 1, up=True)
    assert {x.ingress for x in model.expected((2, 2), h)} == {(1, 1), (1, 3)}


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_class_walk_shortcut_equals_general_walk(sc):
    """Class walks take a shortcut where table 0 only outputs (Walker._suffix); every field
    of every outcome equals what the general walk (Walker._suffix_general) finds."""
    topo, groups, fms, _ = sc
    model = run_flowmods(topo, groups, fms)
    walker = model.walker

    def outcomes(walk, ap):
        return Counter(o._replace(final_hdr=None, src=None) for o in walk.expanded(ap))

    switches = sorted({p[0] for p in topo.edge_ports()})
    for ap in model.part.bdd_of:
        fast = walker.walk(ap, (), switches=switches)
        # this instance only (looked: whether the memo was searched, which it skips)
        walker._suffix = lambda res, st, local, *_: walker._suffix_general(res, st, local)
        try:
            general = walker.walk(ap, (), switches=switches)
        finally:
            del walker._suffix
        assert outcomes(fast, ap) == outcomes(general, ap)
        assert fast.pair_set() == general.pair_set()
        for node, _ in fast.entries:  # what partial re-walks test: every switch on a path
            assert node.dpids() == {h.dpid for o in node.expanded() for h in o.hops}


def memo_entries_in_python(walker, class_id, switches):
    """Walker._memo_entries (cpc/_walkc.c) as Python: every switch's stored entry node,
    shared by all its edge ingresses, or None. Reads what _edge_switch reads."""
    model, entries, groups = walker.m, [], set()
    for dpid in switches:
        group = walker._edge_groups.get(dpid)
        if dpid in model.port_dpids or group is None:
            return None
        res = WalkResult()
        entry = walker._memo_entry(res, dpid, class_id)
        if entry is None or not entry[1].isdisjoint(group[1]):
            return None
        entries.append(walker._entry_of(entry[0], group[0]))
        groups |= res.groups
    return entries, groups or None


@contextlib.contextmanager
def comparing_memo_entries(model: Model):
    """Within, every commit's re-walks of model enter switches through
    cpc._walkc.memo_entries where it answers, and it must answer exactly where the Python
    lookups do, with the same shared entries (the very objects) in the same order and the
    same groups. The Counter it gives counts the answers, and those with groups."""
    walker = model.walker
    native = walker._memo_entries
    answered = Counter()

    def both(class_id, switches):
        got = native(class_id, switches)
        if walker.xmemo is not None and not walker.topo.down:
            want = memo_entries_in_python(walker, class_id, switches)
            assert (got is None) == (want is None)
            if got is not None:
                assert len(got[0]) == len(want[0])
                assert all(a is b for a, b in zip(got[0], want[0], strict=True))
                assert (got[1] or None) == want[1]
                answered["answered"] += 1
                answered["with groups"] += bool(got[1])
        return got

    walker._memo_entries = both  # this instance only
    try:
        yield answered
    finally:
        del walker._memo_entries  # no cycle through the closure: the model's BDDs go with it


def replay_comparing_memo_entries(sc) -> Counter:
    topo, groups, fms, _ = sc
    model = Model(topo)
    model.add_entries([], groups)
    with comparing_memo_entries(model) as answered:
        apply_flowmods(model, fms)
    return answered


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_memo_entries_as_the_python_walk(sc):
    replay_comparing_memo_entries(sc)


def test_memo_entries_answer_on_some_random_network():
    # Else the test above would pass with the C path never taken.
    find(
        scenarios(),
        lambda sc: replay_comparing_memo_entries(sc)["answered"] > 0,
        settings=settings(max_examples=300, deadline=None, database=None, phases=[Phase.generate]),
    )


def test_memo_entries_take_the_groups_of_a_stored_node():
    """s1 -> s2 -> s4, out at s4. 10.0.0.2 comes to be forwarded at s2 as 10.0.0.1 is: its
    re-walk from s1 enters through the node stored for 10.0.0.1, which outputs through
    s1's group 1. (s3, apart, keeps the two in different classes.)"""
    topo = Topology()
    for dpid in (1, 2, 3, 4):
        topo.add_switch(dpid, f"s{dpid}", [1, 2, 3])
    topo.add_link((1, 3), (2, 1))
    topo.add_link((2, 2), (4, 1))
    for edge in [(1, 1), (1, 2), (3, 1), (3, 2), (4, 2)]:
        topo.add_edge(edge)
    model = Model(topo)
    model.add_entries([], [Group(1, 1, "all", ((("output", 3),),))])
    for dpid, flow in [  # s2's element last: a new element forgets the stored nodes
        (3, "priority=5,ip,nw_dst=10.0.0.1,actions=output:1"),
        (3, "priority=5,ip,nw_dst=10.0.0.2,actions=output:2"),
        (4, "priority=5,ip,nw_dst=10.0.0.0/30,actions=output:2"),
        (1, "priority=5,ip,nw_dst=10.0.0.1,actions=group:1"),
        (1, "priority=5,ip,nw_dst=10.0.0.2,actions=group:1"),
        (2, "priority=5,ip,nw_dst=10.0.0.1,actions=output:2"),
    ]:
        model.add_flow(dpid, flow)
    with comparing_memo_entries(model) as answered:
        model.add_flow(2, "priority=5,ip,nw_dst=10.0.0.2,actions=output:2")
    assert answered["with groups"] == 1
    h = {"eth_type": 0x0800, "ipv4_dst": 0x0A000002}
    assert [d.egress for d in model.trace((1, 1), h)] == [(4, 2)]


def pairs_pair_by_pair(pair_diffs) -> set:
    """Update.pairs as it is defined: every (ingress, egress) pair of one side of a diff and
    not of the other, each side's pairs spelled out."""
    out: set = set()
    for before, after in pair_diffs:
        if isinstance(before, Dropped):
            old = before.walk.pairs(before.whole, before.redo)
        else:
            old = before.pairs() if before is not None else frozenset()
        out |= old ^ (after.pairs() if after is not None else frozenset())
    return out


def replay_comparing_pairs(sc) -> Counter:
    """Replay a scenario, check_pairs of every update."""
    topo, groups, fms, _ = sc
    compared = Counter()
    run = Model(topo)
    run.add_entries([], groups)
    apply_flowmods(run, fms, lambda upd: compared.update(check_pairs(upd)))
    return compared


def check_pairs(upd) -> Counter:
    """Update.pairs must equal the pairs spelled out. Counts the switches of re-walks whose
    new entry node reaches egresses the old did not, and the other way round (what
    Update.pairs compares switch by switch)."""
    assert upd.pairs == pairs_pair_by_pair(upd.pair_diffs)
    compared = Counter()
    for before, after in upd.pair_diffs:
        if isinstance(before, Dropped) and after is not None:
            new = {id(e.ingresses): e.node for e in after.entries}
            for node, ivs in before.entries:
                now = new.get(id(ivs), node).egresses()
                compared["gained"] += bool(now - node.egresses())
                compared["lost"] += bool(node.egresses() - now)
    return compared


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_update_pairs_equal_the_pairs_spelled_out(sc):
    replay_comparing_pairs(sc)


def test_update_pairs_of_switches_that_gain_and_lose_an_egress():
    """s1 - s2 - s3 in a line, 10/8 forwarded towards s3. s3 forwarding it out of s3:2
    makes s1's and s2's edge ports gain that egress (their entry nodes cross s3); s3
    dropping it again makes them lose it."""
    topo = Topology()
    for dpid in (1, 2, 3):
        topo.add_switch(dpid, f"s{dpid}", [1, 2, 3])
    topo.add_link((1, 2), (2, 1))
    topo.add_link((2, 2), (3, 1))
    for edge in [(1, 1), (1, 3), (2, 3), (3, 2), (3, 3)]:
        topo.add_edge(edge)
    model = Model(topo)
    model.add_entries([])
    for dpid in (1, 2):
        check_pairs(model.add_flow(dpid, "priority=8,ip,nw_dst=10.0.0.0/8,actions=output:2"))
    gained = check_pairs(model.add_flow(3, "priority=8,ip,nw_dst=10.0.0.0/8,actions=output:2"))
    assert gained["gained"] == 2
    fm = ofctl.parse_flow("priority=8,ip,nw_dst=10.0.0.0/8", 3, "delete_strict")
    upd = model.apply(fm)
    assert check_pairs(upd)["lost"] == 2
    assert ((1, 1), (3, 2)) in upd.pairs and ((2, 3), (3, 2)) in upd.pairs


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios(rewrite=False), st.data())
def test_loops_equal_bruteforce(sc, data):
    """Model.loops() (which spells out only looping paths) holds, for each sample header's
    class, exactly the loops the brute force finds for that header; loop_count agrees.
    Each switch first sends one destination over a random link, so most networks loop."""
    topo, groups, fms, hs = sc
    dst = data.draw(st.sampled_from(DSTS))
    for dpid in sorted(topo.switches):
        ports = sorted(p for d, p in topo.links if d == dpid)
        if ports:
            m = Match.build({"eth_type": (0x0800, 0xFFFF), "ipv4_dst": (dst, 0xFFFFFFFF)})
            out = Instructions(apply=(("output", data.draw(st.sampled_from(ports))),))
            fms = [FlowMod("add", dpid, 0, 100, m, out), *fms]
    hs = [*hs, {"eth_type": 0x0800, "ipv4_dst": dst}]
    model = run_flowmods(topo, groups, fms)
    ref = RefDataPlane(topo, model.entries(), model.groups())
    loops = model.loops()
    assert model.loop_count() == len(loops)

    def key(d):  # class walks name elements in hops where the brute force names rules
        return (d.ingress, tuple((x.dpid, x.in_port, x.out_port) for x in d.hops), d.verify_port)

    for h in hs:
        cls = model.classify(h)
        got = Counter(key(lp.delivery) for lp in loops if lp.class_id == cls)
        want = Counter(
            key(d) for ing in topo.edge_ports() for d in ref.send(ing, h) if d.kind == "loop"
        )
        assert got == want, (h, got - want, want - got)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from([("grid", 3), ("grid", 4), ("fattree", 4)]),
    st.integers(0, 1 << 30),
    st.data(),
)
def test_expected_by_the_switch_hash_equals_bruteforce(net, seed, data):
    """ECMP networks (SELECT groups, some weighted) with the switches' pick (Open vSwitch's
    hash): expected() gives the reports of the one path each flow takes from each ingress,
    and allows() says yes to those and no to the other buckets' paths."""
    wl = generate(*net, 150, seed=seed, rule_ids=True)
    rng = random.Random(seed)
    groups = [
        Group(
            g.dpid,
            g.group_id,
            g.type,
            g.buckets,
            weights=tuple(rng.randint(0, 4) for _ in g.buckets),
        )
        if g.type == "select" and rng.random() < 0.3
        else g
        for g in wl.groups
    ]
    groups = [
        g if any(g.weights or (1,)) else Group(g.dpid, g.group_id, g.type, g.buckets)
        for g in groups
    ]
    model = Model(wl.topo)
    model.add_entries(wl.entries, groups)
    model.select = group_bucket
    anyway = Model(wl.topo)  # every bucket a path: what the pick rules out
    anyway.add_entries(wl.entries, groups)
    ref = RefDataPlane(wl.topo, wl.entries, groups, select=lambda d, g, h: group_bucket(g, h))
    ruled_out = 0
    for _ in range(6):
        h = {
            "eth_type": 0x0800,
            "ipv4_dst": data.draw(st.sampled_from(sorted(wl.prefixes))) | rng.randrange(1, 255),
            "ipv4_src": rng.getrandbits(32),
            "ip_proto": rng.choice((6, 17, 1)),
            "tp_src": rng.randrange(65536),
            "tp_dst": rng.choice((22, 80, 443)),
        }
        want: dict = {}
        for ing in wl.topo.edge_ports():
            for d in ref.send(ing, h):
                if d.kind == "egress":
                    want.setdefault(d.egress, set()).add(
                        (d.ingress, d.hops, d.verify_port, d.verify_rule)
                    )
        for eg in wl.topo.edge_ports():
            got = {(x.ingress, x.hops, x.verify_port, x.verify_rule) for x in model.expected(eg, h)}
            assert got == want.get(eg, set()), (eg, h)
            for x in anyway.expected(eg, h):
                tags = (x.verify_port, x.verify_rule)
                ok = any(w[2:] == tags for w in got)
                ruled_out += not ok
                assert model.allows(eg, h, *tags) == ok, (eg, h, x)
    assert ruled_out > 0  # the network's ECMP gives the hash something to decide


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios(), st.data())
def test_group_delete_removes_its_users(sc, data):
    """GroupMod DELETE removes the group and every entry whose actions name it (OpenFlow
    1.3.5 6.5), after any history of adds, modifies and deletes; the walks then equal the
    brute force over what is left."""
    topo, groups, fms, hs = sc
    model = run_flowmods(topo, groups, fms)
    if not model.groups():
        return
    g = data.draw(st.sampled_from(model.groups()))
    before = model.entries()
    model.delete_group(g.dpid, g.group_id)
    left = [e for e in before if e.dpid != g.dpid or g.group_id not in e.instructions.groups()]
    assert sorted(map(ofctl.format_flow, model.entries())) == sorted(map(ofctl.format_flow, left))
    assert (g.dpid, g.group_id) not in {(x.dpid, x.group_id) for x in model.groups()}
    ref = RefDataPlane(
        topo,
        left,
        [x for x in groups if x is not g and (x.dpid, x.group_id) != (g.dpid, g.group_id)],
    )
    for h in hs:
        for ing in topo.edge_ports():
            got = Counter(outcome_key(d) for d in model.trace(ing, h))
            assert got == Counter(outcome_key(d) for d in ref.send(ing, h)), (ing, h)
