"""The intent guard: a FlowMod that would break an enforced policy is judged on the model
and the model is put back exactly; one that breaks only unenforced policies passes."""

from __future__ import annotations

import contextlib
import random

import pytest

from cpc.intents import IntentChecker, Policy
from cpc.model import Model
from cpc.ofctl import format_flow, parse_flow
from cpc.rules import ModelError
from cpc.topology import Topology
from pazzd.guard import IntentGuard


def line() -> Topology:
    t = Topology()
    for d in (1, 2, 3):
        t.add_switch(d, f"s{d}", [1, 2, 3])
    t.add_link((1, 2), (2, 1))
    t.add_link((2, 2), (3, 1))
    t.add_link((3, 2), (1, 3))  # a ring, so a loop is one FlowMod away
    for d in (1, 2, 3):
        t.add_edge((d, 3 if d != 1 else 1))
    return t


ROUTES = [
    (1, "priority=10,ip,nw_dst=10.3.0.0/16,actions=output:2"),
    (2, "priority=10,ip,nw_dst=10.3.0.0/16,actions=output:2"),
    (3, "priority=10,ip,nw_dst=10.3.0.0/16,actions=output:3"),
]


def setup(enforce: bool):
    topo = line()
    model = Model(topo)
    model.build()
    pols = [Policy("no_loops", "loop_free", enforce=enforce)]
    checker = IntentChecker(model, pols)
    checker.check_all()
    guard = IntentGuard(model, lambda: {p.name for p in pols if p.enforce})
    stored = []

    def on_update(upd):
        ch = checker.on_update(upd)
        if not guard.collect(ch):
            stored.append(ch)

    model.subscribe(on_update)
    for dpid, text in ROUTES:
        model.apply(parse_flow(text, dpid))
    return model, checker, guard, stored


HEADERS = [{"eth_type": 0x0800, "ipv4_dst": d} for d in (0x0A030001, 0x0A040001, 0x0B000001)]


def snapshot(model, checker):
    """The entries, the open violations and every header's outcomes from every ingress."""
    return (
        sorted(f"{e.dpid} {format_flow(e)}" for e in model.entries()),
        sorted(checker.open),
        [sorted(map(str, model.trace(i, h))) for i in model.topo.edge_ports() for h in HEADERS],
    )


def test_a_loop_is_refused_and_the_model_put_back():
    model, checker, guard, stored = setup(enforce=True)
    before = snapshot(model, checker)
    n_stored = len(stored)
    # s3 sends 10.3.0.0/16 on around the ring instead of out of its edge port: a loop.
    bad = parse_flow("priority=10,ip,nw_dst=10.3.0.0/16,actions=output:2", 3, "add")
    broken = guard.judge(bad)
    assert [v.policy.name for v in broken] == ["no_loops"]
    assert broken[0].witness["ipv4_dst"] >> 16 == 0x0A03
    assert snapshot(model, checker) == before
    assert len(stored) == n_stored  # the trial's changes were not for storing
    # A harmless FlowMod passes; so does every FlowMod when nothing is enforced.
    assert guard.judge(parse_flow("priority=20,ip,nw_dst=10.4.0.0/16,actions=output:3", 3)) == []
    model2, checker2, guard2, _ = setup(enforce=False)
    assert guard2.judge(bad) == []


def test_delete_and_modify_are_undone_too():
    model, checker, guard, _ = setup(enforce=True)
    before = snapshot(model, checker)
    # Deleting s3's route opens no loop (a blackhole): it passes, the model is unchanged.
    assert guard.judge(parse_flow("priority=10,ip,nw_dst=10.3.0.0/16", 3, "delete_strict")) == []
    assert snapshot(model, checker) == before
    # A modify that turns s3's route around the ring is refused and undone.
    mod = parse_flow("ip,nw_dst=10.3.0.0/16,actions=output:2", 3, "modify")
    assert guard.judge(mod)
    assert snapshot(model, checker) == before


def test_in_flight_flowmods_are_applied_first():
    """A loop pushed in three FlowMods without a barrier: the last is judged with the first
    two applied, though they are not committed yet; alone it closes nothing."""
    model, checker, guard, _ = setup(enforce=True)
    before = snapshot(model, checker)
    ring = [
        parse_flow("priority=10,ip,nw_dst=10.5.0.0/16,actions=output:2", d, "add")
        for d in (1, 2, 3)
    ]
    assert guard.judge(ring[2]) == []  # s1 has no route for 10.5.x.x: a drop, no loop
    (v,) = guard.judge(ring[2], pending=ring[:2])
    assert v.policy.name == "no_loops" and v.witness["ipv4_dst"] >> 16 == 0x0A05
    assert guard.judge(ring[1], pending=ring[:1]) == []  # the ring is still open there
    assert snapshot(model, checker) == before


def _random_flowmod(rng) -> object:
    dpid = rng.choice((1, 2, 3))
    prefix = rng.choice(("10.3.0.0/16", "10.4.0.0/16", "10.4.1.0/24"))
    # More specific, higher priority: overlapping entries of one priority are undefined in
    # OpenFlow, and the model's tie-break (the order added) differs from a fresh model's.
    prio = 25 if prefix.endswith("/24") else rng.choice((10, 20))
    cmd = rng.choice(("add", "add", "add", "modify_strict", "delete_strict", "delete"))
    acts = f",actions=output:{rng.choice((2, 2, 3))}" if cmd in ("add", "modify_strict") else ""
    return parse_flow(f"priority={prio},ip,nw_dst={prefix}{acts}", dpid, cmd)


def _opened_by(pending, fm) -> set:
    """The oracle: the loops fm opens, from two models built from scratch, one with the
    FlowMods in flight applied and one with fm after them."""
    keys = []
    for fms in (pending, [*pending, fm]):
        model = Model(line())
        model.build()
        for dpid, text in ROUTES:
            model.apply(parse_flow(text, dpid))
        for p in fms:
            with contextlib.suppress(ModelError):
                model.apply(p)
        checker = IntentChecker(model, [Policy("no_loops", "loop_free", enforce=True)])
        checker.check_all()
        keys.append(set(checker.open))
    return keys[1] - keys[0]


@pytest.mark.parametrize("seed", range(6))
def test_a_burst_in_batches_is_judged_as_each_flowmod_alone(seed):
    """Random FlowMods pushed without a barrier, judged in batches that close at random
    points (as the proxy's slices do): each verdict is the one two models built from
    scratch give, and the model is exactly as before once the batch is closed."""
    rng = random.Random(seed)
    model, checker, guard, _ = setup(enforce=True)
    before = snapshot(model, checker)
    pending, refused = [], 0
    burst = [_random_flowmod(rng) for _ in range(40)]
    for d in (1, 2, 3):  # the halves of a sure loop, among the rest
        ring = parse_flow("priority=30,ip,nw_dst=10.5.0.0/16,actions=output:2", d, "add")
        burst.insert(rng.randrange(len(burst) + 1), ring)
    i = 0
    while i < len(burst):
        with guard.batch():
            for _ in range(rng.randint(1, 12)):
                if i == len(burst):
                    break
                fm = burst[i]
                got = {v.key for v in guard.judge(fm, pending)}
                assert got == _opened_by(pending, fm), (seed, i)
                if got:
                    refused += 1
                elif rng.random() < 0.7:  # else refused after the guard (no room for an ID)
                    pending.append(fm)
                i += 1
        assert snapshot(model, checker) == before
    assert guard.judged == len(burst) and refused  # loops were offered, and refused
