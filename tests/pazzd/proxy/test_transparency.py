"""The example os-ken app through the proxy and directly: the controller sees the same.

What must be equal, message by message of the app's recording (JSON lines of every message
it receives, see examples/controller_app.py):
- the sequence of message types (FEATURES_REPLY, BARRIER_REPLY, MULTIPART_REPLY);
- the FEATURES_REPLY body byte for byte (xid aside);
- the flow-stats entries, compared per entry on table, priority, cookie, flags, timeouts,
  match bytes and instruction bytes, byte for byte. Durations and counters may differ.
Meanwhile the switch holds every entry with set_verify_rule:ID.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import ofwire as of
from pazzd.proxy import Proxy, ProxyConfig

pytestmark = pytest.mark.ovs
ROOT = Path(__file__).resolve().parents[3]


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_app(cleanup, port: int, record: Path, netns=None) -> subprocess.Popen:
    pre = ["ip", "netns", "exec", netns.name] if netns is not None else []
    p = subprocess.Popen(
        [
            *pre,
            sys.executable,
            str(ROOT / "examples/controller_app.py"),
            "--port",
            str(port),
            "--record",
            str(record),
        ],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=open(str(record) + ".log", "w"),  # noqa: SIM115
        start_new_session=True,
    )

    def stop():
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGTERM)
            try:
                p.wait(5)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(5)

    cleanup.push(stop)
    return p


def wait_record(record: Path, timeout: float = 30) -> list[dict]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if record.exists():
            lines = [json.loads(x) for x in record.read_text().splitlines() if x.strip()]
            if any(x["type"] == of.OFPT_MULTIPART_REPLY for x in lines):
                return lines
        time.sleep(0.1)
    raise TimeoutError(
        f"no flow-stats reply recorded in {record}: "
        f"{Path(str(record) + '.log').read_text()[-2000:]}"
    )


def view(lines: list[dict]):
    """What must be equal with and without the proxy."""
    types, feats, entries = [], [], []
    for x in lines:
        m = bytes.fromhex(x["hex"])
        types.append(x["type"])
        if x["type"] == of.OFPT_FEATURES_REPLY:
            feats.append(m[8:])
        elif x["type"] == of.OFPT_MULTIPART_REPLY:
            body = m[16:]
            off = 0
            while off < len(body):
                ln = int.from_bytes(body[off : off + 2], "big")
                e = body[off : off + ln]
                # table, priority/idle/hard/flags, cookie, then match + instructions.
                entries.append((e[2], e[12:20], e[24:32], e[48:]))
                off += ln
    return types, feats, sorted(entries)


def test_controller_sees_the_same_through_the_proxy(ovs, bridge, cleanup, tmp_path):
    br = bridge(dpid=0x11)
    # 1. Direct.
    p1 = free_port()
    rec1 = tmp_path / "direct.jsonl"
    start_app(cleanup, p1, rec1, ovs.netns)  # beside the switch, in its namespace
    time.sleep(1.5)
    ovs.vsctl("set-controller", br, f"tcp:127.0.0.1:{p1}")
    direct = wait_record(rec1)
    assert "set_verify_rule" not in ovs.dump_flows(br)
    ovs.vsctl("set-controller", br, "tcp:127.0.0.1:1")
    ovs.ofctl("del-flows", br)
    # 2. Through the proxy.
    p2 = free_port()
    rec2 = tmp_path / "proxy.jsonl"
    start_app(cleanup, p2, rec2)
    time.sleep(1.5)

    async def main():
        cfg = ProxyConfig(
            listen_host="127.0.0.1",
            listen_port=0,
            controller_port=p2,
            listen_unix=str(ovs.rundir / "pazzd.sock"),
            audit_interval=0,
            audit_delay=-1,
        )
        px = Proxy(cfg)
        await px.start()
        try:
            ovs.vsctl("set-controller", br, f"unix:{px.config.listen_unix}")
            loop = asyncio.get_running_loop()
            lines = await loop.run_in_executor(None, wait_record, rec2)
            dump = ovs.dump_flows(br)
            assert await px.audit(0x11) == []
            return lines, dump, px.intended(0x11)
        finally:
            await px.stop()

    proxied, dump, intended = asyncio.run(main())
    assert view(proxied) == view(direct)
    n = len(view(direct)[2])
    assert n == 10
    assert dump.count("set_verify_rule:") == n == len({e.rule_id for e in intended})
