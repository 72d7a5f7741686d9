"""The proxy's listener: HELLO-only and idle connections are not held
forever, and a flood of connections cannot exhaust descriptors or lock out switches."""

from __future__ import annotations

import asyncio
import contextlib
import logging

import ofwire as of
from tests.reliability.peers import RawControllerServer, RawSwitch, start_proxy, wait_for


async def _open_many(port: int, n: int, hello: bool) -> list:
    conns = []
    for _ in range(n):
        r, w = await asyncio.open_connection("127.0.0.1", port)
        if hello:
            w.write(of.hello([4]))
        conns.append((r, w))
    return conns


def _close_all(conns) -> None:
    for _, w in conns:
        w.transport.abort()


async def _closed_by_peer(r, timeout: float) -> bool:
    """True when the proxy closes this connection within timeout (it may send first)."""
    try:
        async with asyncio.timeout(timeout):
            while await r.read(65536):
                pass
        return True
    except (TimeoutError, ConnectionError):
        return False


def test_hello_only_connections_are_dropped_after_the_handshake_timeout():
    async def main():
        ctl = RawControllerServer()
        proxy = await start_proxy(await ctl.start(), handshake_timeout=0.5)
        conns = []
        try:
            conns = await _open_many(proxy.port, 60, hello=True)
            assert await wait_for(lambda: len(proxy._sessions) == 60, 5)
            closed = await asyncio.gather(*(_closed_by_peer(r, 3) for r, _ in conns))
            assert all(closed)
            assert len(proxy._sessions) == 0
            assert proxy.handshake_timeouts == 60
            # A real switch still gets in afterwards.
            sw = RawSwitch(proxy.port, dpid=5)
            await sw.connect()
            assert await wait_for(lambda: 5 in proxy.switches, 5)
            await asyncio.sleep(0.8)  # past the handshake timeout: it stays
            assert 5 in proxy.switches
            await sw.close()
        finally:
            _close_all(conns)
            await proxy.stop()
            await ctl.stop()

    asyncio.run(asyncio.wait_for(main(), 30))


def test_connection_cap_keeps_room_for_switches(caplog):
    """At the cap the oldest connection still in its handshake makes room; with only
    established switches, new connections are refused and that is logged once."""

    async def main():
        ctl = RawControllerServer()
        proxy = await start_proxy(await ctl.start(), max_connections=10, handshake_timeout=30)
        conns, sws = [], []
        try:
            conns = await _open_many(proxy.port, 40, hello=False)
            await asyncio.sleep(0.3)
            assert len(proxy._sessions) <= 10
            # Established switches still get in: they displace the idle handshakes.
            for i in range(10):
                sw = RawSwitch(proxy.port, dpid=100 + i)
                await sw.connect()
                sws.append(sw)
            assert await wait_for(lambda: len(proxy.switches) == 10, 5)
            assert len(proxy._sessions) == 10
            # Now full of established switches: more connections are refused.
            with caplog.at_level(logging.WARNING, logger="pazzd.proxy"):
                extra = await _open_many(proxy.port, 20, hello=True)
                conns += extra
                closed = await asyncio.gather(*(_closed_by_peer(r, 2) for r, _ in extra))
            assert all(closed)
            assert proxy.refused == 20
            assert len(proxy.switches) == 10
            refusals = [r for r in caplog.records if "refusing switch connections" in r.message]
            assert len(refusals) == 1
        finally:
            _close_all(conns)
            for sw in sws:
                await sw.close()
            await proxy.stop()
            await ctl.stop()

    asyncio.run(asyncio.wait_for(main(), 30))


def test_silent_switch_is_dropped_and_a_live_one_stays():
    async def main():
        ctl = RawControllerServer()
        proxy = await start_proxy(await ctl.start(), idle_timeout=0.6, handshake_timeout=0.2)
        mute, live = RawSwitch(proxy.port, dpid=1), RawSwitch(proxy.port, dpid=2)
        try:
            await mute.connect(reading=False)  # never answers the proxy's ECHO_REQUEST
            await live.connect(reading=True)  # answers it
            assert await wait_for(lambda: len(proxy.switches) == 2, 5)
            assert await wait_for(lambda: 1 not in proxy.switches, 3)
            assert proxy.idle_drops == 1
            await asyncio.sleep(1.0)
            assert 2 in proxy.switches
            echoes = [m for m in live.received if m[1] == of.OFPT_ECHO_REQUEST]
            assert echoes
        finally:
            with contextlib.suppress(Exception):
                await mute.close()
            await live.close()
            await proxy.stop()
            await ctl.stop()

    asyncio.run(asyncio.wait_for(main(), 30))


def test_a_connect_close_loop_cannot_flood_the_log(caplog):
    """1,000 TCP connections that close before the OpenFlow handshake (a port scan, a
    health check in a loop): at most 20 log lines, the closes counted; a real switch's
    connection and disconnection are still logged."""

    async def main():
        ctl = RawControllerServer()
        proxy = await start_proxy(await ctl.start())
        try:
            caplog.clear()
            with caplog.at_level(logging.DEBUG, logger="pazzd"):
                for _ in range(1000):
                    _, w = await asyncio.open_connection("127.0.0.1", proxy.port)
                    w.close()
                    with contextlib.suppress(ConnectionError):
                        await w.wait_closed()
                assert await wait_for(lambda: proxy.closed_before_handshake == 1000, 10)
                lines = [r for r in caplog.records if r.levelno >= logging.INFO]
                assert len(lines) <= 20, [r.getMessage() for r in lines[:30]]
                assert any("before the OpenFlow handshake" in r.getMessage() for r in lines)
                sw = RawSwitch(proxy.port, dpid=9)
                await sw.connect()
                assert await wait_for(lambda: 9 in proxy.switches, 5)
                await sw.close()
                assert await wait_for(lambda: 9 not in proxy.switches, 5)
            said = [r.getMessage() for r in caplog.records if r.levelno >= logging.INFO]
            assert any("0x9" in m and "connected" in m for m in said)
            assert any("0x9" in m and "disconnected" in m for m in said)
        finally:
            await proxy.stop()
            await ctl.stop()

    asyncio.run(asyncio.wait_for(main(), 60))


def test_plain_tcp_beyond_loopback_is_warned_about(caplog):
    """Without switch TLS, a listener other than loopback lets any peer claim a gone
    switch's dpid: the start says so; on loopback it does not."""

    async def main():
        ctl = RawControllerServer()
        port = await ctl.start()
        for host, warned in (("127.0.0.1", False), ("0.0.0.0", True)):
            caplog.clear()
            with caplog.at_level(logging.WARNING, logger="pazzd"):
                proxy = await start_proxy(port, listen_host=host)
                await proxy.stop()
            said = [r.getMessage() for r in caplog.records if "plain TCP" in r.getMessage()]
            assert bool(said) == warned, (host, said)
        await ctl.stop()

    asyncio.run(asyncio.wait_for(main(), 30))
