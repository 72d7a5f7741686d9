#!/usr/bin/env python3
"""Data-plane cost of Verify tagging: patched OVS (tagging on) vs stock Debian OVS 3.1.

One userspace bridge (datapath_type=netdev); tcpreplay (--topspeed, or --pps) injects frames from a
network namespace into port 1, a rule forwards them to port 2 (a veth into a sink
namespace), and the forwarding rate is port 2's tx_packets delta over a fixed window.
On this machine the sender, not ovs-vswitchd, limits that rate, so each run also reads
the switch's own cost: the CPU time of all ovs-vswitchd threads over the window
(/proc/PID/task/*/schedstat, nanoseconds) per forwarded packet. The CPU-time ratio is the
tagging overhead; the pps ratio only shows that forwarding keeps up. (pmd-stats-show
counts no cycles for the main thread, which polls veth ports.)
Roles, with the same rules on both builds:
  edge     ports 1 and 2 are Verify edge ports, sFlow on (1/1000): push + tag + report + pop
  transit  frames arrive already Verify-tagged, no edge ports: set_verify_port/rule only
Frame sizes 64 and 1500 bytes. Runs alternate stock/patched; medians are reported.

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
from pazzlab.ovs import Cleanup, Netns, OvsInstance, VethPair, unique_name  # noqa: E402


def frames(size: int, tagged: bool, n: int = 64) -> list[bytes]:
    out = []
    for i in range(n):
        f = bytes(
            Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02")
            / IP(src="10.0.0.1", dst="10.0.0.2")
            / UDP(sport=1000 + i, dport=80)
        )
        if tagged:
            f = f[:12] + tags.pack_header(0x10, 0x1D0F) + f[12:]
        out.append(f + bytes(max(0, size - 4 - len(f))))  # size includes the 4-byte FCS
    return out


def cpu_ns(pid: int) -> int:
    """Time on CPU of every thread of a process, in nanoseconds."""
    total = 0
    for t in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(FileNotFoundError, ProcessLookupError):  # a thread just ended
            total += int((t / "schedstat").read_text().split()[0])
    return total


def measure(prefix: str, role: str, size: int, window: float, pcap_dir: Path, pps: int = 0):
    """(packets per second forwarded, ovs-vswitchd CPU nanoseconds per packet)."""
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
        edge = {"verify-edge": "true"} if role == "edge" else None
        ovs.add_port("br0", a.outer, 1, edge)
        ovs.add_port("br0", b.outer, 2, edge)
        if role == "edge":
            sink = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
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
            wrpcap(str(pcap), [Ether(f) for f in frames(size, role == "transit")])
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
        t0, s0 = time.monotonic(), ovs.port_stats("br0")[2]["tx_packets"]
        c0 = cpu_ns(pid)
        time.sleep(window)
        c1 = cpu_ns(pid)
        t1, s1 = time.monotonic(), ovs.port_stats("br0")[2]["tx_packets"]
        cpp = (c1 - c0) / (s1 - s0) if s1 > s0 else None
        gen.kill()
        gen.wait()
        return (s1 - s0) / (t1 - t0), cpp
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
    args = ap.parse_args()
    patched = os.environ.get("PAZZ_OVS_PREFIX")
    if not patched:
        print("set PAZZ_OVS_PREFIX (ovs-patches/build.sh)", file=sys.stderr)
        return 2
    results: dict[str, dict[str, list[float]]] = {}
    cpu: dict[str, dict[str, list[float]]] = {}
    with tempfile.TemporaryDirectory() as d:
        for _ in range(args.reps):
            for role in ("edge", "transit"):
                for size in (64, 1500):
                    for build, prefix in (("stock", args.stock_prefix), ("patched", patched)):
                        pps, cpp = measure(prefix, role, size, args.window, Path(d), args.pps)
                        results.setdefault(f"{role}_{size}", {}).setdefault(build, []).append(pps)
                        if cpp is not None:
                            cpu.setdefault(f"{role}_{size}", {}).setdefault(build, []).append(cpp)
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
        }
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
