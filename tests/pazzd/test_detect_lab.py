"""Steady-state detection on the lab, scaled down from bench/detect.py: a random network
none of the demos or other tests use, the real control path (os-ken app, pazzd's proxy,
patched OVS), benign controller churn running, two faults injected behind the
controller's back at random moments long after the last model change. Both must be found
in the data plane and localized to the switch and entry that were changed, with no fault
at start-up or while the network is as intended, and nothing of the run may be left."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from bench.detect import options, run_seed
from tests.pazzd.helpers import lab_prefix

pytestmark = [pytest.mark.ovs, pytest.mark.slow]
SEED = 31
# Two faults, each after 6-10 s of steady state with benign churn at 3 FlowMods/s, 30 s to
# find each, 10 s of steady state after the last (tests/scaleout/test_scaleout_lab.py too).
STEADY_ARGS = [
    *("--kinds", "acl_bypass,delete_route", "--gap", "6", "10", "--warm", "10"),
    *("--horizon", "30", "--settle", "9", "--quiet", "10", "--churn-rate", "3"),
]


@pytest.fixture
def prefix():
    return lab_prefix("tcpreplay")


def test_faults_in_steady_state_with_churn_are_found_and_localized(prefix):
    a = options(STEADY_ARGS)
    out = run_seed(SEED, a, prefix, print)
    assert out["startup_false_alarms"] == [], out["startup_false_alarms"]
    assert out["false_alarms"] == [], out["false_alarms"]
    assert out["churn_flowmods"] >= 20  # the churn ran during the whole run
    assert sorted(f["kind"] for f in out["faults"]) == ["acl_bypass", "delete_route"]
    for f in out["faults"]:
        assert f["dataplane_s"] is not None and f["dataplane_s"] <= 30, f
        assert f["localized"], f
    # The run's work directory, and every process started from it (OVS, pazzd, the
    # controller app, tcpreplay), are gone.
    stem = str(Path(tempfile.gettempdir()) / f"pazz-detect-{SEED}-")
    assert list(Path(tempfile.gettempdir()).glob(f"pazz-detect-{SEED}-*")) == []
    assert _processes_mentioning(stem) == []


def _processes_mentioning(text: str) -> list[str]:
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                argv = (d / "cmdline").read_bytes().replace(b"\0", b" ")
            except OSError:
                continue
            if text.encode() in argv:
                out.append(f"pid {d.name}: {argv[:120]!r}")
    return out
