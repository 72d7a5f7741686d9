"""A real pazzd under several hostile peers at once (HELLO-only
proxy connections, idle API clients, forged sFlow agents, one corrupted report) stays
up and bounded, answers status, opens no false fault, and stops within 5 s."""

from __future__ import annotations

import random
import socket
import time

import ofwire as of
from cpc.fields import parse_header
from cpc.refdp import RefDataPlane
from pazzapi import call
from pazzdata import workloads
from pazzlab.flowhash import select_bucket
from tester.emit import ReferenceEmitter, agent_of
from tester.sflow import encode_datagram
from tests.pazzd.helpers import Pazzd, base_config, free_port, write_config

BASE = 100


def _rss(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def _status(sock: str, timeout: float = 2.0) -> dict:
    t0 = time.monotonic()
    st = call(sock, "status", timeout=timeout)
    assert time.monotonic() - t0 < timeout
    return st


def test_pazzd_under_hostile_peers(tmp_path):
    wl = workloads.generate("grid", 2, 40, rule_ids=True, acls=1)  # as base_config writes
    agents = sorted({agent_of(d) for d in wl.topo.switches})
    listen = free_port()
    cfg = base_config(tmp_path)
    cfg["sflow"]["interfaces"] = [
        {"agent": agent_of(d), "ifindex": BASE + p, "port": f"{d}:{p}"}
        for d in sorted(wl.topo.switches)
        for p in wl.topo.ports_of(d)
    ]
    cfg["sflow"]["agents"] = [*agents, "127.0.0.1"]
    cfg["controller"] = {
        "enabled": True,
        "listen": f"127.0.0.1:{listen}",
        "address": f"127.0.0.1:{free_port()}",
        "handshake_timeout": 1,
        "audit_interval": 0,
    }
    d = Pazzd(write_config(tmp_path / "pazzd.yaml", cfg))
    conns: list[socket.socket] = []
    try:
        st = d.wait_ready()
        host, port = st["sflow"].rsplit(":", 1)
        addr = (host, int(port))
        rss0 = _rss(d.proc.pid)
        # 200 HELLO-only proxy connections and 40 idle API clients, all held open.
        for _ in range(200):
            s = socket.create_connection(("127.0.0.1", listen))
            s.sendall(of.hello([4]))
            conns.append(s)
        for _ in range(40):
            s = socket.socket(socket.AF_UNIX)
            s.connect(d.sock)
            conns.append(s)
        assert _status(d.sock)["pid"] == d.proc.pid
        # Forged sFlow: 3000 agents, sequence jumps of 2^31, garbage.
        rng = random.Random(7)
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as u:
            for i in range(3000):
                agent = f"10.{rng.randrange(256)}.{rng.randrange(256)}.{rng.randrange(256)}"
                u.sendto(encode_datagram(agent, 0, rng.choice((1, 2**31 + i)), 0, []), addr)
                if i % 30 == 0:
                    u.sendto(bytes(rng.randrange(256) for _ in range(64)), addr)
                    time.sleep(0.001)
            # One corrupted report from a real agent, plus correct ones around it.
            ref = RefDataPlane(wl.topo, wl.entries, wl.groups, select=select_bucket)
            ingress = wl.hosts[sorted(wl.hosts)[0]]
            h = parse_header("tcp_dst=80,tcp_src=2000,nw_src=10.0.0.9,nw_dst=10.0.1.9")
            dl = next(x for x in ref.send(ingress, h) if x.kind == "egress")
            em = ReferenceEmitter(base=BASE)
            for _ in range(5):
                em.add(dl.egress, h, dl.verify_port, dl.verify_rule)
            em.add(dl.egress, h, dl.verify_port, dl.verify_rule ^ 0x5A5A)
            for dg in em.flush():
                u.sendto(dg, addr)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            t = _status(d.sock)["tester"]
            if t.get("reports", 0) >= 6:
                break
            time.sleep(0.1)
        assert t["reports"] == 6 and t["fault_samples"] == 1, t
        assert t["unknown_agent"] >= 2900, t
        assert t["lost_datagrams"] == 0, t
        assert call(d.sock, "faults", timeout=2) == []  # no fault from one corrupted sample
        # The HELLO-only connections are closed by the handshake timeout.
        time.sleep(1.5)
        closed = 0
        for s in conns[:200]:
            s.settimeout(0.05)
            try:
                while s.recv(4096):
                    pass
                closed += 1
            except (TimeoutError, BlockingIOError):
                pass
            except ConnectionError:
                closed += 1
        assert closed == 200
        assert _status(d.sock)["pid"] == d.proc.pid
        assert _rss(d.proc.pid) - rss0 < 64 << 20
        t0 = time.monotonic()
        d.proc.terminate()
        d.proc.wait(timeout=30)
        assert time.monotonic() - t0 < 5.0 and d.proc.returncode == 0
    finally:
        for s in conns:
            s.close()
        d.stop()
