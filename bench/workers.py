"""pazzd with tester workers over Thrift: samples judged per second, end to end.

pazzd runs as a subprocess on a pazzdata.workloads grid with `--tester-workers N` for each N
asked (1 is the in-process tester). Reports from the reference data plane, packed into
sFlow v5 datagrams as patched OVS sends them, go over UDP from one socket per agent
(as switches do), paced at each offered rate. The rate is what pazzd's counters say it
judged per second while the sender ran; loss is what was not judged (kernel drops).

    python bench/workers.py [--workers 1,2] [--seconds 5] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from bench.tester import reports  # noqa: E402
from cpc.model import Model  # noqa: E402
from pazzapi import ApiError, call  # noqa: E402
from pazzdata import workloads  # noqa: E402
from tester.emit import ReferenceEmitter, agent_of  # noqa: E402

BASE = 100


def _config(d: Path, wl, port: int, **sections) -> Path:
    """pazzd.yaml for the workload, sFlow on port; sections: more config (scaleout: ...)."""
    topo, rules = d / "topology.yaml", d / "rules.jsonl"
    wl.write(topo, rules)
    ifs = [
        {"agent": agent_of(s), "ifindex": BASE + p, "port": f"{s}:{p}"}
        for s in sorted(wl.topo.switches)
        for p in wl.topo.ports_of(s)
    ]
    cfg = {
        "topology": str(topo),
        "rules": str(rules),
        "sflow": {"listen": f"127.0.0.1:{port}", "interfaces": ifs},
        "metrics": {"listen": "127.0.0.1:0"},
        "api": {"socket": str(d / "pazzd.sock")},
        "database": str(d / "faults.db"),
        "log_level": "warning",
        **sections,
    }
    path = d / "pazzd.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def _free_udp() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(wl, m, n: int, seconds: float, per: int, flows: int, rate: float) -> dict:
    with tempfile.TemporaryDirectory(prefix="pazz-bench-workers-") as tmp:
        d = Path(tmp)
        port = _free_udp()
        cfg = _config(d, wl, port)
        p = subprocess.Popen(
            [sys.executable, "-m", "pazzd", "--config", str(cfg), "--tester-workers", str(n)],
            stderr=subprocess.DEVNULL,
        )
        sock = str(d / "pazzd.sock")
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    call(sock, "status", timeout=5)
                    break
                except (OSError, ApiError):
                    if time.monotonic() > deadline or p.poll() is not None:
                        raise RuntimeError("pazzd did not start") from None
                    time.sleep(0.2)
            em = ReferenceEmitter(base=BASE)
            for egress, h, vp, vr in reports(wl, m, flows):
                em.add(egress, h, vp, vr)
            by_agent: dict[str, list[bytes]] = {}
            for dg in em.flush(per_datagram=per):
                by_agent.setdefault(socket.inet_ntoa(dg[8:12]), []).append(dg)
            socks = {a: socket.socket(socket.AF_INET, socket.SOCK_DGRAM) for a in by_agent}
            t_before = call(sock, "status")["tester"]
            before, dg_before = t_before["reports"], t_before["datagrams"]
            sent = 0
            order = [(socks[a], dg) for a, dgs in by_agent.items() for dg in dgs]
            gap = per / rate  # seconds between datagrams at the offered sample rate
            t0 = time.perf_counter()
            while (now := time.perf_counter()) - t0 < seconds:
                due = int((now - t0) / gap)
                while sent < due:
                    s, dg = order[sent % len(order)]
                    s.sendto(dg, ("127.0.0.1", port))
                    sent += 1
                time.sleep(min(0.001, gap))
            el = time.perf_counter() - t0
            time.sleep(1.0)
            st = call(sock, "status")
            got = st["tester"]["reports"] - before
            dgs_got = st["tester"]["datagrams"] - dg_before
            for s in socks.values():
                s.close()
            return {
                "workers": n,
                "offered_per_s": rate,
                "samples_per_s": round(got / el),
                "sent_datagrams": sent,
                "judged_samples": got,
                "datagram_loss": round(1 - dgs_got / sent, 3) if sent else 0.0,
                "fault_samples": st["tester"]["fault_samples"],
            }
        finally:
            p.terminate()
            p.wait(timeout=15)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", default="1,2", help="comma-separated worker counts")
    ap.add_argument("--size", type=int, default=3, help="grid size (size x size switches)")
    ap.add_argument("--rules", type=int, default=2000)
    ap.add_argument("--flows", type=int, default=2000)
    ap.add_argument("--per-datagram", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument(
        "--rates", default="10000,20000,40000", help="offered samples per second, comma-separated"
    )
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    wl = workloads.generate("grid", a.size, a.rules, rule_ids=True)
    m = Model(wl.topo)
    m.add_entries(wl.entries, wl.groups)
    runs = [
        run(wl, m, int(n), a.seconds, a.per_datagram, a.flows, float(r))
        for n in a.workers.split(",")
        for r in a.rates.split(",")
    ]
    out = {
        "topology": f"grid{a.size * a.size}",
        "rules": m.rule_count(),
        "per_datagram": a.per_datagram,
        "runs": runs,
    }
    print(json.dumps(out) if a.json else json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
