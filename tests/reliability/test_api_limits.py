"""The local API and the metrics endpoint: idle clients
cannot lock them out, hostile requests get an answer, client errors are not tracebacks,
and event-loop errors (a failed accept per attempt) are logged once per cause."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import threading
import time
import urllib.request

from pazzapi import ApiError, call
from pazzd.api import ApiServer
from pazzd.limits import LoopErrorLimiter, limit_http_server
from pazzd.metrics import Metrics
from tests.reliability.peers import wait_for


async def _handler(req: dict):
    if req["cmd"] == "status":
        return {"up": True}
    if req["cmd"] == "needs-id":
        return int(req["id"])  # KeyError / ValueError: the client's fault
    raise ApiError(f"unknown command {req['cmd']!r}")


async def _call(path: str, cmd: str, **kw):
    return await asyncio.to_thread(call, path, cmd, 5.0, **kw)


def _raw(path: str, line: bytes) -> bytes:
    with socket.socket(socket.AF_UNIX) as s:
        s.settimeout(5)
        s.connect(path)
        s.sendall(line)
        buf = b""
        while not buf.endswith(b"\n"):
            chunk = s.recv(65536)
            if not chunk:
                break
            buf += chunk
        return buf


def test_idle_clients_cannot_lock_out_the_api(tmp_path):
    async def main():
        path = str(tmp_path / "api.sock")
        api = ApiServer(path, _handler, max_clients=8, idle_timeout=30)
        await api.start()
        idle = []
        try:
            for _ in range(40):
                idle.append(await asyncio.open_unix_connection(path))
            assert await wait_for(lambda: api.evicted >= 32, 5)
            assert len(api._clients) <= 8
            t0 = time.monotonic()
            assert await _call(path, "status") == {"up": True}
            assert time.monotonic() - t0 < 2
            assert len(api._clients) <= 8
        finally:
            for _, w in idle:
                w.transport.abort()
            await api.close()

    asyncio.run(asyncio.wait_for(main(), 30))


def test_idle_client_is_dropped_after_the_idle_timeout(tmp_path):
    async def main():
        path = str(tmp_path / "api.sock")
        api = ApiServer(path, _handler, idle_timeout=0.3)
        await api.start()
        try:
            r, w = await asyncio.open_unix_connection(path)
            async with asyncio.timeout(3):
                assert await r.read() == b""  # closed by the server
            assert api.timed_out == 1
            w.transport.abort()
        finally:
            await api.close()

    asyncio.run(asyncio.wait_for(main(), 30))


def test_hostile_requests_get_answers_without_tracebacks(tmp_path, caplog):
    async def main():
        path = str(tmp_path / "api.sock")
        api = ApiServer(path, _handler)
        await api.start()
        try:
            deep = b"[" * 100_000 + b"]" * 100_000 + b"\n"
            reply = await asyncio.to_thread(_raw, path, deep)
            assert b'"ok": false' in reply and b"nested" in reply
            deep_obj = b'{"cmd": "status", "x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}\n"
            reply = await asyncio.to_thread(_raw, path, deep_obj)
            assert b'"ok": false' in reply
            with caplog.at_level(logging.INFO, logger="pazzd.api"):
                for args in ({}, {"id": "x"}, {"id": [1]}):
                    with contextlib.suppress(ApiError):
                        await _call(path, "needs-id", **args)
                        raise AssertionError("a bad argument was accepted")
            assert not [r for r in caplog.records if r.exc_info]
            assert await _call(path, "status") == {"up": True}  # still serving
        finally:
            await api.close()

    asyncio.run(asyncio.wait_for(main(), 60))


def test_loop_errors_are_logged_once_per_cause(caplog):
    t = [0.0]
    lim = LoopErrorLimiter(every=60, clock=lambda: t[0])
    loop = asyncio.new_event_loop()
    try:
        loop.set_exception_handler(lim)
        with caplog.at_level(logging.ERROR, logger="asyncio"):
            for _ in range(1000):
                loop.call_exception_handler(
                    {
                        "message": "socket.accept() out of system resource",
                        "exception": OSError(24, "Too many open files"),
                    }
                )
            loop.call_exception_handler({"message": "something else"})
            t[0] = 61.0
            loop.call_exception_handler(
                {
                    "message": "socket.accept() out of system resource",
                    "exception": OSError(24, "Too many open files"),
                }
            )
    finally:
        loop.close()
    msgs = [r.getMessage() for r in caplog.records]
    assert len(msgs) == 3, msgs
    assert "999 more like it" in msgs[2]
    assert lim.suppressed == 999


def test_metrics_endpoint_serves_past_idle_connections():
    """Idle connections fill every slot; after a second they make room for a scrape."""
    m = Metrics(lambda: {})
    port = m.serve("127.0.0.1", 0)
    limit_http_server(m._server, max_clients=4, timeout=30)
    socks = []
    threads0 = threading.active_count()
    try:
        for _ in range(12):
            socks.append(socket.create_connection(("127.0.0.1", port)))
        time.sleep(0.3)
        assert threading.active_count() - threads0 <= 4
        assert m._server.refused > 0  # younger than a second: not evicted, refused
        time.sleep(0.9)
        t0 = time.monotonic()
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
            body = r.read()
        assert b"pazz_config_load_error" in body
        assert time.monotonic() - t0 < 2.0
        assert m._server.evicted >= 1
        assert threading.active_count() - threads0 <= 4
    finally:
        for s in socks:
            s.close()
        m.close()
