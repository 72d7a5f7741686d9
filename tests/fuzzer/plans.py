"""A plan for tests: one ingress's IngressPlan over every other edge port's corpus."""

from __future__ import annotations

import random

from fuzzer.hspace import CountCache
from fuzzer.plan import IngressPlan


def plan_for(model, ingress, seed: int, **kw) -> IngressPlan:
    """kw: IngressPlan's own (its own CountCache unless `cache` is given)."""
    corpora = {e: model.corpus(ingress, e) for e in model.topo.edge_ports() if e != ingress}
    kw.setdefault("cache", CountCache(model.space))
    return IngressPlan(
        model.space,
        ingress,
        corpora,
        rng=random.Random(seed),
        classes=model.part.bdd_of,
        **kw,
    )
