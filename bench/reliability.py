"""Hostile and broken peers against pazzd's proxy and tester, measured (docs/reliability.md).

    python bench/reliability.py [--src DIR] [--seconds S] [--total-mb MB] [--hello N]
                                [--agents N] [--json]

Every part runs pazzd's code from --src (default: this checkout) in a child process, so
that the same script measures an older checkout too (`git archive REV | tar -x -C DIR`).
Everything is on loopback and bounded in time and bytes; every process and socket it
opens is closed before it returns.
- stalled_controller: a switch floods 32 KiB PACKET_INs for at most S seconds / MB
  megabytes towards a controller that never reads; the proxy process's RSS is sampled.
- stalled_switch: the same the other way round (PACKET_OUTs to a switch that never reads).
- hello_only: N connections that send HELLO and nothing else; how many the proxy still
  holds after its handshake timeout (10 s) plus 2 s.
- forged_agents: N sFlow datagrams, each with another agent address, one sequence jump
  of 2^31 - 1; the tester's per-agent state, log keys and `lost` count after them.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import struct
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

PROXY_CHILD = r"""
import asyncio, dataclasses, json, sys
from pazzd.proxy import Proxy, ProxyConfig
kw = json.loads(sys.argv[1])
fields = {f.name for f in dataclasses.fields(ProxyConfig)}
async def main():
    p = Proxy(ProxyConfig(**{k: v for k, v in kw.items() if k in fields}))
    await p.start()
    print(p.port, flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    await p.stop()
asyncio.run(main())
"""

SFLOW_CHILD = r"""
import json, logging, sys, tracemalloc
from tester.engine import Tester
from tester.ifmap import IfMap
from tester.sflow import CounterSample, IfCounters, encode_datagram
from tester.store import FaultStore
logging.disable(logging.CRITICAL)
n = int(sys.argv[1])
class M:
    version = 1
store = FaultStore(":memory:")
t = Tester(M(), store, IfMap())
tracemalloc.start()
base = tracemalloc.get_traced_memory()[0]
t.process_datagram(encode_datagram("10.0.0.1", 0, 1, 0, []), now=1.0)
t.process_datagram(encode_datagram("10.0.0.1", 0, 2**31, 0, []), now=1.0)
lost_jump = t.stats.lost_datagrams
for i in range(n):
    a = f"10.{(i >> 16) & 255}.{(i >> 8) & 255}.{i & 255}"
    up, down = ([7, 6, 0, 0, st] + [0] * 14 for st in (3, 1))
    t.process_datagram(encode_datagram(a, 0, 5, 0, [CounterSample(1, 0, 7, IfCounters(*up))]),
                       now=1.0)
    t.process_datagram(encode_datagram(a, 0, 6, 0, [CounterSample(2, 0, 7, IfCounters(*down))]),
                       now=1.0)
grown = tracemalloc.get_traced_memory()[0] - base
print(json.dumps({"agents": n, "seq_state": len(t._seq), "if_state": len(t._ifstate),
                  "log_keys": len(t.rlog._last), "lost_after_one_jump": lost_jump,
                  "bytes_grown": grown}))
"""


def _env(src: Path) -> dict:
    return {**os.environ, "PYTHONPATH": str(src)}


def rss(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _hello() -> bytes:
    return struct.pack("!BBHI", 4, 0, 16, 0) + struct.pack("!HHI", 1, 8, 1 << 4)


def _msg(t: int, xid: int, body: bytes) -> bytes:
    return struct.pack("!BBHI", 4, t, 8 + len(body), xid) + body


async def _read(reader) -> bytes:
    hdr = await reader.readexactly(8)
    ln = struct.unpack_from("!H", hdr, 2)[0]
    return hdr + await reader.readexactly(ln - 8)


class ProxyChild:
    def __init__(self, src: Path, **kw) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", PROXY_CHILD, json.dumps(kw)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=_env(src),
            cwd=src,
        )
        self.port = int(self.proc.stdout.readline())

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.proc.stdin.close()
            self.proc.wait(timeout=10)
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


async def _stalled(src: Path, seconds: float, total: int, stalled: str) -> dict:
    """stalled: "controller" or "switch" stops reading; the other side floods."""
    conns: list = []

    async def accept(reader, writer):
        conns.append((reader, writer))
        writer.write(_hello())
        with contextlib.suppress(Exception, asyncio.CancelledError):
            await _read(reader)  # the proxy's HELLO
            ready.set()
            while stalled != "controller":
                await _read(reader)

    ready = asyncio.Event()
    server = await asyncio.start_server(accept, "127.0.0.1", 0)
    cport = server.sockets[0].getsockname()[1]
    child = ProxyChild(
        src,
        listen_host="127.0.0.1",
        listen_port=0,
        controller_port=cport,
        audit_interval=0,
        audit_delay=-1,
    )
    sw_w = None
    try:
        sw_r, sw_w = await asyncio.open_connection("127.0.0.1", child.port)
        sw_w.write(_hello())
        while True:
            m = await asyncio.wait_for(_read(sw_r), 10)
            if m[1] == 5:  # FEATURES_REQUEST
                body = struct.pack("!QIBB2xII", 1, 0, 254, 0, 0, 0)
                sw_w.write(_msg(6, struct.unpack_from("!I", m, 4)[0], body))
                break
        await asyncio.wait_for(ready.wait(), 10)
        if stalled == "controller":
            w = sw_w
            data = bytes(32 << 10)
            msg = _msg(
                10,
                1,
                struct.pack("!IHBBQ", 0xFFFFFFFF, len(data), 0, 0, 0)
                + b"\x00\x01\x00\x04\x00\x00\x00\x00\x00\x00"
                + data,
            )
        else:
            w = conns[0][1]
            data = bytes(32 << 10)
            msg = _msg(13, 1, struct.pack("!IIH6x", 0xFFFFFFFF, 0xFFFFFFFD, 0) + data)
        rss0 = rss(child.proc.pid)
        peak, sent = rss0, 0
        t0 = time.monotonic()
        while sent < total and time.monotonic() - t0 < seconds:
            w.write(msg)
            sent += len(msg)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(w.drain(), 0.05)
            peak = max(peak, rss(child.proc.pid))
            if w.transport.get_write_buffer_size() > (64 << 20):
                await asyncio.sleep(0.05)  # the sender itself would only buffer from here
            if child.proc.poll() is not None:
                break
        accepted = sent - w.transport.get_write_buffer_size()
        peak = max(peak, rss(child.proc.pid))
        return {
            "stalled": stalled,
            "seconds": round(time.monotonic() - t0, 1),
            "offered_mb": round(sent / 2**20, 1),
            "accepted_by_proxy_mb": round(accepted / 2**20, 1),
            "proxy_rss_start_mb": round(rss0 / 2**20, 1),
            "proxy_rss_peak_mb": round(peak / 2**20, 1),
        }
    finally:
        if sw_w is not None:
            sw_w.transport.abort()
        for _, wr in conns:
            wr.transport.abort()
        server.close()
        child.close()


async def _hello_only(src: Path, n: int) -> dict:
    async def accept(reader, writer):
        writer.transport.abort()

    server = await asyncio.start_server(accept, "127.0.0.1", 0)
    child = ProxyChild(
        src,
        listen_host="127.0.0.1",
        listen_port=0,
        controller_port=server.sockets[0].getsockname()[1],
        audit_interval=0,
        audit_delay=-1,
    )
    conns = []
    try:
        for _ in range(n):
            r, w = await asyncio.open_connection("127.0.0.1", child.port)
            w.write(_hello())
            conns.append((r, w))
        rss_open = rss(child.proc.pid)
        await asyncio.sleep(12)
        open_left = 0
        for r, _ in conns:
            try:
                while await asyncio.wait_for(r.read(65536), 0.01):
                    pass
            except TimeoutError:
                open_left += 1  # nothing, not closed: still held
            except ConnectionError:
                pass
        return {
            "connections": n,
            "still_open_after_12s": open_left,
            "proxy_rss_mb": round(rss_open / 2**20, 1),
        }
    finally:
        for _, w in conns:
            w.transport.abort()
        server.close()
        child.close()


def _forged_agents(src: Path, n: int) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", SFLOW_CHILD, str(n)],
        capture_output=True,
        text=True,
        env=_env(src),
        cwd=src,
        timeout=300,
    )
    if out.returncode:
        return {"error": out.stderr[-500:]}
    return json.loads(out.stdout)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--src", type=Path, default=ROOT)
    p.add_argument("--seconds", type=float, default=10.0)
    p.add_argument("--total-mb", type=int, default=1024)
    p.add_argument("--hello", type=int, default=500)
    p.add_argument("--agents", type=int, default=100_000)
    p.add_argument("--json", action="store_true")
    a = p.parse_args(argv)
    total = a.total_mb << 20
    res = {
        "src": str(a.src),
        "stalled_controller": asyncio.run(_stalled(a.src, a.seconds, total, "controller")),
        "stalled_switch": asyncio.run(_stalled(a.src, a.seconds, total, "switch")),
        "hello_only": asyncio.run(_hello_only(a.src, a.hello)),
        "forged_agents": _forged_agents(a.src, a.agents),
    }
    if a.json:
        print(json.dumps(res, indent=1))
    else:
        for k, v in res.items():
            print(f"{k}: {v}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
