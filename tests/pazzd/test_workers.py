"""pazzd --tester-workers 2: sFlow judged in two worker processes that ask the model over
Thrift. Reports come from the reference data plane (cpc.refdp, not the model) through
real sFlow datagrams on UDP; each agent sends from its own socket, as switches do."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time

import pytest

from cpc.fields import format_header, parse_header
from cpc.refdp import RefDataPlane
from pazzdata import workloads
from pazzlab.flowhash import select_bucket
from tester.emit import ReferenceEmitter, agent_of

from .helpers import Pazzd, base_config, pazzctl, write_config
from .test_daemon import scrape

BASE = 100  # ifIndex = BASE + OpenFlow port, as ReferenceEmitter numbers them


class PazzdWorkers(Pazzd):
    def __init__(self, config, n: int) -> None:
        super().__init__(config)
        self.proc.kill()
        self.proc.wait()
        self.log = open(config.parent / "pazzd.log", "w")  # noqa: SIM115
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "pazzd", "--config", str(config), "--tester-workers", str(n)],
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


@pytest.fixture
def net(tmp_path):
    wl = workloads.generate("grid", 2, 40, rule_ids=True, acls=1)  # as tests/pazzd/helpers
    ifs = [
        {"agent": agent_of(d), "ifindex": BASE + p, "port": f"{d}:{p}"}
        for d in sorted(wl.topo.switches)
        for p in wl.topo.ports_of(d)
    ]
    cfg = base_config(tmp_path)
    cfg["sflow"]["interfaces"] = ifs
    ingress, h = _traffic(wl)[0]
    egress = (
        RefDataPlane(wl.topo, wl.entries, wl.groups, select=select_bucket)
        .send(ingress, h)[0]
        .egress
    )
    cfg["critical_flows"] = [
        {
            "name": "crit",
            "from": wl.topo.port_name(ingress),
            "to": wl.topo.port_name(egress),
            "header": format_header(h),
            "timeout": 4.0,
        }
    ]
    d = PazzdWorkers(write_config(tmp_path / "pazzd.yaml", cfg), 2)
    try:
        st = d.wait_ready()
        yield wl, d, st
    finally:
        d.stop()
        assert not any(p.startswith("pazzd.workers") for p in _cmdlines(d.proc.pid))


def _cmdlines(ppid: int) -> list[str]:
    """Command lines of ppid's living children (the workers must be gone after stop)."""
    out = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                if int(f.read().rsplit(")", 1)[1].split()[1]) != ppid:
                    continue
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                out.append(f.read().replace(b"\0", b" ").decode().split("-m ", 1)[-1])
        except (OSError, ValueError, IndexError):
            continue
    return out


def _traffic(wl):
    out = []
    for src in sorted(wl.hosts):
        for i, net in enumerate(sorted(wl.prefixes) * 4):
            if wl.prefixes[net] == src:
                continue
            ip = net + 9 + i % 7
            h = parse_header(
                f"tcp_dst=80,tcp_src={2000 + i},nw_src=10.0.{int(src[1:]) - 1}.9,"
                f"nw_dst={ip >> 24}.{(ip >> 16) & 255}.{(ip >> 8) & 255}.{ip & 255}"
            )
            out.append((wl.hosts[src], h))
    return out


def _send(addr, em: ReferenceEmitter, socks: dict) -> int:
    """Each agent from its own socket: SO_REUSEPORT keeps one agent on one worker."""
    n = 0
    for dg in em.flush(per_datagram=4):
        agent = socket.inet_ntoa(dg[8:12])
        s = socks.setdefault(agent, socket.socket(socket.AF_INET, socket.SOCK_DGRAM))
        s.sendto(dg, addr)
        n += 1
    return n


def _status(d):
    return json.loads(pazzctl(d.sock, "status", "--json").stdout)


