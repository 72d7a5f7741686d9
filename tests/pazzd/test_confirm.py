"""Confirmation of findings (pazzd.confirm): the verdict of the probe service is stored on
the finding, with each probe's reports and fate, and whom an interference finding's data
plane obeyed. The network is tests/pazzd/test_probes.py's: the real tester judges every
report of the reference data plane."""

from __future__ import annotations

import pytest

from cpc.rules import FlowEntry
from pazzd.confirm import Confirmations
from pazzd.findstore import FindingStore
from pazzd.probes import Probe
from pazzd.records import InterferenceFinding

from .test_probes import HDR, NET, _route, net, out  # noqa: F401


@pytest.fixture
def conf(net, tmp_path):  # noqa: F811
    store = FindingStore(str(tmp_path / "f.db"))
    svc = net.service()
    return net, svc, store, Confirmations(store, svc)


def _finding(store, key: str) -> int:
    rec = InterferenceFinding(key=key, name="a,b", severity="critical", summary="s")
    fid, new = store.open_finding(rec, 1.0)
    assert new
    return fid


def _run(n, svc, c, fid, seconds=60):
    for _ in range(seconds * 2):
        if fid not in c.pending:
            break
        n.step(svc)
    return store_conf(c, fid)


def store_conf(c, fid):
    return c.store.finding(fid).confirmation


@pytest.mark.parametrize("hidden", [False, True])
def test_verdict_and_obeyed_are_stored(conf, hidden):
    n, svc, store, c = conf
    _route(n)
    if hidden:
        n.actual = [*n.model.entries(), FlowEntry(1, 0, 200, NET, out(2), cookie=0xBAD)]
    fid = _finding(store, f"k{hidden}")
    probe = Probe("witness", (1, 1), HDR, frozenset({(2, 2)}))
    assert c.start_probes(fid, [probe], {"model_winner": "router"})
    assert store_conf(c, fid)["verdict"] == "probing"
    got = _run(n, svc, c, fid)
    if hidden:
        assert (got["verdict"], got["obeyed"]) == ("differs", "not router"), got
        assert got["probes"][0]["fate"] == "elsewhere"
    else:
        assert (got["verdict"], got["obeyed"]) == ("agrees", "router"), got
        assert {r["egress"] for r in got["probes"][0]["reports"]} == {"s2:2"}
    assert n.tester.watches == {} and c.pending == {}  # nothing left watched


def test_an_ingress_the_fuzzer_does_not_send_from_is_not_probed(conf):
    n, svc, store, c = conf
    fid = _finding(store, "x")
    assert not c.start_probes(fid, [Probe("witness", (9, 9), HDR)])
    assert store_conf(c, fid) is None
