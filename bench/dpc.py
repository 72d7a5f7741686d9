#!/usr/bin/env python3
"""Data-plane cost of Verify tagging: patched OVS (tagging on) vs stock Debian OVS 3.1.

One userspace bridge (datapath_type=netdev); tcpreplay (--topspeed, or --pps) injects frames from a
network namespace into port 1, a rule forwards them to port 2 (a veth into a sink
namespace), and the rate is port 1's rx_packets delta over a fixed window: the packets the
switch took in (a marked frame ends at port 2, reported, and is not sent: ovs-patches 0008).
On this machine the sender, not ovs-vswitchd, limits that rate, so each run also reads
the switch's own cost: the CPU time of all ovs-vswitchd threads over the window
(/proc/PID/task/*/schedstat, nanoseconds) per packet taken in. The CPU-time ratio is the
tagging overhead; the pps ratio only shows that forwarding keeps up. (pmd-stats-show
counts no cycles for the main thread, which polls veth ports.)
Roles, with the same rules on both builds:
  edge     ports 1 and 2 are Verify edge ports, sFlow on (1/1000): push + tag + report + pop
  probes   edge, and 2 frames in 300 carry the marked shim (the probe mark, 1000 probes/s at
           150k pps) on a verify-probe=trust port: each is reported 1/1 (rate limit 2000/s)
  marked   edge, every frame marked, rate limit 10^7/s: every packet is reported 1/1 (the
           cost of one probe report; use a low --pps)
  flood    edge, every frame marked, default rate limit (2000/s): a forged flood, the
           excess dropped by the meter
  transit  frames arrive already Verify-tagged, no edge ports: set_verify_port/rule only
Frame sizes 64 and 1500 bytes (--sizes). Runs alternate stock/patched; medians are reported.
For every role but edge the JSON also gives `vs_edge_cpu_ratio`, patched role / patched
edge in the same rep (e.g. the cost of reporting probes 1/1), and the rate-1 reports per
second each build sent (stock sends none: it cannot parse past the shim and has no
reports).

    PAZZ_OVS_PREFIX=$(ovs-patches/build.sh) .venv/bin/python bench/dpc.py --json
    ... bench/dpc.py --reps 3 --window 4 --pps 150000 --json   # CPU per packet, fixed rate
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scapy.all import IP, UDP, Ether, wrpcap  # noqa: E402

from cpc import tags  # noqa: E402
from pazzlab.ovs import (  # noqa: E402
    Cleanup,
    Netns,
    OvsInstance,
    VethPair,
    unique_name,
    wait_for_datapath_free,
)
from tester.sflow import decode  # noqa: E402

PROBES_PER_300 = 2  # marked frames in the `probes` pcap: 1000/s at 150k pps
SO_RCVBUFFORCE = 33  # Linux; the socket module does not name it


def frames(size: int, role: str, n: int = 64) -> list[bytes]:
    if role == "probes":
        n = 300
    marked = role in ("marked", "flood")
    out = []
    for i in range(n):
        f = bytes(
            Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02")
            / IP(src="10.0.0.1", dst="10.0.0.2")
            / UDP(sport=1000 + i, dport=80)
        )
        if role == "transit":
            f = f[:12] + tags.pack_header(0x10, 0x1D0F) + f[12:]
        elif marked or (role == "probes" and i % (300 // PROBES_PER_300) == 0):
            f = f[:12] + tags.pack_header(0, 1, marked=True) + f[12:]
        out.append(f + bytes(max(0, size - 4 - len(f))))  # size includes the 4-byte FCS
    return out


def count_reports(sock: socket.socket) -> tuple[int, int]:
    """(flow samples with sampling rate 1, other flow samples) waiting on the sFlow sink."""
    ones = others = 0
    sock.setblocking(False)
    while True:
        try:
            data = sock.recv(65535)
        except BlockingIOError:
            return ones, others
        for fs in decode(data).flows:
            if fs.sampling_rate == 1:
                ones += 1
            else:
                others += 1


def cpu_ns(pid: int) -> int:
    """Time on CPU of every thread of a process, in nanoseconds."""
    total = 0
    for t in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(FileNotFoundError, ProcessLookupError):  # a thread just ended
            total += int((t / "schedstat").read_text().split()[0])
    return total


def measure(prefix: str, role: str, size: int, window: float, pcap_dir: Path, pps: int = 0):
    """(packets per second taken in, ovs-vswitchd CPU nanoseconds per packet, sFlow flow
    samples per second with sampling rate 1 (probe reports), other flow samples per
    second)."""
    wait_for_datapath_free(600)  # another userspace ovs-vswitchd on the machine holds it
    c = Cleanup()
    try:
        rundir = tempfile.mkdtemp(prefix="pazz-bench-")
        c.push(shutil.rmtree, rundir, True)
        ovs = OvsInstance(prefix, rundir)
        c.push(ovs.stop)
        ovs.start()
        ovs.add_bridge("br0", dpid=1, other_config={"verify-tagging": "true"})
        src, dst = Netns(unique_name("bs")), Netns(unique_name("bd"))
        c.push(src.delete)
        c.push(dst.delete)
        a = VethPair.host(src, "eth0", "10.0.0.1/24")
        c.push(a.delete)
        b = VethPair.host(dst, "eth0", "10.0.0.2/24")
        c.push(b.delete)
        edge = {"verify-edge": "true"} if role != "transit" else None
        probe = {**edge, "verify-probe": "trust"} if edge and role != "edge" else edge
        if role == "marked":
            ovs.vsctl("set", "bridge", "br0", "other_config:verify-probe-report-rate=10000000")
        ovs.add_port("br0", a.outer, 1, probe)
        ovs.add_port("br0", b.outer, 2, edge)
        sink = None
        if role != "transit":
            sink = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            sink.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, 64 << 20)  # root: past rmem_max
            sink.bind(("127.0.0.1", 0))
            c.push(sink.close)
            ovs.vsctl(
                "--",
                "--id=@s",
                "create",
                "sflow",
                "agent=lo",
                f'target="127.0.0.1:{sink.getsockname()[1]}"',
                "sampling=1000",
                "header=128",
                "--",
                "set",
                "bridge",
                "br0",
                "sflow=@s",
            )
        # in_port only: stock OVS cannot parse past a Verify header, the rule must match both.
        ovs.ofctl("add-flow", "br0", "priority=10,in_port=1,actions=output:2")
        pcap = pcap_dir / f"{role}-{size}.pcap"
        if not pcap.exists():
            wrpcap(str(pcap), [Ether(f) for f in frames(size, role)])
        gen = src.popen(
            "tcpreplay",
            "-q",
            *([f"--pps={pps}"] if pps else ["--topspeed"]),
            "--loop=0",
            f"--duration={int(window) + 3}",
            "-i",
            "eth0",
            str(pcap),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        c.push(gen.kill)
        time.sleep(1.0)  # warm-up: megaflows installed, steady state
        pid = int((Path(rundir) / "ovs-vswitchd.pid").read_text())
        if sink is not None:
            count_reports(sink)  # drop the warm-up's samples
        t0, s0 = time.monotonic(), ovs.port_stats("br0")[1]["rx_packets"]
        c0 = cpu_ns(pid)
        time.sleep(window)
        c1 = cpu_ns(pid)
        t1, s1 = time.monotonic(), ovs.port_stats("br0")[1]["rx_packets"]
        cpp = (c1 - c0) / (s1 - s0) if s1 > s0 else None
        gen.kill()
        gen.wait()
        # Samples of the window (sFlow sends once a second: about one batch of slack).
        ones, others = count_reports(sink) if sink is not None else (0, 0)
        return (s1 - s0) / (t1 - t0), cpp, ones / (t1 - t0), others / (t1 - t0)
    finally:
        c.run()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--window", type=float, default=2.0, help="seconds per measurement")
    ap.add_argument("--stock-prefix", default="/usr")
    ap.add_argument(
        "--pps",
        type=int,
        default=0,
        help="offer this fixed rate instead of --topspeed: both builds then batch alike, so "
        "their CPU time per packet compares",
    )
    ap.add_argument(
        "--roles",
        default="edge,probes,transit",
        help="comma-separated: edge, probes, marked, flood, transit",
    )
    ap.add_argument("--sizes", default="64,1500", help="comma-separated frame sizes")
    args = ap.parse_args()
    patched = os.environ.get("PAZZ_OVS_PREFIX")
    if not patched:
        print("set PAZZ_OVS_PREFIX (ovs-patches/build.sh)", file=sys.stderr)
        return 2
    results: dict[str, dict[str, list[float]]] = {}
    cpu: dict[str, dict[str, list[float]]] = {}
    reports: dict[str, dict[str, list[float]]] = {}
    vs_edge: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as d:
        for _ in range(args.reps):
            for size in map(int, args.sizes.split(",")):
                for role in args.roles.split(","):
                    for build, prefix in (("stock", args.stock_prefix), ("patched", patched)):
                        pps, cpp, ones, others = measure(
                            prefix, role, size, args.window, Path(d), args.pps
                        )
                        case = f"{role}_{size}"
                        results.setdefault(case, {}).setdefault(build, []).append(pps)
                        reports.setdefault(case, {}).setdefault(build, []).append(ones)
                        if cpp is not None:
                            cpu.setdefault(case, {}).setdefault(build, []).append(cpp)
                # This rep's patched role against patched edge (e.g. probe reporting's cost).
                pe = cpu.get(f"edge_{size}", {}).get("patched", [])
                for role in args.roles.split(","):
                    pr = cpu.get(f"{role}_{size}", {}).get("patched", [])
                    if role != "edge" and pe and pr and len(pe) == len(pr):
                        vs_edge.setdefault(f"{role}_{size}", []).append(pr[-1] / pe[-1])
    out = {
        "unit": "pps",
        "reps": args.reps,
        "window_s": args.window,
        "offered_pps": args.pps,
        "cases": {},
    }
    for case, r in results.items():
        stock, pat = statistics.median(r["stock"]), statistics.median(r["patched"])
        c = cpu.get(case, {})
        c_stock = statistics.median(c["stock"]) if c.get("stock") else None
        c_pat = statistics.median(c["patched"]) if c.get("patched") else None
        out["cases"][case] = {
            "stock_pps": round(stock),
            "patched_pps": round(pat),
            "ratio": round(pat / stock, 4) if stock else None,
            "stock_cpu_ns_per_packet": round(c_stock) if c_stock else None,
            "patched_cpu_ns_per_packet": round(c_pat) if c_pat else None,
            # > 1: tagging costs that much more switch CPU time per packet.
            "cpu_ratio": round(c_pat / c_stock, 4) if c_stock and c_pat else None,
            "samples": {k: [round(x) for x in v] for k, v in r.items()},
            "cpu_ns_samples": {k: [round(x) for x in v] for k, v in c.items()},
            "rate1_reports_per_s": {
                k: round(statistics.median(v), 1) for k, v in reports.get(case, {}).items()
            },
        }
        if vs_edge.get(case):
            # > 1: the role costs that much more switch CPU per packet than edge.
            out["cases"][case]["vs_edge_cpu_ratio"] = round(statistics.median(vs_edge[case]), 4)
            out["cases"][case]["vs_edge_cpu_ratio_samples"] = [round(x, 4) for x in vs_edge[case]]
    if args.json:
        print(json.dumps(out, sort_keys=True))
    else:
        for case, v in out["cases"].items():
            print(
                f"{case:14s} stock {v['stock_pps']:>9} pps  patched {v['patched_pps']:>9} pps"
                f"  ratio {v['ratio']}  CPU ns/packet {v['stock_cpu_ns_per_packet']} -> "
                f"{v['patched_cpu_ns_per_packet']} ({v['cpu_ratio']})"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
