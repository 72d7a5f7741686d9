"""Steady state on random networks (pazzlab.steady): hidden rules installed long after the
last intended change, with benign churn running, are found; and with no fault, no probe
is ever judged a fault while the churn goes on (the reference data plane is the oracle)."""

from __future__ import annotations

import random

import pytest

from cpc.model import Model
from cpc.refdp import RefDataPlane
from fuzzer.engine import Fuzzer
from pazzlab.sim import detects
from pazzlab.steady import _churn, fault_plane, make_fault, random_network, run_case


@pytest.mark.parametrize("seed", [7, 8, 9])
def test_acl_bypasses_are_found_in_steady_state(seed):
    for kind in ("acl_bypass", "acl_bypass_24"):
        r = run_case(seed, kind, t_min=10, t_max=15, horizon=5)
        # The earlier schedule found these only after a benign change made it re-plan.
        assert r["detected"], (seed, kind, r)


def test_every_fault_kind_changes_what_the_network_does():
    """A fault is a real difference: some header the fault matches is delivered with tags
    the model does not expect (else the bench would measure nothing)."""
    for seed in (7, 8):
        net = random_network(seed)
        model = Model(net.topo)
        model.add_entries(net.entries)
        for kind in ("acl_bypass", "acl_bypass_32", "fat_finger", "wide"):
            fault = make_fault(net, kind, random.Random(seed))
            ref = RefDataPlane(net.topo, fault + net.entries)
            fz = Fuzzer(model, seed=seed, subscribe=False)
            hit = False
            for _ in range(200):
                for pr in fz.next_probes(100):
                    if any(e.match.contains(pr.header, pr.ingress[1]) for e in fault):
                        hit = hit or detects(model, ref, pr.ingress, pr.header)
                if hit:
                    break
            assert hit, (seed, kind)


def test_no_false_alarm_during_churn():
    net = random_network(11)
    model = Model(net.topo)
    model.add_entries(net.entries)
    rng = random.Random(11)
    fz = Fuzzer(model, seed=11, min_replan_s=0.0)  # subscribed: re-plans after each change
    live: list = []
    checked = 0
    for step in range(60):
        if step % 3 == 0:
            _churn(net, model, rng, live)
        ref = RefDataPlane(net.topo, net.entries)
        probes = fz.next_probes(50)
        fz.record(probes)
        for pr in probes[::5]:
            checked += 1
            assert not detects(model, ref, pr.ingress, pr.header), (step, pr)
    assert checked >= 500


@pytest.mark.parametrize("seed", [7, 8, 9])
def test_a_mask_fault_replaces_its_route_on_one_switch(seed):
    net = random_network(seed)
    (typed,) = make_fault(net, "mask", random.Random(seed))
    plane = fault_plane(net.entries, [typed])
    assert len(plane) == len(net.entries)
    (gone,) = [e for e in net.entries if e not in plane]
    assert (gone.dpid, gone.priority, gone.rule_id) == (typed.dpid, typed.priority, typed.rule_id)
    (v, m), (w, k) = gone.match.get("ipv4_dst"), typed.match.get("ipv4_dst")
    assert m != k and 1 <= abs(bin(m).count("1") - bin(k).count("1")) <= 3
    assert (v ^ w) & m & k == 0  # the same value where both masks have it
