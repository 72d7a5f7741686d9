"""pazzd end to end on real patched OVS: the 4-switch grid of pazzd.lab, production
traffic from the host namespaces, pazzd with its collector as a subprocess.

No faults before injection, none during a burst of benign FlowMods applied to both the
switch (ovs-ofctl) and the model (pazzctl flowmod); then each injected fault is detected
with the right class and localized to the right switch (and entry for match faults),
checked through `pazzctl --json` and the metrics endpoint.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from pazzd.demo import EXPECT, build_faults, write_pcaps
from pazzd.lab import Lab, dotted

from .helpers import Pazzd, pazzctl
from .test_daemon import scrape

pytestmark = pytest.mark.ovs


@pytest.fixture(scope="module")
def env():
    prefix = os.environ.get("PAZZ_OVS_PREFIX")
    if not prefix or not Path(prefix, "sbin/ovs-vswitchd").exists():
        pytest.skip("PAZZ_OVS_PREFIX is not set (run `make ovs`)")
    if os.geteuid() != 0 or shutil.which("tcpreplay") is None:
        pytest.skip("needs root and tcpreplay")
    workdir = Path(tempfile.mkdtemp(prefix="pazz-daemon-ovs-"))
    lab = Lab(prefix, workdir / "lab", kind="grid", size=2, rules=100, acls=2, sampling=1)
    procs: list[subprocess.Popen] = []
    d = None
    try:
        lab.start()
        lab.install_rules()
        faults, traffic = build_faults(lab)
        for h, path in write_pcaps(lab, traffic["extra"], workdir).items():
            procs.append(lab.hosts[h]["ns"].popen(
                "tcpreplay", "-q", "-i", "eth0", "--pps=100", "--loop=0", str(path),
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))  # fmt: skip
        time.sleep(1.5)
        cfg = lab.write_config(
            workdir / "pazzd.yaml", api_socket=str(workdir / "pazzd.sock"),
            database=str(workdir / "faults.db"), critical_flows=[traffic["critical"]],
            fuzz_rate=100.0, resolve_after=30.0, settle=1.5,
        )  # fmt: skip
        d = Pazzd(cfg)
        st = d.wait_ready()
        yield {"lab": lab, "faults": faults, "d": d, "status": st}
    finally:
        if d is not None:
            d.stop()
        for p in procs:
            p.terminate()
            p.wait(timeout=5)
        lab.stop()
        shutil.rmtree(workdir, ignore_errors=True)


def _faults(d):
    return json.loads(pazzctl(d.sock, "faults", "--json").stdout)


def test_pazzd_on_patched_ovs(env):
    lab, d, st = env["lab"], env["d"], env["status"]
    time.sleep(5)
    s = json.loads(pazzctl(d.sock, "status", "--json").stdout)
    assert s["tester"]["reports"] > 100 and s["tester"]["fault_samples"] == 0, s["tester"]
    assert _faults(d) == [], d.log_text()[-3000:]

    # Benign FlowMods, model first (the guard holds the touched classes for `settle`),
    # then the switch: /32 routes with their own rule IDs and the /24's output.
    wl = lab.wl
    h2net = sorted(n for n, o in wl.prefixes.items() if o == "h2")[0]
    for i in range(10):
        ip = dotted(h2net + 150 + i)
        flow = f"priority=50,cookie=0x30,ip,nw_dst={ip},actions=set_verify_rule:{9000 + i},output:2"
        pazzctl(d.sock, "flowmod", "s1", flow, "--json")
        lab.ofctl(1, "add-flow", flow)
    for i in range(10):
        ip = dotted(h2net + 150 + i)
        flow = f"priority=50,ip,nw_dst={ip}"
        pazzctl(d.sock, "flowmod", "s1", flow, "--command", "delete_strict", "--json")
        lab.ofctl(1, "del-flows", "--strict", flow)
    time.sleep(3)
    assert _faults(d) == [], d.log_text()[-3000:]
    m = scrape(st["metrics"])
    assert m["pazz_model_update_seconds_count"] == 20

    known: set[int] = set()
    for f in env["faults"]:
        t_inj = time.time()
        for cmd, *a in f.inject:
            lab.ofctl(f.dpid, cmd, *a)
        row, deadline = None, time.monotonic() + 20
        while time.monotonic() < deadline:
            rows = [r for r in _faults(d) if r["kind"] == EXPECT[f.key] and r["state"] == "open"
                    and (r["id"] not in known or r["last_seen"] >= t_inj)]  # fmt: skip
            if rows:
                row = rows[0]
                break
            time.sleep(0.3)
        assert row is not None, (f.key, _faults(d), d.log_text()[-3000:])
        t0 = time.monotonic()
        ans = json.loads(pazzctl(d.sock, "localize", str(row["id"]), "--json").stdout)
        assert time.monotonic() - t0 < 5
        assert ans["dpid"] == f.dpid, (f.key, ans)
        if f.expect_entry:
            assert f.expect_entry in ans["entry"], (f.key, ans)
        if f.key == "misroute":
            assert ans["finding"] == "changed" and ans["misrouting_hop"] == f"s{f.dpid}"
        if f.key == "delete":
            assert ans["finding"] == "missing" and ans["entry"] is None
        shown = json.loads(pazzctl(d.sock, "faults", "show", str(row["id"]), "--json").stdout)
        assert shown["polled"]["dpid"] == f.dpid
        m = scrape(env["status"]["metrics"])
        assert m[f'pazz_faults_detected_total{{class="{EXPECT[f.key]}"}}'] >= 1
        assert m[f'pazz_faults_open{{class="{EXPECT[f.key]}"}}'] >= 1
        known |= {r["id"] for r in _faults(d)}
        lab.restore()
    m = scrape(env["status"]["metrics"])
    assert m["pazz_detection_latency_seconds_count"] >= 4
    assert m['pazz_reports_total{result="fault"}'] > 0
    assert m["pazz_fuzz_probes_sent_total"] > 0
