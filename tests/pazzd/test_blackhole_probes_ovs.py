"""A critical flow's blackhole found by its marked probes on real patched OVS, at sFlow
1/1000, where production samples alone would take many minutes.

The 2x2 grid of pazzlab.lab with the demo's rules, production traffic from the hosts
(tcpreplay) and the demo's critical flow (its header is among the traffic); pazzd loads the
rules, fuzzes from the hosts' namespaces and probes the critical flow once a second. The
flow's route on its ingress switch is deleted behind pazzd's back: the alarm must come from
the probes the switches no longer report, within about the run of probes the false-alarm
bound asks for plus the allowances, naming that switch among its candidates. Nothing may
alarm on the clean network first."""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from pazzlab.demo import bring_up
from pazzlab.lab import Lab
from pazzlab.ovs import stop_processes

from .helpers import lab_prefix, pazzctl

pytestmark = [pytest.mark.ovs, pytest.mark.slow]


def _faults(sock):
    return json.loads(pazzctl(sock, "faults", "--json").stdout)


def test_deleted_route_under_a_critical_flow_alarms_from_its_probes_at_1_in_1000():
    prefix = lab_prefix("tcpreplay")
    workdir = Path(tempfile.mkdtemp(prefix="pazz-bh-probes-"))
    lab = Lab(prefix, workdir / "lab", kind="grid", size=2, rules=100, acls=2, sampling=1000)
    procs: list[subprocess.Popen] = []
    try:
        lab.start()
        run = bring_up(lab, workdir, procs, controller=False, pps=20, fuzz_rate=100.0)
        sock = run.sock
        time.sleep(15)  # the flow's first probe reports arm the rule; a clean stretch
        assert _faults(sock) == [], (workdir / "pazzd.log").read_text()[-3000:]
        (f,) = [f for f in run.faults if f.key == "delete"]
        t_inj = time.time()
        for cmd, *a in f.inject:
            lab.ofctl(f.dpid, cmd, *a)
        row, deadline = None, time.monotonic() + 30
        while row is None and time.monotonic() < deadline:
            rows = [r for r in _faults(sock) if r["kind"] == "blackhole"]
            row = rows[0] if rows else None
            time.sleep(0.3)
        assert row is not None, (workdir / "pazzd.log").read_text()[-3000:]
        waited = row["first_seen"] - t_inj
        # 5 probes at 1 s, each report 2 s late at most (batch, latency, flight), the tick.
        assert waited <= 12.0, waited
        loc = row["localization"]
        assert loc["detail"] == "probes of the flow not reported at egress", loc
        assert f.dpid in loc["candidates"], loc
        assert [r["kind"] for r in _faults(sock)] == ["blackhole"]  # nothing else
    finally:
        stop_processes(procs, timeout=10)
        lab.stop()
        shutil.rmtree(workdir, ignore_errors=True)
