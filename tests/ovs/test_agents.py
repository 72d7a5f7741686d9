"""Differential test of OpenFlow agents (pazzlab.agents): stock Open vSwitch 3.1, the patched
build with Verify tagging on, and the model, on the same random FlowMod sequences.

Stock against patched: every error, flow-stats dump and traced packet must be equal (the
Verify actions left out). The model against the switch: every difference must be a known
divergence (cpc.agents, docs/agents.md)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from pazzlab.agentgen import random_sequence
from pazzlab.agents import Comparison

pytestmark = pytest.mark.ovs


def _run(prefix, n: int, first: int = 0) -> dict:
    with Comparison(prefix) as cmp:
        for seed in range(first, first + n):
            cmp.run(random_sequence(seed))
        summary = cmp.summary()
        examples = cmp.examples
    assert summary["differences"] == {}, json.dumps(
        {"summary": summary, "examples": {k: repr(v[:2]) for k, v in examples.items()}},
        indent=1,
    )
    return summary


def test_agents_quick(ovs_prefix):
    s = _run(ovs_prefix, 150, first=int(os.environ.get("PAZZ_AGENTS_SEED", "0")))
    assert s["packets"] == 1500
    # The generator's malformed messages reach the switch, and some are refused.
    assert s["refused_by_switch"] > 0


@pytest.mark.slow
@pytest.mark.skipif(
    not os.environ.get("PAZZ_AGENTS_LONG"),
    reason="set PAZZ_AGENTS_LONG=1: 1.5-3 minutes, and three acceptance differences are open "
    "(docs/agents.md)",
)
def test_agents_long(ovs_prefix):
    s = _run(ovs_prefix, 10_000)
    assert s["sequences"] == 10_000 and s["packets"] == 100_000


def test_comparison_cleans_up(ovs_prefix):
    """Namespaces, daemons and run directories are gone after the comparison."""
    import subprocess

    before = set(
        subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split()
    )
    with Comparison(ovs_prefix, model=False) as cmp:
        rundirs = [cmp.stock.ovs.rundir, cmp.patched.ovs.rundir]
        pids = [p.pid for a in (cmp.stock, cmp.patched) for p in a.ovs._procs]
    after = set(
        subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split()
    )
    assert after <= before
    assert not any(d.exists() for d in rundirs)
    for pid in pids:  # gone, or a zombie of ours not yet reaped
        stat = Path(f"/proc/{pid}/stat")
        assert not stat.exists() or stat.read_text().split()[2] == "Z"
