"""A peer that stops reading must not make the proxy buffer what the
other side sends. The proxy pauses reading from the sender while the stuck side's
transport is over its high-water mark, and drops the stuck peer after stall_timeout."""

from __future__ import annotations

import asyncio
import contextlib

from tests.reliability.peers import (
    RawControllerServer,
    RawSwitch,
    packet_in,
    packet_out,
    read_msg,
    rss_bytes,
    start_proxy,
    wait_for,
)

HIGH = 256 << 10
TOTAL = 24 << 20  # what the sender tries to push; the kernel's socket buffers hold a few MB
MSG = 32 << 10


async def _push(writer, make, total: int, stop_after: float) -> int:
    """Write messages until `total` bytes are out or a drain blocks for stop_after s."""
    sent, xid = 0, 1
    while sent < total:
        m = make(xid, MSG)
        writer.write(m)
        sent += len(m)
        xid += 1
        try:
            await asyncio.wait_for(writer.drain(), stop_after)
        except TimeoutError:
            break
    return sent


async def _watch(get, peak: list[int], stop: asyncio.Event) -> None:
    while not stop.is_set():
        with contextlib.suppress(Exception):
            peak[0] = max(peak[0], get())
        await asyncio.sleep(0.005)


def test_stalled_controller_pauses_the_switch_and_is_dropped():
    async def main():
        ctl = RawControllerServer(reading=False)
        port = await ctl.start()
        proxy = await start_proxy(port, write_buffer_high=HIGH, stall_timeout=1.5)
        sw = RawSwitch(proxy.port, dpid=0x21)
        stop, peak = asyncio.Event(), [0]
        try:
            await sw.connect()
            await asyncio.wait_for(ctl.connected.wait(), 5)
            s = proxy.switches[0x21]
            assert await wait_for(lambda: s.up_ready, 5)
            rss0 = rss_bytes()
            watcher = asyncio.ensure_future(
                _watch(lambda: s.up.get_write_buffer_size(), peak, stop)
            )
            sent = await _push(sw.writer, packet_in, TOTAL, stop_after=0.5)
            grown = rss_bytes() - rss0
            stop.set()
            await watcher
            # The switch was throttled: it could not push everything.
            assert sent < TOTAL
            # Buffered for the stuck controller: about one high-water mark plus one read.
            assert peak[0] <= HIGH + (512 << 10), peak[0]
            assert grown < 16 << 20, grown
            # The controller stays stuck: after stall_timeout its connection is dropped
            # and the switch connection stays.
            assert await wait_for(lambda: proxy.stuck_drops >= 1, 5)
            assert not s.closed and proxy.switches.get(0x21) is s
            assert s.sw.is_reading()
        finally:
            stop.set()
            await sw.close()
            await proxy.stop()
            await ctl.stop()

    asyncio.run(asyncio.wait_for(main(), 30))


def test_stalled_switch_pauses_the_controller_and_is_dropped():
    async def main():
        ctl = RawControllerServer(reading=True)
        port = await ctl.start()
        proxy = await start_proxy(port, write_buffer_high=HIGH, stall_timeout=1.5)
        sw = RawSwitch(proxy.port, dpid=0x22)
        stop, peak = asyncio.Event(), [0]
        try:
            await sw.connect(reading=False)
            await asyncio.wait_for(ctl.connected.wait(), 5)
            s = proxy.switches[0x22]
            assert await wait_for(lambda: s.up_ready, 5)
            watcher = asyncio.ensure_future(
                _watch(lambda: s.sw.get_write_buffer_size(), peak, stop)
            )
            sent = await _push(ctl.writers[0], packet_out, TOTAL, stop_after=0.5)
            stop.set()
            await watcher
            assert sent < TOTAL
            assert peak[0] <= HIGH + (512 << 10), peak[0]
            # The switch never reads again: it is dropped after stall_timeout.
            assert await wait_for(lambda: s.closed, 5)
            assert proxy.stuck_drops == 1
            assert 0x22 not in proxy.switches
        finally:
            stop.set()
            await sw.close()
            await proxy.stop()
            await ctl.stop()

    asyncio.run(asyncio.wait_for(main(), 30))


def test_reading_resumes_when_the_stuck_side_drains():
    """Flow control is not a disconnect: a controller that pauses and then reads again
    gets everything, in order, and the switch is never dropped."""

    async def main():
        ctl = RawControllerServer(reading=False)
        port = await ctl.start()
        proxy = await start_proxy(port, write_buffer_high=HIGH, stall_timeout=20)
        sw = RawSwitch(proxy.port, dpid=0x23)
        try:
            await sw.connect()
            await asyncio.wait_for(ctl.connected.wait(), 5)
            s = proxy.switches[0x23]
            assert await wait_for(lambda: s.up_ready, 5)
            n = 400  # 12.8 MB: more than the socket buffers hold
            push = asyncio.ensure_future(_push(sw.writer, packet_in, n * MSG, stop_after=10))
            assert await wait_for(lambda: not s.sw.is_reading(), 5)  # the switch is paused
            reader = ctl.writers[0].transport.get_protocol()._stream_reader
            got = 0
            async with asyncio.timeout(15):
                while got < n:
                    m = await read_msg(reader)
                    if m[1] == 10:
                        assert int.from_bytes(m[4:8], "big") == got + 1
                        got += 1
            assert await push == n * MSG
            assert proxy.stuck_drops == 0 and not s.closed
        finally:
            await sw.close()
            await proxy.stop()
            await ctl.stop()

    asyncio.run(asyncio.wait_for(main(), 40))
