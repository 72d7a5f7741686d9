"""Test helpers: a raw asyncio OpenFlow 1.3 controller endpoint and os-ken message builders."""

from __future__ import annotations

import asyncio
import struct

import os_ken.base.app_manager  # noqa: F401  (import order: breaks a circular import)
from os_ken.ofproto import ofproto_parser
from os_ken.ofproto import ofproto_v1_3 as ofp
from os_ken.ofproto import ofproto_v1_3_parser as ofpp

import ofwire as of


class DP:
    """The datapath stand-in os-ken's message classes need to serialize and parse."""

    ofproto = ofp
    ofproto_parser = ofpp
    id = 0


DPATH = DP()


def ser(msg, xid: int) -> bytes:
    msg.set_xid(xid)
    msg.serialize()
    return bytes(msg.buf)


def parse(data: bytes):
    ver, t, ln, xid = of.header(data)
    return ofproto_parser.msg(DPATH, ver, t, ln, xid, data)


def flow_mod(
    xid,
    command=ofp.OFPFC_ADD,
    table=0,
    priority=100,
    match=None,
    actions=None,
    instructions=None,
    cookie=0,
    cookie_mask=0,
    out_port=ofp.OFPP_ANY,
    out_group=ofp.OFPG_ANY,
    flags=0,
    idle=0,
    hard=0,
) -> bytes:
    if instructions is None:
        instructions = (
            [ofpp.OFPInstructionActions(ofp.OFPIT_APPLY_ACTIONS, actions)] if actions else []
        )
    return ser(
        ofpp.OFPFlowMod(
            DPATH,
            cookie=cookie,
            cookie_mask=cookie_mask,
            table_id=table,
            command=command,
            idle_timeout=idle,
            hard_timeout=hard,
            priority=priority,
            buffer_id=ofp.OFP_NO_BUFFER,
            out_port=out_port,
            out_group=out_group,
            flags=flags,
            match=match or ofpp.OFPMatch(),
            instructions=instructions,
        ),
        xid,
    )


def out(port: int):
    return ofpp.OFPActionOutput(port, 0)


class RawController:
    """Accepts the proxy's upstream connections; one `Conn` per switch."""

    def __init__(self) -> None:
        self.conns: asyncio.Queue[Conn] = asyncio.Queue()
        self.server = None
        self.all: list[Conn] = []

    async def start(self, port: int = 0) -> int:
        self.server = await asyncio.start_server(
            self._accept, "127.0.0.1", port, reuse_address=True
        )
        return self.server.sockets[0].getsockname()[1]

    async def start_unix(self, path: str) -> None:
        """Listen on a unix socket too (a switch in another network namespace connects
        directly with `set-controller BR unix:PATH`)."""
        self.server = await asyncio.start_unix_server(self._accept, path)

    async def _accept(self, reader, writer) -> None:
        c = Conn(reader, writer)
        self.all.append(c)
        await c.handshake()
        await self.conns.put(c)

    async def conn(self, timeout=20) -> Conn:
        return await asyncio.wait_for(self.conns.get(), timeout)

    async def stop(self) -> None:
        for c in self.all:
            c.writer.close()
        if self.server:
            self.server.close()
            await self.server.wait_closed()


class Conn:
    def __init__(self, reader, writer) -> None:
        self.reader, self.writer = reader, writer
        self.received: list[bytes] = []  # every message, in order
        self.waiters: dict[int, asyncio.Future] = {}
        self.parts: dict[int, list[bytes]] = {}
        self.task = None
        self.dpid = None
        self.xid = 1000
        self.closed = asyncio.Event()

    async def read_msg(self) -> bytes:
        hdr = await self.reader.readexactly(8)
        ln = struct.unpack_from("!H", hdr, 2)[0]
        return hdr + await self.reader.readexactly(ln - 8)

    async def handshake(self) -> None:
        self.writer.write(of.hello([4]))
        h = await self.read_msg()
        assert h[1] == 0, h
        self.task = asyncio.ensure_future(self._reader())
        feat = await self.request(of.message(4, of.OFPT_FEATURES_REQUEST, self.next_xid()))
        self.dpid = of.features_dpid(feat[0])

    async def _reader(self) -> None:
        try:
            while True:
                m = await self.read_msg()
                self.received.append(m)
                _, t, _, xid = of.header(m)
                if t == of.OFPT_ECHO_REQUEST:
                    self.writer.write(of.message(4, of.OFPT_ECHO_REPLY, xid, m[8:]))
                fut = self.waiters.get(xid)
                if fut is None:
                    continue
                self.parts.setdefault(xid, []).append(m)
                more = t == of.OFPT_MULTIPART_REPLY and struct.unpack_from("!H", m, 10)[0] & 1
                if not more and not fut.done():
                    fut.set_result(self.parts.pop(xid))
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            self.closed.set()

    def next_xid(self) -> int:
        self.xid += 1
        return self.xid

    def send(self, *msgs: bytes) -> None:
        self.writer.write(b"".join(msgs))

    async def request(self, msg: bytes, timeout=10) -> list[bytes]:
        xid = of.header(msg)[3]
        fut = asyncio.get_running_loop().create_future()
        self.waiters[xid] = fut
        self.writer.write(msg)
        try:
            return await asyncio.wait_for(fut, timeout)
        finally:
            self.waiters.pop(xid, None)

    async def barrier(self) -> list[bytes]:
        return await self.request(of.message(4, of.OFPT_BARRIER_REQUEST, self.next_xid()))

    async def flow_stats(self) -> list:
        """os-ken OFPFlowStats entries (the controller's view)."""
        replies = await self.request(of.flow_stats_request(self.next_xid()))
        out = []
        for r in replies:
            out.extend(parse(r).body)
        return out

    def errors(self) -> list[bytes]:
        return [m for m in self.received if m[1] == of.OFPT_ERROR]
