"""The tester's classes remembered per model version (Tester._classify) are the model's
own classification after every update, and after the model is replaced."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings

from cpc.model import Model
from tester.engine import Tester
from tester.store import FaultStore
from tests.cpc.netgen import scenarios
from tests.cpc.test_model_vs_bruteforce import apply_flowmods


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_remembered_classes_follow_every_update(sc):
    topo, groups, fms, hs = sc
    model = Model(topo)
    model.add_entries([], groups)
    tester = Tester(model, FaultStore(":memory:"), {})

    def check(_upd=None):
        for h in hs:  # twice each: the second answer comes from what was remembered
            for _ in range(2):
                assert tester._classify(dict(h), 0.0)[0] == model.classify(h)

    check()
    apply_flowmods(model, fms, check)
    # A model built afresh (a reload) is another model, even at the same version.
    fresh = Model(topo)
    fresh.add_entries([], groups)
    fresh.version = model.version
    tester.model, model = fresh, fresh
    check()
