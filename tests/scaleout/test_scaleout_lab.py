"""The lab's steady-state faults (bench/detect.py: a random network, the real control path,
patched OVS, benign churn) found through one `pazzd collector`, two `pazzd worker`s and the
primary, as pazzd alone finds them on the same network and faults: the same kinds, each
found and localized, and no false alarm in either."""

from __future__ import annotations

import pytest

from bench.detect import options, run_seed
from pazzlab import natsserver
from tests.pazzd.helpers import lab_prefix
from tests.pazzd.test_detect_lab import SEED, STEADY_ARGS  # pazzd alone finds both there

pytestmark = [
    pytest.mark.ovs,
    pytest.mark.slow,
    pytest.mark.skipif(not natsserver.available(), reason="nats-server not installed"),
]


@pytest.fixture
def prefix():
    return lab_prefix("tcpreplay")


def _run(prefix, scaleout: int) -> dict:
    a = options([*STEADY_ARGS, "--scaleout", str(scaleout)])
    return run_seed(SEED, a, prefix, print)


def _findings(out: dict) -> list[tuple]:
    return sorted((f["kind"], f["dpid"], bool(f["localized"])) for f in out["faults"])


def test_scaleout_finds_what_pazzd_alone_finds(prefix):
    alone = _run(prefix, 0)
    scaled = _run(prefix, 2)
    for out in (alone, scaled):
        assert out["startup_false_alarms"] == [], out["startup_false_alarms"]
        assert out["false_alarms"] == [], out["false_alarms"]
        for f in out["faults"]:
            assert f["dataplane_s"] is not None and f["dataplane_s"] <= 30, f
            assert f["localized"], f
    assert _findings(scaled) == _findings(alone)
    assert sorted(f["kind"] for f in scaled["faults"]) == ["acl_bypass", "delete_route"]
