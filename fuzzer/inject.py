"""How probes enter the network.

    class Injector(Protocol):
        def inject(self, ingress: Port, frames: Sequence[bytes]) -> int   # frames sent

Injectors:
  * PacketOutInjector: OpenFlow PACKET_OUT on the ingress switch, in_port = the edge
    port, actions = output:TABLE, so the probe goes through the flow tables exactly like a
    packet arriving on that port (the patched OVS tags only entries, not packet-out
    actions). It calls `send_packet_out(dpid, in_port, data)`, which sends such a PACKET_OUT
    (ofwire.packet_out is its encoding).
  * QueuedPacketOut: the same over an async `send_packet_out` (pazzd's proxy,
    Proxy.send_packet_out): inject() queues, run() sends from the event loop.
  * RawSocketInjector: AF_PACKET on a host-side interface (testbeds: the frame really
    arrives on the edge port).
  * ByIngress: one of the above per ingress port.

Every injector sends probes: each frame leaves with a fresh Verify shim that carries the
probe mark (`marked`, docs/verify-header.md "The probe mark"), so that the exit switch
reports it always. A packet-out keeps its mark; a frame from a host keeps it only on an
interface with other_config:verify-probe=true or =trust (elsewhere the switch strips the
mark and the probe is reported at 1/N). The switch's edge push_verify leaves a present header alone, so
a pre-tagged probe is tagged the same as if the switch had pushed the header.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import socket
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Protocol, runtime_checkable

from cpc.results import Port
from cpc.tags import (
    VERIFY_ETHERTYPE,
    VERIFY_ETHERTYPE_MARKED,
    VERIFY_PORT_INIT,
    VERIFY_RULE_INIT,
    pack_header,
)

log = logging.getLogger("fuzzer.inject")

__all__ = [
    "ByIngress",
    "Injector",
    "PacketOutInjector",
    "QueuedPacketOut",
    "RawSocketInjector",
    "RecordingInjector",
    "marked",
    "pretagged",
]

SendPacketOut = Callable[[int, int, bytes], None]
AsyncSendPacketOut = Callable[[int, int, bytes], Awaitable[None]]
_VERIFY = VERIFY_ETHERTYPE.to_bytes(2, "big")
_MARKED = VERIFY_ETHERTYPE_MARKED.to_bytes(2, "big")
_FRESH = pack_header(VERIFY_PORT_INIT, VERIFY_RULE_INIT)
_FRESH_MARKED = pack_header(VERIFY_PORT_INIT, VERIFY_RULE_INIT, marked=True)


@runtime_checkable
class Injector(Protocol):
    def inject(self, ingress: Port, frames: Sequence[bytes]) -> int: ...


def pretagged(frame: bytes) -> bytes:
    """frame with a fresh Verify shim after the source MAC, as an edge port's push_verify
    writes it; a frame that has one is returned as it is."""
    if frame[12:14] in (_VERIFY, _MARKED):
        return frame
    return frame[:12] + _FRESH + frame[12:]


def marked(frame: bytes) -> bytes:
    """frame as a probe: with a fresh marked Verify shim after the source MAC; a frame with
    a shim gets the mark on it (its tags are kept), a marked frame is returned as it is."""
    et = frame[12:14]
    if et == _MARKED:
        return frame
    if et == _VERIFY:
        return frame[:12] + _MARKED + frame[14:]
    return frame[:12] + _FRESH_MARKED + frame[12:]


class PacketOutInjector:
    def __init__(self, send_packet_out: SendPacketOut) -> None:
        self.send = send_packet_out
        self.sent = 0

    def inject(self, ingress: Port, frames: Sequence[bytes]) -> int:
        dpid, port = ingress
        for f in frames:
            self.send(dpid, port, marked(f))
        self.sent += len(frames)
        return len(frames)


class QueuedPacketOut:
    """PACKET_OUT injection over an async send_packet_out(dpid, in_port, data): inject()
    queues the frames (the oldest go when more than `limit` wait), run() sends them from
    the event loop. A frame whose switch is not connected is counted in `failed`."""

    def __init__(self, send_packet_out: AsyncSendPacketOut, limit: int = 4096) -> None:
        self.send = send_packet_out
        self.queue: collections.deque[tuple[Port, bytes]] = collections.deque(maxlen=limit)
        self.sent = self.failed = self.dropped = 0
        self._wake = asyncio.Event()

    def inject(self, ingress: Port, frames: Sequence[bytes]) -> int:
        room = self.queue.maxlen - len(self.queue)
        self.dropped += max(0, len(frames) - room)
        self.queue.extend((ingress, f) for f in frames)
        self._wake.set()
        return len(frames)

    async def run(self, stop: asyncio.Event) -> None:
        """Send what is queued until stop is set."""
        stopping = asyncio.ensure_future(stop.wait())
        try:
            while not stop.is_set():
                await self._drain()
                waking = asyncio.ensure_future(self._wake.wait())
                await asyncio.wait((waking, stopping), return_when=asyncio.FIRST_COMPLETED)
                waking.cancel()
        finally:
            stopping.cancel()

    async def _drain(self) -> None:
        self._wake.clear()
        while self.queue:
            (dpid, port), frame = self.queue.popleft()
            try:
                await self.send(dpid, port, marked(frame))
                self.sent += 1
            except (KeyError, RuntimeError, ConnectionError) as e:
                if not self.failed:
                    log.warning("packet-out probe into dpid %#x not sent: %s", dpid, e)
                self.failed += 1

    def close(self) -> None:
        self.queue.clear()


class RawSocketInjector:
    """AF_PACKET on the host-side interface of each edge port: {ingress: ifname}.

    A socket is opened per interface on first use (in the caller's network namespace);
    `sockets` may supply already-open sockets instead (e.g. opened inside a namespace)."""

    def __init__(
        self,
        ifaces: Mapping[Port, str] | None = None,
        sockets: Mapping[Port, socket.socket] | None = None,
    ) -> None:
        self.ifaces = dict(ifaces or {})
        self._socks: dict[Port, socket.socket] = dict(sockets or {})
        self.sent = 0

    def _sock(self, ingress: Port) -> socket.socket:
        s = self._socks.get(ingress)
        if s is None:
            s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
            s.bind((self.ifaces[ingress], 0))
            self._socks[ingress] = s
        return s

    def inject(self, ingress: Port, frames: Sequence[bytes]) -> int:
        s = self._sock(ingress)
        n = 0
        for f in frames:
            s.send(marked(f))
            n += 1
        self.sent += n
        return n

    def close(self) -> None:
        for s in self._socks.values():
            s.close()
        self._socks.clear()


class ByIngress:
    """Each ingress's own injector ({ingress: injector}), `default` for the others."""

    def __init__(self, routes: Mapping[Port, Injector], default: Injector | None = None) -> None:
        self.routes = dict(routes)
        self.default = default

    def inject(self, ingress: Port, frames: Sequence[bytes]) -> int:
        inj = self.routes.get(ingress, self.default)
        if inj is None:
            raise KeyError(f"no injector for ingress {ingress}")
        return inj.inject(ingress, frames)

    def close(self) -> None:
        for inj in {id(i): i for i in (*self.routes.values(), self.default)}.values():
            close = getattr(inj, "close", None)
            if close is not None:
                close()


class RecordingInjector:
    """Keeps (ingress, frame) pairs; for tests and simulations."""

    def __init__(self) -> None:
        self.frames: list[tuple[Port, bytes]] = []

    def inject(self, ingress: Port, frames: Sequence[bytes]) -> int:
        self.frames.extend((ingress, f) for f in frames)
        return len(frames)
