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

import time

import pytest

from .helpers import faults, grid_lab, wait_for

pytestmark = [pytest.mark.ovs, pytest.mark.slow]


def test_deleted_route_under_a_critical_flow_alarms_from_its_probes_at_1_in_1000():
    with grid_lab("bh-probes", sampling=1000, controller=False, pps=20, fuzz_rate=100.0) as (
        lab,
        run,
        workdir,
    ):
        sock = run.sock
        time.sleep(15)  # the flow's first probe reports arm the rule; a clean stretch
        assert faults(sock) == [], (workdir / "pazzd.log").read_text()[-3000:]
        (f,) = [f for f in run.faults if f.key == "delete"]
        t_inj = time.time()
        for cmd, *a in f.inject:
            lab.ofctl(f.dpid, cmd, *a)
        rows = wait_for(lambda: [r for r in faults(sock) if r["kind"] == "blackhole"], 30, 0.3)
        assert rows, (workdir / "pazzd.log").read_text()[-3000:]
        row = rows[0]
        waited = row["first_seen"] - t_inj
        # 5 probes at 1 s, each report 2 s late at most (batch, latency, flight), the tick.
        assert waited <= 12.0, waited
        loc = row["localization"]
        assert loc["detail"] == "probes of the flow not reported at egress", loc
        assert f.dpid in loc["candidates"], loc
        assert [r["kind"] for r in faults(sock)] == ["blackhole"]  # nothing else
