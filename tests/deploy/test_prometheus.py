"""A real Prometheus (Debian's, on loopback, with its own data directory) scrapes a real
pazzd and evaluates deploy/pazz-alerts.yml: every metric and label that an alert rule or a
Grafana panel queries exists and returns data in the scenario it is meant for, the rules
evaluate without error, and the alerts of the scenario go pending or fire."""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
import uuid
from pathlib import Path

import pytest
import yaml

from cpc.fields import parse_header
from cpc.refdp import RefDataPlane
from pazzdata import workloads
from pazzlab.flowhash import select_bucket
from pazzlab.natsserver import NatsServer
from tester.emit import ReferenceEmitter, agent_of
from tests.pazzd.helpers import Pazzd, base_config, free_port, write_config
from tests.tools import require_tool

pytestmark = pytest.mark.slow  # about 15 s

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
BASE = 100  # ifIndex = BASE + OpenFlow port, as ReferenceEmitter numbers them
NAME = r"(?:pazz_[a-z0-9_]+|up)"
SELECTOR = re.compile(rf"(?<![\w:])({NAME})(\{{[^}}]*\}})?")
LABEL_CLAUSE = re.compile(r"\b(?:by|without|on|ignoring)\s*\(([^)]*)\)")


class Prom:
    """prometheus on 127.0.0.1, its data in a temporary directory, stopped by its pid."""

    def __init__(self, tool: str, d: Path, metrics_port: int) -> None:
        self.port = free_port()
        shutil.copy(DEPLOY / "pazz-alerts.yml", d / "pazz-alerts.yml")
        cfg = {
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "rule_files": ["pazz-alerts.yml"],
            "scrape_configs": [
                {
                    "job_name": "pazzd",
                    "static_configs": [{"targets": [f"127.0.0.1:{metrics_port}"]}],
                }
            ],
        }
        (d / "prometheus.yml").write_text(yaml.safe_dump(cfg))
        self.log = open(d / "prometheus.log", "w")  # noqa: SIM115
        self.proc = subprocess.Popen(
            [
                tool,
                f"--config.file={d / 'prometheus.yml'}",
                f"--storage.tsdb.path={d / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
            ],
            stdout=self.log,
            stderr=subprocess.STDOUT,
            cwd=d,
        )
        self.dir = d

    def api(self, path: str, **params) -> object:
        url = f"http://127.0.0.1:{self.port}/api/v1/{path}"
        if params:
            url += "?" + urllib.parse.urlencode(params)
        with urllib.request.urlopen(url, timeout=10) as r:
            body = json.loads(r.read())
        assert body["status"] == "success", body
        return body["data"]

    def query(self, expr: str) -> list:
        return self.api("query", query=expr)["result"]

    def wait(self, what: str, pred, timeout: float = 60):
        deadline = time.monotonic() + timeout
        while True:
            assert self.proc.poll() is None, self.log_text()
            with contextlib.suppress(OSError, ValueError, AssertionError):
                v = pred()
                if v:
                    return v
            assert time.monotonic() < deadline, f"{what}:\n{self.log_text()[-3000:]}"
            time.sleep(0.3)

    def log_text(self) -> str:
        self.log.flush()
        return (self.dir / "prometheus.log").read_text()

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.log.close()


@contextlib.contextmanager
def probe_sink():
    """Where the fuzzer's raw probes go: one end of a veth pair whose both ends sit in a
    network namespace of their own, with no address and no route, so no probe leaves it.
    Yields the fuzz.inject value (netns:NS:IFNAME); the namespace is deleted by name."""
    ip = shutil.which("ip")
    if os.geteuid() != 0 or ip is None:
        pytest.skip("the fuzzer's netns injection needs root and ip(8)")
    ns = f"pazzprom{uuid.uuid4().hex[:6]}"  # not pz*: the lab's leftover checks own those
    subprocess.run([ip, "netns", "add", ns], check=True)
    try:
        subprocess.run(
            [ip, "-n", ns, "link", "add", "pa", "type", "veth", "peer", "name", "pb"], check=True
        )
        for dev in ("pa", "pb"):
            subprocess.run([ip, "-n", ns, "link", "set", dev, "up"], check=True)
        yield f"netns:{ns}:pa"
    finally:
        subprocess.run([ip, "netns", "del", ns], check=False)


