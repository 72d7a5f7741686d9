"""A fuzzer (and the interference checker) subscribed to a model, with the plans it drew
probes from, goes with the model by reference counting alone. Left in a reference cycle,
the cyclic GC may free the BDD manager before the nodes in the cycle; dd then skips
Cudd_Quit and keeps every node of the manager (about 17 MB a case in the steady-state
harness, which makes a model and a fuzzer per case)."""

from __future__ import annotations

import pytest

from cpc.interference import Apps, InterferenceChecker
from cpc.model import Model
from fuzzer.engine import Fuzzer
from pazzdata.workloads import generate
from tests.bdd_gc import assert_freed_by_refcount


def _draw(fz: Fuzzer) -> None:
    fz.record(fz.next_probes(300))  # plans, their areas, samplers and iterators


def _freed_by_refcount(make_holder, use=lambda holder: None) -> None:
    wl = generate("grid", 2, 100, rule_ids=True)
    model = Model(wl.topo)
    model.add_entries(wl.entries, wl.groups)
    holder = make_holder(model)
    model.add_flow(1, "priority=30,ip,nw_dst=172.16.0.0/12,actions=output:2")  # an Update
    use(holder)
    held = [model, holder]
    del model, holder
    assert_freed_by_refcount(held)


def test_a_subscribed_fuzzer_and_its_plans_go_with_the_model():
    _freed_by_refcount(lambda m: Fuzzer(m, seed=1, min_replan_s=0.0), _draw)


def test_an_attached_interference_checker_goes_with_the_model():
    def make(m):
        checker = InterferenceChecker(m, Apps())
        checker.attach()
        return checker

    _freed_by_refcount(make)


def test_a_weak_subscriber_stops_with_its_object_and_a_strong_one_does_not():
    wl = generate("grid", 2, 10, rule_ids=True)
    model = Model(wl.topo)
    model.add_entries(wl.entries, wl.groups)
    seen: list[int] = []

    class Sub:
        def on_update(self, upd) -> None:
            seen.append(upd.version)

    sub = Sub()
    model.subscribe(sub.on_update, weak=True)
    model.subscribe(lambda upd: seen.append(-upd.version))  # held by the model alone
    v = model.add_flow(1, "priority=30,ip,nw_dst=172.16.0.0/12,actions=output:2").version
    assert seen == [v, -v]
    del sub
    model.add_flow(1, "priority=31,ip,nw_dst=172.17.0.0/16,actions=output:2")
    assert seen == [v, -v, -(v + 1)]
    with pytest.raises(TypeError):
        model.subscribe(lambda upd: None, weak=True)  # only a bound method can be held weakly
