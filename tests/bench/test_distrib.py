"""bench/distrib.py: a worker over Thrift judges as the in-process tester does, and a
snapshot rebuilds the model that was sent."""

from __future__ import annotations

import pytest

from bench import distrib


@pytest.mark.slow
def test_thrift_worker_agrees_with_the_local_tester():
    r = distrib.thrift(2_000, 200, 0.3)
    assert r["local_faults"] == 0  # reports carry the reference's own tags
    for mode in ("cold", "cached"):
        w = r["worker"][mode]
        assert w["faults"] == 0 and w["us_per_sample"] > 0
    # Cold: one lookup per datagram at least; cached: most datagrams ask nothing.
    assert r["worker"]["cold"]["rpcs_per_datagram"] >= 1
    assert r["worker"]["cached"]["rpcs_per_datagram"] < 0.5


@pytest.mark.slow
def test_snapshot_rebuilds_every_rule():
    from pazzdata.workloads import generate

    want = len(generate("fattree", 4, 2_000, rule_ids=True).entries)
    s = distrib.snapshot(2_000)
    assert s["rules"] == want
    assert 0 < s["gzip_mb"] < s["raw_mb"]