def _traffic(wl):
    out = []
    for src in sorted(wl.hosts):
        for i, net in enumerate(sorted(wl.prefixes)):
            if wl.prefixes[net] == src:
                continue
            ip = net + 9 + i % 7
            h = parse_header(
                f"tcp_dst=80,tcp_src={2000 + i},nw_src=10.0.{int(src[1:]) - 1}.9,"
                f"nw_dst={ip >> 24}.{(ip >> 16) & 255}.{(ip >> 8) & 255}.{ip & 255}"
            )
            out.append((wl.hosts[src], h))
    return out


def _scenario(wl, sflow: tuple[str, int]) -> None:
    """Consistent reports, one match fault, a report from an unmapped interface, a malformed
    datagram, and one agent's datagrams with a gap and a late one."""
    ref = RefDataPlane(wl.topo, wl.entries, wl.groups, select=select_bucket)
    em = ReferenceEmitter(base=BASE)
    traffic = _traffic(wl)
    for ingress, h in traffic:
        for dl, final in ref.send_with_headers(ingress, h):
            em.add_delivery(dl, final)
    ingress, h = traffic[0]
    dl = next(x for x in ref.send(ingress, h) if x.kind == "egress")
    for _ in range(2):  # a wrong Verify_Rule, corroborated (tester.corroborate: 2)
        em.add(dl.egress, h, dl.verify_port, dl.verify_rule ^ 0x5A5A)
    em.add((dl.egress[0], 77), h, dl.verify_port, dl.verify_rule)  # ifIndex 177: unmapped
    dgs = em.flush(per_datagram=2)
    one = agent_of(dl.egress[0])
    mine = [d for d in dgs if socket.inet_ntoa(d[8:12]) == one]
    assert len(mine) >= 3
    late = mine[-2]
    order = [d for d in dgs if d is not late] + [late]  # a gap, then the datagram it missed
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        for d in order:
            s.sendto(d, sflow)
        s.sendto(b"\x00\x00\x00\x05garbage", sflow)


