"""A real pazzd with an enforced loop_free policy under a burst of FlowMods without a
barrier in between: the API answers within 1 s throughout, every FlowMod is either
relayed to the switch or refused with an OFPT_ERROR, the two halves of a loop pushed in
the burst are refused, and SIGTERM in the middle of a larger burst exits within 5 s."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import threading
import time

import ofwire as of
from pazzapi import call
from tests.pazzd.helpers import Pazzd, base_config, free_port, write_config
from tests.pazzd.proxy.ofhelpers import flow_mod, ofpp, out
from tests.reliability.peers import RawSwitch, read_msg, wait_for

# The grid workload of base_config is a ring of four switches: s1 port 2 to s2, s2 port 3
# to s4, s4 port 4 to s3, s3 port 1 back to s1.
RING = {1: 2, 2: 3, 4: 4, 3: 1}


class Controller:
    """Accepts the proxy's connection per switch, and keeps every message it gets."""

    def __init__(self) -> None:
        self.writers: list[asyncio.StreamWriter] = []
        self.got: list[bytes] = []
        self.server = None

    async def start(self) -> int:
        self.server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        return self.server.sockets[0].getsockname()[1]

    async def _accept(self, reader, writer) -> None:
        writer.write(of.hello([4]))
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
            await read_msg(reader)
            self.writers.append(writer)
            while True:
                self.got.append(await read_msg(reader))

    def errors(self) -> set[int]:
        return {of.header(m)[3] for m in self.got if of.header(m)[1] == of.OFPT_ERROR}

    async def stop(self) -> None:
        for w in self.writers:
            w.transport.abort()
        self.server.close()


def route(xid: int, i: int, port: int) -> bytes:
    match = ofpp.OFPMatch(
        eth_type=0x800, ipv4_dst=(f"10.{200 + i // 250}.{i % 250}.0", "255.255.255.0")
    )
    return flow_mod(xid, priority=300, match=match, actions=[out(port)])


class StatusWatch(threading.Thread):
    """Asks pazzd's status every 50 ms and keeps the slowest answer."""

    def __init__(self, sock: str) -> None:
        super().__init__(daemon=True)
        self.sock, self.worst, self.failed = sock, 0.0, []
        self.halt = threading.Event()

    def run(self) -> None:
        while not self.halt.is_set():
            t0 = time.monotonic()
            try:
                call(self.sock, "status", timeout=5)
            except Exception as e:  # noqa: BLE001  kept for the assertion
                self.failed.append(repr(e))
            self.worst = max(self.worst, time.monotonic() - t0)
            self.halt.wait(0.05)


def flowmods_at(sw: RawSwitch) -> set[int]:
    return {of.header(m)[3] for m in sw.received if of.header(m)[1] == of.OFPT_FLOW_MOD}


def test_a_burst_under_an_enforced_policy_keeps_pazzd_responsive(tmp_path):
    ctl = Controller()
    listen = free_port()

    async def main():
        ctl_port = await ctl.start()
        cfg = base_config(tmp_path)
        cfg["controller"] = {
            "enabled": True,
            "listen": f"127.0.0.1:{listen}",
            "address": f"127.0.0.1:{ctl_port}",
            "audit_interval": 0,
        }
        cfg["intents"] = {
            "no_loops": False,
            "policies": [{"name": "no-loops-ever", "check": "loop_free", "enforce": True}],
        }
        d = Pazzd(write_config(tmp_path / "pazzd.yaml", cfg))
        sws = {dpid: RawSwitch(listen, dpid) for dpid in RING}
        watch = StatusWatch(d.sock)
        try:
            await asyncio.to_thread(d.wait_ready)
            conn = {}
            for dpid, sw in sws.items():
                n = len(ctl.writers)
                await sw.connect()
                assert await wait_for(lambda n=n: len(ctl.writers) > n, 10)
                conn[dpid] = ctl.writers[n]
            watch.start()
            # 480 routes on s1, and 20 of the same prefixes on s2 and s4 onwards round the
            # ring, all at once: none closes a loop, all pass.
            burst = {1: [route(1000 + i, i, RING[1]) for i in range(480)]}
            burst |= {
                d: [route(d * 1000 + 10000 + i, i, RING[d]) for i in range(20)] for d in (2, 4)
            }
            for dpid, msgs in burst.items():
                conn[dpid].write(b"".join(msgs))
            xids = {d: {of.header(m)[3] for m in msgs} for d, msgs in burst.items()}

            def relayed(dpid):
                return flowmods_at(sws[dpid]) & xids[dpid]

            assert await wait_for(lambda: all(relayed(d) == xids[d] for d in xids), 60, 0.1), (
                {d: len(relayed(d)) for d in xids},
                len(ctl.errors()),
            )
            assert not ctl.errors()
            # s3 closes the ring for those 20 prefixes: each FlowMod refused, none relayed.
            closing = [route(30000 + i, i, RING[3]) for i in range(20)]
            conn[3].write(b"".join(closing))
            cx = {of.header(m)[3] for m in closing}
            assert await wait_for(lambda: cx <= ctl.errors(), 30, 0.1), len(ctl.errors() & cx)
            await asyncio.sleep(0.3)
            assert not (flowmods_at(sws[3]) & cx)
            watch.halt.set()
            await asyncio.to_thread(watch.join, 10)
            assert not watch.failed, watch.failed[:3]
            assert watch.worst < 1.0, f"status took {watch.worst:.2f} s during the burst"

            # 5,000 more, each judged and refused, and SIGTERM while the guard is at them.
            conn[3].write(b"".join(route(40000 + i, i % 20, RING[3]) for i in range(5000)))
            await asyncio.sleep(0.5)
            t0 = time.monotonic()
            d.proc.send_signal(signal.SIGTERM)
            rc = await asyncio.to_thread(d.proc.wait, 30)
            took = time.monotonic() - t0
            assert took < 5.0, f"pazzd took {took:.1f} s to exit under the burst"
            assert rc == 0, d.log_text()[-2000:]
        finally:
            watch.halt.set()
            for sw in sws.values():
                await sw.close()
            await ctl.stop()
            d.stop()

    asyncio.run(main())
