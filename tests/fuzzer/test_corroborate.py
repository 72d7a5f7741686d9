"""A suspicious sample's header sent again in 3N copies from the probe's own ingress, and
the shares the fuzzer picks for the network's sampling."""

from __future__ import annotations

import pytest

from cpc.model import Model
from fuzzer import engine
from fuzzer.engine import CORROBORATE_MAX, Fuzzer
from fuzzer.plan import DEFAULT_SHARES, SPARSE_SHARES
from pazzdata.workloads import generate


@pytest.fixture(scope="module")
def model():
    wl = generate("grid", 2, 200, rule_ids=True)
    m = Model(wl.topo)
    m.add_entries(wl.entries, wl.groups)
    m.build()
    return m


def test_sender_names_the_ingress_of_recent_probes(model, monkeypatch):
    monkeypatch.setattr(engine, "RECENT", 300)
    fz = Fuzzer(model, seed=1, subscribe=False)
    probes = fz.next_probes(200)
    # Headers sent from one ingress only (a header sent from two names the later one).
    by_key: dict = {}
    for p in probes:
        by_key.setdefault(engine._sender_key(p.header), []).append(p.ingress)
    for p in probes:
        assert fz.sender(p.header) == by_key[engine._sender_key(p.header)][-1]
    # The parsed header of a sample carries the VLAN the switch left: it is not looked at.
    h = dict(probes[0].header)
    h["vlan_vid"] = 0x1005
    assert fz.sender(h) is not None
    for _ in range(4):
        fz.next_probes(100)
    later = fz.next_probes(50)
    assert len(fz._sender) <= 300
    old = [
        p
        for p in probes
        if engine._sender_key(p.header) not in {engine._sender_key(q.header) for q in later}
    ]
    assert old and all(fz.sender(p.header) is None for p in old[:20])  # forgotten


@pytest.mark.parametrize("sampling", [1, 100, 1000, 4096])
def test_corroborate_sends_3n_copies_from_that_ingress(model, sampling):
    fz = Fuzzer(model, seed=1, subscribe=False, rate=1e6)
    ing = next(iter(fz.state))
    hdr = {"eth_type": 0x0800, "ipv4_dst": 0x01020304, "ip_proto": 17, "tp_dst": 53}
    assert fz.corroborate(ing, hdr, sampling)
    assert not fz.corroborate((99, 1), hdr, sampling)  # not a fuzzed ingress
    copies = []
    for _ in range(20000):
        batch = fz.next_probes(50)
        copies += [p for p in batch if p.area == "confirm"]
        if not fz._confirm:
            break
    assert len(copies) == min(3 * sampling, CORROBORATE_MAX)
    assert all(p.ingress == ing and p.header == hdr for p in copies)


def test_shares_follow_the_sampling(model):
    assert Fuzzer(model, subscribe=False).shares == DEFAULT_SHARES
    assert Fuzzer(model, subscribe=False, sampling=16).shares == DEFAULT_SHARES
    assert Fuzzer(model, subscribe=False, sampling=100).shares == SPARSE_SHARES
    given = {"boundary": 1.0}
    assert Fuzzer(model, subscribe=False, sampling=1000, shares=given).shares == given
    for sh in (DEFAULT_SHARES, SPARSE_SHARES):
        assert sum(sh.values()) == pytest.approx(1.0)
    # Sparse sampling moves probes from the bit flips to the larger targets.
    assert SPARSE_SHARES["boundary"] < DEFAULT_SHARES["boundary"]
    assert SPARSE_SHARES["random"] > DEFAULT_SHARES["random"]