def test_prometheus_scrapes_pazzd_and_evaluates_the_alerts(tmp_path):
    tool = require_tool("prometheus", "prometheus")
    require_tool("nats-server", "nats-server")
    wl = workloads.generate("grid", 2, 40, rule_ids=True, acls=1)  # as base_config's
    with probe_sink() as sink, NatsServer() as nats:
        cfg = base_config(tmp_path)
        cfg["sflow"]["interfaces"] = [
            {"agent": agent_of(d), "ifindex": BASE + p, "port": f"{d}:{p}"}
            for d in sorted(wl.topo.switches)
            for p in wl.topo.ports_of(d)
        ]
        # s1's OVSDB is not there: its ifIndex map is stale (the config's interfaces stay).
        cfg["switches"] = [
            {"switch": "s1", "ovsdb": f"unix:{tmp_path}/no-ovsdb.sock", "agent": agent_of(1)}
        ]
        metrics_port = free_port()
        cfg["metrics"] = {"listen": f"127.0.0.1:{metrics_port}"}
        # The proxy with no switch and no controller: every switch and the controller down.
        cfg["controller"] = {
            "enabled": True,
            "listen": f"127.0.0.1:{free_port()}",
            "address": f"127.0.0.1:{free_port()}",
        }
        cfg["apps"] = [
            {"name": "router", "cookie": 0x10, "mask": 0xFF},
            {"name": "acl", "cookie": 0x20, "mask": 0xFF},
        ]
        cfg["fuzz"] = {
            "enabled": True,
            "rate": 20,
            "pairs": [["s1:5", "s2:5"]],
            "inject": {"s1:5": sink},
        }
        cfg["scaleout"] = {"nats": nats.url, "shards": 2}  # and one worker: its lag
        cfg_path = write_config(tmp_path / "pazzd.yaml", cfg)
        pz = Pazzd(cfg_path)
        prom = worker = None
        try:
            st = pz.wait_ready()
            worker = subprocess.Popen(
                [sys.executable, "-m", "pazzd", "worker", "--config", str(cfg_path)],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            (tmp_path / "prom").mkdir()
            prom = Prom(tool, tmp_path / "prom", metrics_port)
            prom.wait("pazzd scraped", lambda: prom.query('up{job="pazzd"} == 1'))
            host, port = st["sflow"].rsplit(":", 1)
            _scenario(wl, (host, int(port)))
            pz.call("flowmod", switch="s1", flow="priority=99,ip,nw_dst=10.0.1.9,actions=output:3")
            prom.wait(
                "the fault scraped",
                lambda: prom.query('pazz_faults_open{class="type_p_match"} == 1'),
            )
            prom.wait("the worker scraped", lambda: prom.query("pazz_scaleout_worker_lag_seconds"))
            time.sleep(3)  # a few scrapes with the scenario's counters
            _check_dashboard(prom)
            _check_alert_rules(prom)
            # A reload with a bad config: PazzConfigLoadError fires (no `for:`).
            cfg_path.write_text(cfg_path.read_text() + "tester:\n  settle: -1\n")
            pz.proc.send_signal(signal.SIGHUP)
            firing = prom.wait(
                "PazzConfigLoadError firing",
                lambda: [
                    a
                    for a in prom.api("alerts")["alerts"]
                    if a["labels"]["alertname"] == "PazzConfigLoadError" and a["state"] == "firing"
                ],
            )
            assert firing[0]["labels"]["instance"] == f"127.0.0.1:{metrics_port}"
            assert firing[0]["annotations"]["runbook_url"].endswith("#pazzconfigloaderror")
        finally:
            if prom is not None:
                prom.stop()
            if worker is not None:
                worker.terminate()
                worker.wait(15)
            pz.stop()


def _check_dashboard(prom: Prom) -> None:
    panels = json.loads((DEPLOY / "grafana-dashboard.json").read_text())["panels"]
    empty = {}
    for p in panels:
        for t in p.get("targets", []):
            res = prom.query(t["expr"])
            values = [float(r["value"][1]) for r in res]
            if not values or any(math.isnan(v) for v in values):
                empty[f"{p['title']}: {t['expr']}"] = res
    assert not empty, empty


def _check_alert_rules(prom: Prom) -> None:
    """Each selector of each rule returns series, which carry every label the rule uses;
    the rules evaluate without error; the scenario's alerts are pending or firing."""
    rules = [
        r
        for g in yaml.safe_load((DEPLOY / "pazz-alerts.yml").read_text())["groups"]
        for r in g["rules"]
    ]
    for r in rules:
        expr = r["expr"]
        labels_used = {x.strip() for c in LABEL_CLAUSE.findall(expr) for x in c.split(",")}
        labels_used |= set(re.findall(r"\$labels\.(\w+)", json.dumps(r.get("annotations", {}))))
        have: set[str] = set()
        for name, matchers in SELECTOR.findall(expr):
            labels_used |= set(re.findall(r"(\w+)\s*[!=]~?", matchers or ""))
            res = prom.query(f"{name}{matchers}")
            assert res, f"{r['alert']}: {name}{matchers} returns no series"
            have |= {k for s in res for k in s["metric"]}
        assert labels_used - {""} <= have, (r["alert"], labels_used - have)
    groups = prom.wait(
        "rules evaluated",
        lambda: [
            g
            for g in prom.api("rules")["groups"]
            if all(
                x.get("lastEvaluation", "").startswith("2") and x["health"] != "unknown"
                for x in g["rules"]
            )
        ],
    )
    bad = {x["name"]: x.get("lastError") for g in groups for x in g["rules"] if x["health"] != "ok"}
    assert not bad, bad
    active = {}
    for a in prom.api("alerts")["alerts"]:
        active.setdefault(a["labels"]["alertname"], []).append(a)
    assert len(active.get("PazzSwitchDisconnected", [])) == 4, active.keys()
    assert {a["labels"]["dpid"] for a in active["PazzSwitchDisconnected"]} == {"1", "2", "3", "4"}
    # No switch connected, so no controller connection: one failure, the switches' alerts.
    assert "PazzControllerDisconnected" not in active
    assert prom.query("pazz_controller_connected == 0")  # although the controller is down
    (fault,) = active["PazzFaultOpen"]
    assert fault["labels"]["class"] == "type_p_match" and fault["labels"]["job"] == "pazzd"
    assert "PazzUnknownInterfaceReports" in active and "PazzNoReports" not in active
