"""Update.region and Update.classes hold every header whose forwarding an update changed.

The tester holds back reports of a class named by an update only for headers in the
update's region (tester.timers.TransientGuard), and the fuzzer forgets its coverage there:
a header that behaves differently after the update but lies outside the region would be
judged against the new model at once. Checked against the brute-force data plane, on
random networks with header rewrites, groups and multi-table pipelines.
"""

from __future__ import annotations

import contextlib
from collections import Counter

from hypothesis import HealthCheck, given, settings

from cpc.model import Model
from cpc.refdp import RefDataPlane
from cpc.rules import ModelError
from cpc.topology import Topology
from tests.cpc.netgen import DSTS, scenarios
from tests.cpc.test_model_vs_bruteforce import outcome_key, unique_priorities

HEADERS = [{"eth_type": 0x0800, "ipv4_dst": d} for d in DSTS + [0x0B000001]] + [
    {"eth_type": 0x0800, "ipv4_dst": d, "ip_proto": 6, "tp_dst": p}
    for d in DSTS[::3]
    for p in (22, 80, 8080)
]


def _key(d):
    # Which entry dropped a header is not seen outside the switch: a table-miss and an
    # entry without actions are the same drop to the tester.
    return outcome_key(d) if d.kind != "drop" else ("drop", d.ingress)


def _behaviour(model: Model) -> dict:
    ref = RefDataPlane(model.topo, model.entries(), model.groups())
    return {
        (ing, i): Counter(_key(d) for d in ref.send(ing, h))
        for ing in model.topo.edge_ports()
        for i, h in enumerate(HEADERS)
    }


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_region_and_classes_cover_every_changed_header(sc):
    topo, groups, fms, _ = sc
    model = Model(topo)
    model.add_entries([], groups)
    before = _behaviour(model)
    for fm in fms:
        if fm.command == "add" and not unique_priorities(model, fm):
            continue
        with contextlib.suppress(ModelError):
            upd = model.apply(fm)
            after = _behaviour(model)
            for (ing, i), outs in after.items():
                if outs == before[(ing, i)]:
                    continue
                h = HEADERS[i]
                assert model.space.contains(upd.region, h), (fm, ing, h)
                assert model.classify(h) in upd.classes, (fm, ing, h)
            before = after


def _two_switches() -> Model:
    """An empty model of s1 and s2 in a line: in at s1 port 1, s1:2 to s2:1, out at s2 port 2."""
    topo = Topology()
    topo.add_switch(1, "s1", [1, 2])
    topo.add_switch(2, "s2", [1, 2])
    topo.add_link((1, 2), (2, 1))
    topo.add_edge((1, 1))
    topo.add_edge((2, 2))
    model = Model(topo)
    model.add_entries([])
    return model


def test_a_rewritten_header_changed_downstream_is_in_the_region():
    """10.0.0.1 is rewritten to 10.0.0.2 at s1; an entry for 10.0.0.2 at s2 changes what
    becomes of 10.0.0.1 too, though 10.0.0.1 lies outside that entry's match."""
    model = _two_switches()
    model.add_flow(1, "priority=5,ip,nw_dst=10.0.0.1,actions=mod_nw_dst:10.0.0.2,output:2")
    h = {"eth_type": 0x0800, "ipv4_dst": 0x0A000001}
    assert [d.kind for d in model.trace((1, 1), h)] == ["drop"]
    upd = model.add_flow(2, "priority=5,ip,nw_dst=10.0.0.2,actions=output:2")
    assert [d.egress for d in model.trace((1, 1), h)] == [(2, 2)]
    assert model.space.contains(upd.region, h)
    assert model.classify(h) in upd.classes


def test_an_update_that_changes_only_the_matched_entry_names_its_classes():
    """A higher-priority entry with the same actions takes 10.0.0.0/29's TCP headers from
    another entry: their path stays, their Verify_Rule changes, so the update names their
    class (the tester holds its reports back), whether or not anything subscribes."""
    model = _two_switches()
    model.add_flow(2, "priority=1,ip,nw_dst=10.0.0.0/29,actions=output:2")
    model.add_flow(1, "priority=35,tcp,nw_dst=10.0.0.0/29,actions=output:2")
    h = {"eth_type": 0x0800, "ipv4_dst": 0x0A000001, "ip_proto": 6, "tp_dst": 80}
    (before,) = model.trace((1, 1), h)
    upd = model.add_flow(1, "priority=36,tcp,actions=output:2")
    (after,) = model.trace((1, 1), h)
    assert after.egress == before.egress == (2, 2)
    assert after.verify_rule != before.verify_rule
    assert model.classify(h) in upd.classes
