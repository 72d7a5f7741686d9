"""Bounds on what a peer can make pazzd spend: rate-limited logging of event-loop errors
and a cap with timeouts on the metrics endpoint's HTTP server (docs/reliability.md)."""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
import time

__all__ = ["LoopErrorLimiter", "limit_http_server"]

log = logging.getLogger("pazzd")


class LoopErrorLimiter:
    """An asyncio exception handler that reports each kind of error (its message and
    exception type) at most once per `every` seconds, with the number not reported since.

    asyncio reports a failed accept() (descriptors exhausted, say) once per attempt, with a
    traceback: under a connection flood that is gigabytes of log."""

    def __init__(self, every: float = 60.0, clock=time.monotonic) -> None:
        self.every = every
        self.clock = clock
        self.suppressed = 0
        self._last: dict[tuple, tuple[float, int]] = {}

    def __call__(self, loop, context: dict) -> None:
        exc = context.get("exception")
        key = (context.get("message", ""), type(exc).__name__ if exc else "")
        now = self.clock()
        last, n = self._last.get(key, (None, 0))
        if last is not None and now - last < self.every:
            self._last[key] = (last, n + 1)
            self.suppressed += 1
            return
        if len(self._last) >= 1024:
            self._last.clear()
        self._last[key] = (now, 0)
        if n:
            context = dict(context)
            context["message"] = (
                f"{context.get('message', '')} ({n} more like it in the last "
                f"{now - last:.0f} s not logged)"
            )
        loop.default_exception_handler(context)


def limit_http_server(
    server, max_clients: int = 32, timeout: float = 10.0, evict_after: float = 1.0
) -> None:
    """Bound a socketserver.ThreadingMixIn server (prometheus_client's): a request must
    arrive within `timeout` seconds, and at most `max_clients` are served at once. At the
    cap, the oldest connection, when older than `evict_after` seconds (a scrape takes
    milliseconds: it is idle), is shut down to make room; else the newcomer is closed at
    once (counted in `server.refused`)."""
    base = server.RequestHandlerClass
    server.RequestHandlerClass = type(base.__name__, (base,), {"timeout": timeout})
    slots = threading.BoundedSemaphore(max_clients)
    live: dict = {}  # request socket -> time.monotonic() at accept
    lock = threading.Lock()
    server.refused = 0
    server.evicted = 0
    start, run = server.process_request, server.process_request_thread

    def make_room() -> bool:
        with lock:
            oldest = min(live.items(), key=lambda kv: kv[1], default=None)
        if oldest is None or time.monotonic() - oldest[1] < evict_after:
            return False
        with contextlib.suppress(OSError):
            oldest[0].shutdown(socket.SHUT_RDWR)  # its handler sees EOF and ends
        server.evicted += 1
        return slots.acquire(timeout=0.5)

    def process_request(request, client_address):
        if not slots.acquire(blocking=False) and not make_room():
            server.refused += 1
            server.shutdown_request(request)
            return
        with lock:
            live[request] = time.monotonic()
        try:
            start(request, client_address)
        except BaseException:
            with lock:
                live.pop(request, None)
            slots.release()
            raise

    def process_request_thread(request, client_address):
        try:
            run(request, client_address)
        finally:
            with lock:
                live.pop(request, None)
            slots.release()

    def handle_error(request, client_address):
        # A client that sent nothing in time is not an error worth a traceback on stderr.
        log.debug("metrics: client %s dropped", client_address, exc_info=True)

    server.process_request = process_request
    server.process_request_thread = process_request_thread
    server.handle_error = handle_error
