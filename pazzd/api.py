"""pazzd's local API: JSON lines over a Unix socket (mode 0660).

Request: one JSON object per line, {"cmd": NAME, ...arguments}. Reply: one line,
{"ok": true, "result": ...} or {"ok": false, "error": "..."}. Commands: status, faults,
fault, localize, trace, reach, flowmod, reload. `call()` is the client side.
"""

from __future__ import annotations

import asyncio
import contextlib
import grp
import json
import logging
import os
import socket
from collections.abc import Awaitable, Callable
from pathlib import Path

__all__ = ["ApiError", "ApiServer", "call"]

log = logging.getLogger("pazzd.api")
MAX_LINE = 1 << 20


class ApiError(Exception):
    pass


Handler = Callable[[dict], Awaitable[object]]


class ApiServer:
    def __init__(
        self, path: str, handler: Handler, mode: int = 0o660, group: str | None = None
    ) -> None:
        """group: the socket's group (a name or number), whose members may connect."""
        self.path = path
        self.handler = handler
        self.mode = mode
        self.group = group
        self._server: asyncio.AbstractServer | None = None

    async def start(self) -> None:
        p = Path(self.path)
        p.parent.mkdir(parents=True, exist_ok=True)
        if p.is_socket():
            p.unlink()  # a stale socket of an earlier run
        old = os.umask(0o117)  # the socket is created 0660, never wider for a moment
        try:
            self._server = await asyncio.start_unix_server(
                self._client, path=self.path, limit=MAX_LINE
            )
        finally:
            os.umask(old)
        os.chmod(self.path, self.mode)
        if self.group is not None:
            gid = int(self.group) if self.group.isdigit() else grp.getgrnam(self.group).gr_gid
            os.chown(self.path, -1, gid)

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 2)
            self._server = None
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                try:
                    line = await reader.readline()
                except (ValueError, asyncio.LimitOverrunError):
                    await self._reply(writer, {"ok": False, "error": "request line too long"})
                    break
                if not line:
                    break
                try:
                    req = json.loads(line)
                    if not isinstance(req, dict) or not isinstance(req.get("cmd"), str):
                        raise ValueError("a request is a JSON object with a string 'cmd'")
                except ValueError as e:
                    await self._reply(writer, {"ok": False, "error": f"bad request: {e}"})
                    continue
                try:
                    res = await self.handler(req)
                    msg = {"ok": True, "result": res}
                except ApiError as e:
                    msg = {"ok": False, "error": str(e)}
                except Exception as e:  # a bug: report it, keep serving
                    log.exception("API command %s failed", req.get("cmd"))
                    msg = {"ok": False, "error": f"internal error in {req.get('cmd')}: {e} "
                           "(the traceback is in pazzd's log)"}  # fmt: skip
                await self._reply(writer, msg)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    @staticmethod
    async def _reply(writer, msg: dict) -> None:
        writer.write(json.dumps(msg, default=str).encode() + b"\n")
        await writer.drain()


def call(path: str, cmd: str, timeout: float = 30.0, **args) -> object:
    """One request to pazzd; returns the result or raises ApiError."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(timeout)
            s.connect(path)
            s.sendall(json.dumps({"cmd": cmd, **args}).encode() + b"\n")
            buf = b""
            while not buf.endswith(b"\n"):
                chunk = s.recv(65536)
                if not chunk:
                    break
                buf += chunk
    except OSError as e:
        raise ApiError(f"cannot reach pazzd at {path}: {e.strerror or e}") from None
    if not buf:
        raise ApiError(f"pazzd at {path} closed the connection")
    msg = json.loads(buf)
    if not msg.get("ok"):
        raise ApiError(msg.get("error", "unknown error"))
    return msg["result"]
