"""Stored suffixes across generations (cpc.walk.Walker.age_suffixes): with the walker ageing
its suffixes at every update, walks take most nodes from the elder generation; the model's
answers must still equal the brute-force data plane's after every FlowMod and port change."""

from __future__ import annotations

import contextlib
import random
from collections import Counter
from unittest import mock

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cpc.index
from bench.common import readd_flowmods
from cpc.model import Model
from cpc.refdp import RefDataPlane
from cpc.rules import ModelError
from cpc.walk import Walker
from pazzdata.workloads import generate
from tests.cpc.netgen import scenarios
from tests.cpc.test_model_vs_bruteforce import unique_priorities


@contextlib.contextmanager
def ageing_at_every_update(model: Model):
    """The walker ages its suffixes at every commit that finds any stored; counts the nodes
    walks took from the elder generation."""
    taken = Counter()
    find = Walker._from_elder

    def counted(self, key, owners):
        node = find(self, key, owners)
        taken["elder"] += node is not None
        return node

    model.index.built_nodes = 0
    with (
        mock.patch.object(cpc.index, "XMEMO_MAX_NODES", 0),
        mock.patch.object(cpc.index, "XMEMO_AFTER_BUILD", 0),
        mock.patch.object(Walker, "_from_elder", counted),
    ):
        yield taken


def assert_expected_as_ref(model: Model, headers) -> None:
    topo = model.topo
    ref = RefDataPlane(topo, model.entries(), model.groups())
    for h in headers:
        want: dict = {}
        for ing in topo.edge_ports():
            if ing in topo.down:
                continue
            for d in ref.send(ing, h):
                if d.kind == "egress":
                    key = (d.ingress, d.hops, d.verify_port, d.verify_rule)
                    want.setdefault(d.egress, Counter())[key] += 1
        for eg in topo.edge_ports():
            got = Counter(
                (x.ingress, x.hops, x.verify_port, x.verify_rule) for x in model.expected(eg, h)
            )
            assert got == want.get(eg, Counter()), (eg, h)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios(rewrite=False), st.data())
def test_answers_with_suffixes_aged_at_every_update(sc, data):
    topo, groups, fms, hs = sc
    model = Model(topo)
    model.add_entries([], groups)
    ports = sorted({*topo.edges, *topo.links})
    down = data.draw(st.lists(st.sampled_from(ports), max_size=2, unique=True))
    at = data.draw(st.integers(0, len(fms)))
    with ageing_at_every_update(model):
        for i, fm in enumerate(fms):
            if i == at:  # a port change drops both generations
                for dpid, port in down:
                    model.port_status(dpid, port, up=False)
            if fm.command == "add" and not unique_priorities(model, fm):
                continue
            with contextlib.suppress(ModelError):
                model.apply(fm)
            assert_expected_as_ref(model, hs)
        for dpid, port in down:
            model.port_status(dpid, port, up=True)
        assert_expected_as_ref(model, hs)


def test_fat_tree_updates_take_nodes_from_the_elder_generation():
    """Routes deleted and added back on a fat-tree with ACLs, ageing at every update: walks
    take nodes from the elder generation, and the answers stay the brute force's."""
    wl = generate("fattree", 4, 3_000, rule_ids=True, acls=2)
    model = Model(wl.topo)
    model.add_entries(wl.entries, wl.groups)
    rng = random.Random(7)
    nets = sorted(wl.prefixes)
    hs = [
        {
            "eth_type": 0x0800,
            "ipv4_dst": rng.choice(nets) | rng.randrange(1, 255),
            "ipv4_src": rng.choice(nets) | 7,
            "ip_proto": 6,
            "tp_dst": rng.choice([22, 80]),
        }
        for _ in range(4)
    ]
    # Entries towards the checked headers' prefixes: their classes' walks change.
    dsts = {h["ipv4_dst"] & 0xFFFFFF00 for h in hs}
    picked = [e for e in wl.entries if (e.match.get("ipv4_dst") or (0,))[0] in dsts]
    with ageing_at_every_update(model) as taken:
        for e in rng.sample(picked, 12):
            for fm in readd_flowmods(e):
                model.apply(fm)
                assert_expected_as_ref(model, hs)
    assert taken["elder"] > 0
