"""The delivered group (fuzz.delivered_share): probes into the space the model delivers,
where a fault in a route nobody's traffic uses hides from production sampling. Checked
with the reference data plane: without the group no probe is ever delivered by the
intended rules; with it, about its share is, and such faults are then found."""

from __future__ import annotations

import random

import pytest

from cpc.model import Model
from cpc.rules import FlowMod
from fuzzer.engine import Fuzzer
from fuzzer.plan import DEFAULT_SHARES, shares_with_delivered
from pazzdata.detectnet import make_faults, random_network
from pazzlab.sim import detects


def _model(net) -> Model:
    model = Model(net.topo)
    model.add_entries(net.entries, net.groups)
    return model


def test_shares_with_delivered_split_the_probes():
    sh = shares_with_delivered(0.25)
    assert sh["delivered"] == 0.25
    assert sum(sh.values()) == pytest.approx(1.0)
    assert shares_with_delivered(0.0) == DEFAULT_SHARES
    for g, w in DEFAULT_SHARES.items():
        if g != "delivered":
            assert sh[g] == pytest.approx(w * 0.75)


@pytest.mark.parametrize("seed", [21, 22])
def test_without_the_group_no_probe_is_delivered(seed):
    net = random_network(seed)
    ref = net.ref()
    fz = Fuzzer(_model(net), seed=seed, subscribe=False)
    n = 0
    for _ in range(8):
        for pr in fz.next_probes(100):
            n += 1
            assert not any(d.kind == "egress" for d in ref.send(pr.ingress, pr.header)), pr
    assert n == 800


@pytest.mark.parametrize("seed", [21, 22])
def test_with_the_group_its_share_is_delivered(seed):
    net = random_network(seed)
    ref = net.ref()
    fz = Fuzzer(_model(net), seed=seed, subscribe=False, shares=shares_with_delivered(0.2))
    delivered = by_area = cells = 0
    probes = [pr for _ in range(10) for pr in fz.next_probes(100)]
    for pr in probes:
        egress = any(d.kind == "egress" for d in ref.send(pr.ingress, pr.header))
        delivered += egress
        if pr.area == "delivered":
            by_area += 1
            if pr.label != "delivered edges":  # the mask edges probe uncovered space too
                cells += 1
                assert egress, pr  # every probe of a cell is one the network delivers
    assert 0.15 <= by_area / len(probes) <= 0.25
    assert delivered >= cells > 0.5 * by_area


@pytest.mark.parametrize("seed", [21, 22, 23])
def test_faults_of_idle_routes_are_found_only_with_the_group(seed):
    """A changed rewrite and a misroute change how a whole class of delivered headers is
    forwarded: the group finds them within a few thousand probes, the fuzzer without it
    never probes there."""
    net = random_network(seed)
    model = _model(net)
    for f in make_faults(net, seed, kinds=("rewrite_changed", "misroute")):
        ref = net.ref(f.apply(net.entries))
        found = {}
        for share in (0.0, 0.2):
            fz = Fuzzer(model, seed=seed, subscribe=False, shares=shares_with_delivered(share))
            found[share] = None
            for k in range(60):
                for pr in fz.next_probes(100):
                    if detects(model, ref, pr.ingress, pr.header):
                        found[share] = k * 100
                        break
                if found[share] is not None:
                    break
        assert found[0.0] is None, (f.title, found)
        assert found[0.2] is not None, (f.title, found)


@pytest.mark.parametrize("seed", [21, 22])
def test_the_matches_follow_the_updates(seed):
    """The delivered group's distinct matches are kept from each update's entry changes,
    not read from every entry again: after random adds, deletes and re-adds they are the
    model's own, and the fuzzer never fell back to reading them all."""
    net = random_network(seed)
    model = _model(net)
    fz = Fuzzer(model, seed=seed, shares=shares_with_delivered(0.2))
    fz.next_probes(10)  # the first plan lists the matches
    rng = random.Random(seed)
    gone: list = []
    for _ in range(60):
        if gone and rng.random() < 0.4:
            e = gone.pop(rng.randrange(len(gone)))
            fm = FlowMod("add", e.dpid, e.table, e.priority, e.match, e.instructions, e.cookie)
        else:
            e = rng.choice(model.entries())
            gone.append(e)
            fm = FlowMod("delete_strict", e.dpid, e.table, e.priority, e.match)
        model.apply(fm)
        assert fz._matches_version == model.version  # followed, not read again
        assert set(fz._matches) == {x.match.fields for x in model.entries()}
        for f, u in fz._matches.items():
            assert u == model.space.match_bdd(f)
