"""Hostile and broken peers for the reliability tests: raw OpenFlow 1.3 switches and
controllers on loopback that can stop reading, flood, or never finish a handshake."""

from __future__ import annotations

import asyncio
import contextlib
import os
import struct

import ofwire as of
from pazzd.proxy import Proxy, ProxyConfig


def rss_bytes() -> int:
    """This process's resident set size now (not the peak)."""
    with open(f"/proc/{os.getpid()}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def features_reply(xid: int, dpid: int) -> bytes:
    return of.message(
        4, of.OFPT_FEATURES_REPLY, xid, struct.pack("!QIBB2xII", dpid, 0, 254, 0, 0, 0)
    )


def packet_in(xid: int, size: int) -> bytes:
    """An OFPT_PACKET_IN (relayed to the controller as is) of about `size` bytes."""
    data = bytes(max(0, size - 34))
    body = struct.pack("!IHBBQ", 0xFFFFFFFF, len(data), 0, 0, 0)
    body += b"\x00\x01\x00\x04\x00\x00\x00\x00" + b"\x00\x00" + data
    return of.message(4, of.OFPT_PACKET_IN, xid, body)


def packet_out(xid: int, size: int) -> bytes:
    """An OFPT_PACKET_OUT without actions (relayed to the switch as is)."""
    return of.packet_out(xid, 0xFFFFFFFD, bytes(max(0, size - 24)), actions=b"")


async def read_msg(reader: asyncio.StreamReader) -> bytes:
    hdr = await reader.readexactly(8)
    ln = struct.unpack_from("!H", hdr, 2)[0]
    return hdr + await reader.readexactly(ln - 8)


class RawSwitch:
    """A switch on TCP: HELLO, answers the proxy's FEATURES_REQUEST, then does what the
    test says. With `reading=False` it stops reading once connected."""

    def __init__(self, port: int, dpid: int, barriers: bool = True) -> None:
        self.port, self.dpid = port, dpid
        self.barriers = barriers  # False: never answers a barrier
        self.reader = self.writer = None
        self._task: asyncio.Task | None = None
        self.received: list[bytes] = []

    async def connect(self, reading: bool = True, timeout: float = 5.0, ssl=None) -> None:
        self.reader, self.writer = await asyncio.open_connection(
            "127.0.0.1", self.port, ssl=ssl, server_hostname="localhost" if ssl else None
        )
        self.writer.write(of.hello([4]))
        async with asyncio.timeout(timeout):
            while True:
                m = await read_msg(self.reader)
                if m[1] == of.OFPT_FEATURES_REQUEST:
                    self.writer.write(features_reply(of.header(m)[3], self.dpid))
                    break
        if reading:
            self._task = asyncio.ensure_future(self._read())

    async def _read(self) -> None:
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
            while True:
                m = await read_msg(self.reader)
                self.received.append(m)
                _, t, _, xid = of.header(m)
                if t == of.OFPT_ECHO_REQUEST:
                    self.writer.write(of.message(4, of.OFPT_ECHO_REPLY, xid, m[8:]))
                elif t == of.OFPT_BARRIER_REQUEST and self.barriers:
                    self.writer.write(of.message(4, of.OFPT_BARRIER_REPLY, xid))

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(BaseException):
                await self._task
        if self.writer is not None:
            self.writer.transport.abort()


class RawControllerServer:
    """A controller that accepts the proxy's connections, says HELLO and then either
    reads and discards everything (`reading=True`) or stops reading."""

    def __init__(self, reading: bool = True) -> None:
        self.reading = reading
        self.server = None
        self.writers: list[asyncio.StreamWriter] = []
        self.connected = asyncio.Event()
        self._tasks: set[asyncio.Task] = set()

    async def start(self) -> int:
        self.server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        return self.server.sockets[0].getsockname()[1]

    async def _accept(self, reader, writer) -> None:
        self.writers.append(writer)
        writer.write(of.hello([4]))
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
            await read_msg(reader)  # the proxy's HELLO
            self.connected.set()
            while self.reading:
                await read_msg(reader)

    async def stop(self) -> None:
        for w in self.writers:
            w.transport.abort()
        if self.server is not None:
            self.server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.server.wait_closed(), 2)


async def start_proxy(ctl_port: int, **kw) -> Proxy:
    kw = {"listen_host": "127.0.0.1", **kw}
    cfg = ProxyConfig(
        listen_port=0,
        controller_host="127.0.0.1",
        controller_port=ctl_port,
        audit_interval=0,
        audit_delay=-1,
        **kw,
    )
    p = Proxy(cfg)
    await p.start()
    return p


async def wait_for(cond, timeout: float, step: float = 0.01) -> bool:
    """Poll cond() until it is true or timeout passes; returns its last value."""
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while not cond():
        if loop.time() > end:
            return bool(cond())
        await asyncio.sleep(step)
    return True
