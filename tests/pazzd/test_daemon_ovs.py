"""pazzd end to end on real patched OVS, on the real control path: the 4-switch grid of
pazzlab.lab, the example os-ken controller app (examples/controller_app.py) installing the
generator's rules through pazzd's OpenFlow proxy, production traffic from the host
namespaces, pazzd as a subprocess (the demo's bring_up).

- The model is fed through the proxy: the config has no rule file; the switches and the
  controller link are up; the model holds the generator's rule count; the switches' flow
  tables (ovs-ofctl) hold the generator's entries with the proxy's rule IDs, and the model
  traces a header through entries with exactly those IDs.
- No faults before injection, none during benign FlowMods the controller sends (added,
  then deleted, through the proxy, with traffic running).
- Each fault injected with ovs-ofctl behind the controller's back is detected with the
  right class and localized to the right switch (and entry for match faults) within 5 s,
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
import yaml

from cpc.ofctl import parse_flow
from pazzlab.demo import EXPECT, bring_up, metrics_of
from pazzlab.lab import Lab, dotted
from pazzlab.ovs import stop_processes

from .helpers import pazzctl

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
    try:
        lab.start()
        run = bring_up(
            lab,
            workdir,
            procs,
            controller=True,
            pps=100,
            fuzz_rate=100.0,
            resolve_after=30.0,
            settle=1.5,
            updates=workdir / "updates.jsonl",
        )
        yield {"lab": lab, "run": run, "workdir": workdir}
    finally:
        stop_processes(procs, timeout=10)
        lab.stop()
        shutil.rmtree(workdir, ignore_errors=True)


def _faults(sock):
    return json.loads(pazzctl(sock, "faults", "--json").stdout)


def _status(sock):
    return json.loads(pazzctl(sock, "status", "--json").stdout)


def _log(env) -> str:
    return (env["workdir"] / "pazzd.log").read_text(errors="replace")[-3000:]


def _switch_entries(lab: Lab, dpid: int):
    return [parse_flow(ln, dpid).entry() for ln in lab.dump_flows(dpid)]


def _key(e):
    return (e.dpid, e.table, e.priority, e.match, e.instructions, e.cookie)


def _wait(cond, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, what
        time.sleep(0.2)


def test_model_fed_through_the_proxy(env):
    lab, sock = env["lab"], env["run"].sock
    cfg = yaml.safe_load(env["run"].config.read_text())
    assert "rules" not in cfg and cfg["controller"]["enabled"] is True
    st = _status(sock)
    dpids = sorted(lab.topo.switches)
    assert st["controller"] == "proxy"
    assert st["switches_connected"] == dpids
    assert st["model"]["rules"] == len(lab.wl.entries) == 100
    m = metrics_of(st["metrics"])
    assert m["pazz_controller_connected"] == 1
    assert all(m[f'pazz_switch_connected{{dpid="{d}"}}'] == 1 for d in dpids), m
    # OVSDB's own view of the bridges' controller connections.
    assert all(lab.controllers_connected().values())

    # What landed on the switches is the generator's file, with the proxy's rule IDs.
    on_switch = [e for d in dpids for e in _switch_entries(lab, d)]
    assert sorted(map(repr, map(_key, on_switch))) == sorted(map(repr, map(_key, lab.wl.entries)))
    ids = {(e.dpid, e.table, e.priority, e.match): e.rule_id for e in on_switch}
    assert all(ids.values())
    assert len(set(ids.values())) == len(ids)  # unique over the whole network
    groups = lab.ovs.ofctl("dump-groups", lab.br(1))
    assert sum(1 for g in lab.wl.groups if g.dpid == 1) == groups.count("group_id=")

    # The model traces h1 -> h2 through the entries with the switches' IDs.
    h2net = sorted(n for n, o in lab.wl.prefixes.items() if o == "h2")[0]
    hdr = f"ipv4_src={lab.host_ip('h1')},ipv4_dst={dotted(h2net + 9)}"
    tr = json.loads(pazzctl(sock, "trace", "--in", "s1:5", "--header", hdr, "--json").stdout)
    hops = [h for o in tr["outcomes"] for h in o["hops"]]
    assert hops and tr["outcomes"][0]["egress"] == "s2:5", tr
    header = {"eth_type": 0x800, "ipv4_src": 0x0A000001, "ipv4_dst": h2net + 9}
    for h in hops:
        for r in h["rules"]:
            match = next(
                k[3]
                for k in ids
                if k[:3] == (h["dpid"], r["table"], r["priority"])
                and k[3].contains(header, h["in_port"])
            )
            assert r["rule_id"] == ids[(h["dpid"], r["table"], r["priority"], match)], (h, r)


def test_pazzd_on_patched_ovs_through_the_proxy(env):
    lab, run = env["lab"], env["run"]
    sock, n = run.sock, len(lab.wl.entries)
    time.sleep(5)
    s = _status(sock)
    assert s["tester"]["reports"] > 100 and s["tester"]["fault_samples"] == 0, s["tester"]
    assert _faults(sock) == [], _log(env)

    # Benign FlowMods from the controller, relayed by the proxy into the switch and the
    # model: /32 routes on s1 towards h2 (same output as the /24), added then deleted.
    wl = lab.wl
    h2net = sorted(n for n, o in wl.prefixes.items() if o == "h2")[0]
    updates = env["workdir"] / "updates.jsonl"

    def send(lines):
        with open(updates, "a") as f:
            f.writelines(json.dumps(u) + "\n" for u in lines)

    ips = [dotted(h2net + 150 + i) for i in range(10)]
    send(
        {
            "dpid": 1,
            "command": "add",
            "flow": f"priority=50,cookie=0x30,ip,nw_dst={ip},actions=output:2",
        }
        for ip in ips
    )
    _wait(lambda: _status(sock)["model"]["rules"] == n + 10, 15, "model: 10 routes added")
    _wait(
        lambda: sum(f"nw_dst={ip} " in ln for ln in lab.dump_flows(1) for ip in ips) == 10,
        15,
        "switch: 10 routes added",
    )
    assert all("set_verify_rule:" in ln for ln in lab.dump_flows(1))
    time.sleep(2)
    send(
        {"dpid": 1, "command": "delete_strict", "flow": f"priority=50,ip,nw_dst={ip}"} for ip in ips
    )
    _wait(lambda: _status(sock)["model"]["rules"] == n, 15, "model: 10 routes deleted")
    assert len(lab.dump_flows(1)) == sum(1 for e in wl.entries if e.dpid == 1)
    time.sleep(3)
    assert _faults(sock) == [], _log(env)

    known: set[int] = set()
    for f in run.faults:
        t_inj = time.time()
        for cmd, *a in f.inject:
            lab.ofctl(f.dpid, cmd, *a)
        row, deadline = None, time.monotonic() + 20
        while time.monotonic() < deadline:
            rows = [
                r
                for r in _faults(sock)
                if r["kind"] == EXPECT[f.key]
                and r["state"] == "open"
                and (r["id"] not in known or r["last_seen"] >= t_inj)
            ]
            if rows:
                row = rows[0]
                break
            time.sleep(0.3)
        assert row is not None, (f.key, _faults(sock), _log(env))
        t0 = time.monotonic()
        ans = json.loads(pazzctl(sock, "localize", str(row["id"]), "--json").stdout)
        assert time.monotonic() - t0 < 5
        assert ans["dpid"] == f.dpid, (f.key, ans)
        if f.expect_entry:
            assert f.expect_entry in ans["cause"], (f.key, ans)  # the entry it names
        if f.key == "misroute":
            assert ans["finding"] == "changed" and ans["misrouting_hop"] == f"s{f.dpid}"
        if f.key == "delete":
            assert ans["finding"] == "missing" and ans["entry"] is None
        shown = json.loads(pazzctl(sock, "faults", "show", str(row["id"]), "--json").stdout)
        assert shown["polled"]["dpid"] == f.dpid
        m = metrics_of(run.status["metrics"])
        assert m[f'pazz_faults_detected_total{{class="{EXPECT[f.key]}"}}'] >= 1
        assert m[f'pazz_faults_open{{class="{EXPECT[f.key]}"}}'] >= 1
        known |= {r["id"] for r in _faults(sock)}
        lab.restore()
    m = metrics_of(run.status["metrics"])
    assert m["pazz_detection_latency_seconds_count"] >= 4
    assert m['pazz_reports_total{result="fault"}'] > 0
    assert m["pazz_fuzz_probes_sent_total"] > 0
    # The faults were behind the controller's back: the model still holds its rules.
    assert _status(sock)["model"]["rules"] == n


def test_a_flow_sent_down_another_ecmp_bucket_is_a_fault_at_that_switch(env):
    """ovs.select_hash (the default): pazzd judges each flow against the one path Open
    vSwitch's hash picks. Behind the controller's back, s1's SELECT group gets its buckets
    in the other order: the same paths exist, but every flow through it now leaves by the
    other bucket. A fault opens, and localization names s1's group beside the intended one
    (the clean run before is the check that the model's pick is the switch's)."""
    lab, run = env["lab"], env["run"]
    sock = run.sock
    (line,) = [ln for ln in lab.ofctl(1, "dump-groups").splitlines() if "type=select" in ln]
    head, *buckets = line.strip().split(",bucket=")
    assert len(buckets) == 2, line
    plain = [b.split(",", 1)[1] if b.startswith("bucket_id:") else b for b in buckets]
    known = {r["id"] for r in _faults(sock)}
    t_inj = time.time()
    lab.ofctl(1, "mod-group", ",".join([head, *(f"bucket={b}" for b in reversed(plain))]))
    lab.ovs.appctl("revalidator/purge")
    try:
        row, deadline = None, time.monotonic() + 30
        while row is None and time.monotonic() < deadline:
            rows = [
                r
                for r in _faults(sock)
                if r["state"] == "open" and (r["id"] not in known or r["last_seen"] >= t_inj)
            ]
            row = rows[0] if rows else None
            time.sleep(0.3)
        assert row is not None, (_faults(sock), _log(env))
        ans = json.loads(pazzctl(sock, "localize", str(row["id"]), "--json").stdout)
        assert ans["dpid"] == 1 and ans["finding"] == "changed_group", ans
        # The group as the switch has it (buckets swapped) beside the intended one.
        assert ans["entry"].split(",bucket=")[1:] == ans["intended"].split(",bucket=")[:0:-1]
    finally:
        lab.ofctl(1, "mod-group", ",".join([head, *(f"bucket={b}" for b in plain)]))
        lab.ovs.appctl("revalidator/purge")
