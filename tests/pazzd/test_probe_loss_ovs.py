"""A route deleted behind pazzd's back where no critical flow watches, found on real patched
OVS at sFlow 1/1000 by the delivered group's probes that no exit reports any more
(tester.probeloss).

The 2x2 grid of pazzlab.lab with the demo's rules and production traffic (tcpreplay), and
no critical flow; pazzd loads the rules and fuzzes from the hosts' namespaces at 1,000
probes/s, a fifth of them into delivered space (its default with marked reports). The
demo's deleted route (a /24 on its switch, after which that switch drops the /24's
packets) is deleted with ovs-ofctl: production samples at 1/1000 would take minutes, the
lost probes take seconds. Nothing may open on the clean network first, and the blackhole
must name that switch among its candidates."""

from __future__ import annotations

import time

import pytest

from .helpers import faults, grid_lab, wait_for

pytestmark = [pytest.mark.ovs, pytest.mark.slow]


def test_a_deleted_route_no_critical_flow_watches_is_a_blackhole_of_lost_probes():
    kw = dict(controller=False, pps=20, fuzz_rate=1000.0, critical=False)
    with grid_lab("probe-loss", sampling=1000, **kw) as (lab, run, workdir):
        sock = run.sock
        time.sleep(20)  # every exit has reported a probe; a clean stretch
        log = workdir / "pazzd.log"
        assert faults(sock) == [], log.read_text()[-3000:]
        assert "probe loss: the delivered group's unreported probes" in log.read_text()
        (f,) = [f for f in run.faults if f.key == "delete"]
        t_inj = time.time()
        for cmd, *a in f.inject:
            lab.ofctl(f.dpid, cmd, *a)
        rows = wait_for(lambda: [r for r in faults(sock) if r["kind"] == "blackhole"], 45, 0.3)
        assert rows, log.read_text()[-3000:]
        row = rows[0]
        loc = row["localization"]
        assert loc["detail"] == ("probes into delivered space not reported at any exit"), loc
        assert row["location"].startswith("route:"), row
        assert f.dpid in loc["candidates"], loc
        # LOST probes of one area, each up to 3 s late (batch, latency, flight), the tick.
        assert row["first_seen"] - t_inj <= 30.0, row["first_seen"] - t_inj
        assert {r["kind"] for r in faults(sock)} == {"blackhole"}  # nothing else
