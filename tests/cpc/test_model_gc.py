"""Model updates run with the cyclic GC paused (cpc.gcpause.gc_paused_update): they must
make no reference cycles, or the paused collector would leak them."""

from __future__ import annotations

import contextlib
import gc
import weakref

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cpc.model import Model
from cpc.rules import FlowMod, Group, ModelError
from cpc.topology import load_topology
from tests.bdd_gc import assert_freed_by_refcount
from tests.cpc.netgen import scenarios


def cyclic_garbage() -> list:
    """The type names of everything the cyclic GC finds unreachable now."""
    gc.unfreeze()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        gc.collect()
        return [type(o).__name__ for o in gc.garbage]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.collect()  # now free them (SAVEALL kept them)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios(), st.data())
def test_updates_make_no_reference_cycles(sc, data):
    topo, groups, fms, _ = sc
    ports = sorted({*topo.edges, *topo.links})
    down = data.draw(st.lists(st.sampled_from(ports), max_size=2, unique=True))
    model = Model(topo)
    model.add_entries([], groups)
    # A bad FlowMod for apply_many's error list: an unknown switch.
    bad = FlowMod("add", max(topo.switches) + 1, 0, 1, fms[0].match, fms[0].instructions)
    cyclic_garbage()  # what earlier tests and the build left
    half = len(fms) // 2
    for fm in fms[:half]:
        with contextlib.suppress(ModelError):
            model.apply(fm)
    _, errors = model.apply_many([*fms[half:], bad])
    assert errors and errors[-1][0] is bad
    for dpid, port in down:
        model.port_status(dpid, port, up=False)
    for g in groups[:1]:
        model.set_group(Group(g.dpid, g.group_id, g.type, g.buckets[:1]))
        model.delete_group(g.dpid, g.group_id)
    for dpid, port in down:
        model.port_status(dpid, port, up=True)
    del errors
    assert cyclic_garbage() == []


def test_the_check_sees_a_cycle():
    """The check above can fail: a cycle made in between is found."""
    cyclic_garbage()
    a: list = []
    a.append(a)
    del a
    assert cyclic_garbage() == ["list"]


class _Obj:
    """A weak-referenceable object that can be put in a cycle."""


def _dead_cycle():
    """A reference cycle already unreachable, and a weak reference to it."""
    a = _Obj()
    a.self = a
    return weakref.ref(a)


def _live_cycle():
    a = _Obj()
    a.self = a
    return a, weakref.ref(a)


def test_cycles_the_rest_of_the_process_left_are_collected_not_frozen(tmp_path):
    path = tmp_path / "t.yaml"
    path.write_text("switches:\n  - {name: s1, dpid: 1, ports: [1, 2]}\nedge: [s1:1, s1:2]\n")
    model = Model(load_topology(path))
    model.add_entries([])
    flows = iter(f"priority={p},ip,nw_dst=10.0.{p}.0/24,actions=output:2" for p in range(1, 9))
    cyclic_garbage()
    # Young: a cycle made and dropped since the last update.
    ref = _dead_cycle()
    model.add_flow(1, next(flows))
    assert ref() is None
    # Old: a cycle that a collection since the last update moved to the old generation
    # while it was alive, and that died afterwards.
    obj, ref = _live_cycle()
    gc.collect(1)
    del obj
    model.add_flow(1, next(flows))
    assert ref() is None


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_a_dropped_model_frees_its_bdd_manager(sc):
    """A model nobody holds frees its CUDD manager by reference counting."""
    topo, groups, fms, _ = sc
    model = Model(topo)
    model.add_entries([], groups)
    for fm in fms:
        with contextlib.suppress(ModelError):
            model.apply(fm)
    held = [model]
    del model
    assert_freed_by_refcount(held)