def _wait(pred, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(0.1)
    return pred()


def test_workers_judge_reports_and_record_faults(net):
    wl, d, st = net
    host, port = st["sflow"].rsplit(":", 1)
    addr = (host, int(port))
    ref = RefDataPlane(wl.topo, wl.entries, wl.groups, select=select_bucket)
    em, socks = ReferenceEmitter(base=BASE), {}
    n = dgs = 0
    # The kernel hashes each agent's source port to a worker; with 4 agents both workers get
    # some with probability 7/8. Until they do, send again from new source ports.
    rounds = 0
    while rounds < 8:
        rounds += 1
        for ingress, h in _traffic(wl):
            for dl, final in ref.send_with_headers(ingress, h):
                n += em.add_delivery(dl, final)
        dgs += _send(addr, em, socks)
        s = _wait(lambda n=n: (x := _status(d))["tester"]["reports"] >= n and x)
        if all(w["datagrams"] > 0 for w in s["tester_workers"]):
            break
        for s_ in socks.values():
            s_.close()
        socks.clear()
    assert n > 100
    t = s["tester"]
    assert t["reports"] == n and t["consistent"] == n and t["fault_samples"] == 0, t
    assert t["datagrams"] == dgs
    if rounds == 1:  # an agent moved back to a worker that saw it sees a sequence gap
        assert t["lost_datagrams"] == 0
    workers = s["tester_workers"]
    assert [w["alive"] for w in workers] == [True, True]
    assert sum(w["datagrams"] for w in workers) == dgs
    assert all(w["datagrams"] > 0 for w in workers), workers
    assert json.loads(pazzctl(d.sock, "faults", "--json").stdout) == []
    text = pazzctl(d.sock, "status").stdout
    assert "workers" in text and "2/2 alive" in text, text

    # A wrong Verify_Rule on a report: a match fault, stored by the worker, counted by pazzd.
    # Sent twice: a fault opens on its second sample (tester.corroborate, 2 by default).
    ingress, h = _traffic(wl)[0]
    dl = next(x for x in ref.send(ingress, h) if x.kind == "egress")
    for _ in range(2):
        em.add(dl.egress, h, dl.verify_port, dl.verify_rule ^ 0x5A5A)
    t_last = time.time()
    _send(addr, em, socks)
    rows = _wait(lambda: json.loads(pazzctl(d.sock, "faults", "--json").stdout))
    assert len(rows) == 1 and rows[0]["egress"] == list(dl.egress), rows
    assert rows[0]["kind"] != "blackhole"
    assert rows[0]["actual"]["verify_rule"] == dl.verify_rule ^ 0x5A5A
    m = _wait(
        lambda: (
            (x := scrape(st["metrics"]))[
                'pazz_faults_detected_total{class="' + rows[0]["kind"] + '"}'
            ]
            == 1
            and x
        )
    )
    assert m, d.log_text()[-2000:]

    # Per-hop samples, the shim as the switches before built it (the reference's arrivals
    # over links), judged by the workers against the model's path prefixes: consistent.
    hops = ReferenceEmitter(base=BASE, ovs_marking=True)
    k = sum(hops.add_arrivals(ref.arrivals(i, x)) for i, x in _traffic(wl))
    _send(addr, hops, socks)
    s = _wait(lambda: (x := _status(d))["tester"]["hop_samples_judged"] >= k and x)
    assert k > 20 and s, _status(d)["tester"]
    t = s["tester"]
    assert t["hop_samples_judged"] == t["hop_consistent"] == k and t["hop_fault_samples"] == 0
    assert len(json.loads(pazzctl(d.sock, "faults", "--json").stdout)) == 1  # the report's
    # One of them with a wrong Verify_Port, twice: a fault before that switch, found by
    # the worker from the per-hop sample alone.
    port, hdr, vp, vr, _ = ref.arrivals(*_traffic(wl)[1])[0]
    for _ in range(2):
        hops.add_ingress(port, hdr, (vp ^ 0x10, vr))
    _send(addr, hops, socks)

    def hop_faults():
        rows = json.loads(pazzctl(d.sock, "faults", "--json").stdout)
        return [r for r in rows if r["localization"].get("sampled_at") == "hop"]

    rows = _wait(hop_faults)
    assert len(rows) == 1, rows
    assert rows[0]["egress"] == list(port) and rows[0]["actual"]["verify_port"] == vp ^ 0x10
    t = _wait(lambda: (x := _status(d)["tester"])["hop_fault_samples"] >= 2 and x)
    assert t and t["fault_samples"] == 2, t  # the report's two, earlier

    # A worker that dies is started again.
    victim = next(
        int(p) for p in os.listdir("/proc") if p.isdigit() and _is_worker(int(p), d.proc.pid)
    )
    os.kill(victim, signal.SIGKILL)
    s = _wait(
        lambda: (
            (x := _status(d))["tester"]["worker_restarts"] >= 1
            and all(w["alive"] for w in x["tester_workers"])
            and x
        ),
        timeout=15,
    )
    assert s, d.log_text()[-2000:]

    # The critical flow (the first flow) has been silent at its egress since its last
    # report, while it still enters (its ingress sampled 1 in 1): pazzd's blackhole timer,
    # fed with the workers' samples of it, says so from that report on.
    def still_entering():
        em.add_ingress(ingress, h)
        _send(addr, em, socks)
        return [
            r
            for r in json.loads(pazzctl(d.sock, "faults", "--json").stdout)
            if r["kind"] == "blackhole"
        ]

    rows = _wait(still_entering, timeout=15)
    assert len(rows) == 1 and rows[0]["location"].startswith("flow:"), rows
    assert rows[0]["localization"]["silent_since"] >= t_last - 1.0, (rows[0], t_last)
    for s_ in socks.values():
        s_.close()


def _is_worker(pid: int, ppid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            if int(f.read().rsplit(")", 1)[1].split()[1]) != ppid:
                return False
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return b"pazzd.workers" in f.read()
    except (OSError, ValueError, IndexError):
        return False
