"""A switch that never answers barriers cannot grow the proxy's pending
changes and barrier requests without bound; it is dropped after barrier_timeout."""

from __future__ import annotations

import asyncio

import pytest

from tests.pazzd.proxy.ofhelpers import flow_mod, ofpp, out
from tests.reliability.peers import RawControllerServer, RawSwitch, start_proxy, wait_for

MAX_PENDING = 100


def test_switch_without_barrier_replies_is_bounded_then_dropped():
    async def main():
        ctl = RawControllerServer()
        proxy = await start_proxy(await ctl.start(), max_pending=MAX_PENDING, barrier_timeout=1.5)
        sw = RawSwitch(proxy.port, dpid=9, barriers=False)
        peak = [0, 0]
        try:
            await sw.connect()
            await asyncio.wait_for(ctl.connected.wait(), 5)
            s = proxy.switches[9]
            assert await wait_for(lambda: s.up_ready, 5)
            w = ctl.writers[0]
            xid = 1
            for _ in range(500):  # 5000 FlowMods, 10 per write
                batch = []
                for _ in range(10):
                    m = ofpp.OFPMatch(eth_type=0x800, ipv4_dst=(0x0A000000 + xid, 0xFFFFFFFF))
                    batch.append(flow_mod(xid, match=m, actions=[out(1)]))
                    xid += 1
                w.write(b"".join(batch))
                await asyncio.sleep(0)
                peak[0] = max(peak[0], len(s.pending))
                peak[1] = max(peak[1], sum(r.kind == "barrier" for r in s.own.values()))
                if s.closed:
                    break
            for _ in range(100):
                peak[0] = max(peak[0], len(s.pending))
                peak[1] = max(peak[1], sum(r.kind == "barrier" for r in s.own.values()))
                await asyncio.sleep(0.005)
            assert peak[0] <= MAX_PENDING + 500, peak
            assert peak[1] <= MAX_PENDING + 50, peak
            assert await wait_for(lambda: s.closed, 5)
            assert proxy.barrier_drops == 1
            assert not s.pending and not s.own
        finally:
            await sw.close()
            await proxy.stop()
            await ctl.stop()

    asyncio.run(asyncio.wait_for(main(), 30))


def test_unanswered_own_requests_leave_nothing_behind():
    """A flow dump or barrier of the proxy's that times out is forgotten (a late reply is
    still swallowed): the audit of a mute switch does not leak one entry per round."""

    async def main():
        ctl = RawControllerServer()
        proxy = await start_proxy(await ctl.start(), request_timeout=0.2, barrier_timeout=60)
        sw = RawSwitch(proxy.port, dpid=10, barriers=False)  # nor does it answer dumps
        try:
            await sw.connect()
            assert await wait_for(lambda: 10 in proxy.switches, 5)
            s = proxy.switches[10]
            for _ in range(5):
                with pytest.raises(TimeoutError):
                    await proxy.dump_flows(10)
                with pytest.raises(TimeoutError):
                    await proxy.barrier(10)
            assert not s.own
        finally:
            await sw.close()
            await proxy.stop()
            await ctl.stop()

    asyncio.run(asyncio.wait_for(main(), 30))
