"""The asyncio sFlow collector: UDP (IPv4 and IPv6, port 6343 by default) into a handler.

The handler is normally `Tester.process_datagram`. Exceptions in the handler are
logged (rate-limited) and counted, never raised into the event loop, so one bad
datagram cannot stop collection.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Callable

from .engine import RateLimitedLog

__all__ = ["SflowCollector", "SFLOW_PORT", "open_socket"]

SFLOW_PORT = 6343
log = logging.getLogger(__name__)


def open_socket(
    host: str, port: int, reuse_port: bool = False, rcvbuf: int = 4 << 20
) -> socket.socket:
    """A bound UDP socket; '::' is IPv6-only so that '0.0.0.0' can be bound beside it."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    s = socket.socket(family, socket.SOCK_DGRAM)
    try:
        if reuse_port:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        if family == socket.AF_INET6:
            s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        with contextlib.suppress(OSError):
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        s.bind((host, port))
        s.setblocking(False)
    except BaseException:
        s.close()
        raise
    return s


class _Protocol(asyncio.DatagramProtocol):
    def __init__(self, owner: SflowCollector) -> None:
        self.owner = owner

    def datagram_received(self, data: bytes, addr) -> None:
        self.owner._received(data, addr)

    def error_received(self, exc: Exception) -> None:
        self.owner.rlog.warning("socket", "sFlow socket error: %s", exc)


class SflowCollector:
    def __init__(
        self,
        handler: Callable[[bytes], None],
        hosts: tuple[str, ...] = ("0.0.0.0", "::"),
        port: int = SFLOW_PORT,
        reuse_port: bool = False,
        pass_source: bool = False,
    ) -> None:
        self.handler = handler
        self.pass_source = pass_source  # call handler(data, source address)
        self.hosts = hosts
        self.port = port
        self.reuse_port = reuse_port
        self.received = 0
        self.handler_errors = 0
        self.rlog = RateLimitedLog(log)
        self._transports: list[asyncio.DatagramTransport] = []
        self.bound: list[tuple] = []

    def _received(self, data: bytes, addr) -> None:
        self.received += 1
        try:
            if self.pass_source:
                self.handler(data, addr[0] if isinstance(addr, tuple) else None)
            else:
                self.handler(data)
        except Exception as e:  # never let one datagram stop the loop
            self.handler_errors += 1
            self.rlog.warning("handler", "sFlow handler failed on a datagram from %s: %r", addr, e)

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        for host in self.hosts:
            try:
                sock = open_socket(host, self.port, self.reuse_port)
            except OSError as e:
                if len(self.hosts) > 1 and ":" in host:
                    log.warning("sFlow collector: IPv6 %s:%d unavailable: %s", host, self.port, e)
                    continue
                raise
            tr, _ = await loop.create_datagram_endpoint(lambda: _Protocol(self), sock=sock)
            self._transports.append(tr)
            self.bound.append(sock.getsockname())

    def close(self) -> None:
        for tr in self._transports:
            tr.close()
        self._transports.clear()

    async def __aenter__(self) -> SflowCollector:
        await self.start()
        return self

    async def __aexit__(self, *exc) -> None:
        self.close()
