"""pazzd's local API server: JSON lines over a Unix socket (mode 0660).

The line format and the client (`pazzapi.call`, used by pazzctl and the lab) are in the
pazzapi package. Commands: status, faults, fault, localize, trace, reach, topology,
coverage, flowmod, reload, findings, finding; the web view (pazzd.ui) serves the read-only
ones over HTTP through `ApiServer.answer`.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import grp
import logging
import os
import socket
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from pazzapi.framing import (
    INPUT,
    MAX_LINE,
    ApiError,
    error_reply,
    parse_request,
    reply_line,
)

__all__ = ["ApiServer", "group_id"]

log = logging.getLogger("pazzd.api")

Handler = Callable[[dict], Awaitable[object]]


class ApiServer:
    """max_clients: connections served at once; at the cap the client idle the longest is
    dropped to make room (a busy one never is), so idle connections cannot lock the API
    out. idle_timeout: a client that sends no full line for that long is dropped; a reply
    that the client does not read within it drops the client too. group: the socket's
    group (a name or number), whose members may connect."""

    def __init__(
        self,
        path: str,
        handler: Handler,
        mode: int = 0o660,
        max_clients: int = 64,
        idle_timeout: float = 60.0,
        group: str | None = None,
    ) -> None:
        self.path = path
        self.handler = handler
        self.mode = mode
        self.group = group
        self.max_clients = max_clients
        self.idle_timeout = idle_timeout
        self._server: asyncio.AbstractServer | None = None
        self._inode: int | None = None  # the socket this server made
        self._clients: dict[asyncio.StreamWriter, list] = {}  # writer -> [last activity, busy]
        self.evicted = 0
        self.timed_out = 0

    async def start(self) -> None:
        p = Path(self.path)
        p.parent.mkdir(parents=True, exist_ok=True)
        _clear_stale(p)
        old = os.umask(0o117)  # the socket is created 0660, never wider for a moment
        try:
            self._server = await asyncio.start_unix_server(
                self._client, path=self.path, limit=MAX_LINE
            )
        finally:
            os.umask(old)
        self._inode = os.stat(self.path).st_ino  # close() removes this socket, nothing else
        os.chmod(self.path, self.mode)
        if self.group is not None:
            os.chown(self.path, -1, group_id(self.group))

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 2)
            self._server = None
        with contextlib.suppress(FileNotFoundError):
            if self._inode is not None and os.stat(self.path).st_ino == self._inode:
                os.unlink(self.path)
        self._inode = None

    def _make_room(self) -> bool:
        if len(self._clients) < self.max_clients:
            return True
        idle = [(st[0], w) for w, st in self._clients.items() if not st[1]]
        if not idle:
            return False
        _, w = min(idle, key=lambda x: x[0])
        self._clients.pop(w, None)
        self.evicted += 1
        w.transport.abort()
        return True

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if not self._make_room():
            with contextlib.suppress(Exception):
                writer.write(reply_line(error_reply("too many API clients busy")))
            writer.transport.abort()
            return
        st = self._clients[writer] = [time.monotonic(), False]
        try:
            while True:
                try:
                    line = await asyncio.wait_for(reader.readline(), self.idle_timeout)
                except TimeoutError:
                    self.timed_out += 1
                    break
                except (ValueError, asyncio.LimitOverrunError):
                    await self._reply(writer, error_reply("request line too long", INPUT))
                    break
                if not line:
                    break
                st[0], st[1] = time.monotonic(), True
                try:
                    req = parse_request(line)
                except ValueError as e:
                    req = None
                    msg = error_reply(f"bad request: {e}", INPUT)
                if req is not None:
                    msg = await self._serve(req)
                await self._reply(writer, msg)
                st[0], st[1] = time.monotonic(), False
        except (ConnectionError, asyncio.IncompleteReadError, TimeoutError):
            pass
        finally:
            self._clients.pop(writer, None)
            writer.transport.abort() if st[1] else writer.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(writer.wait_closed(), 1)

    async def answer(self, req: dict) -> dict:
        """The reply to one request, as a client of the socket gets it (the web view's)."""
        return await self._serve(req)

    async def _serve(self, req: dict) -> dict:
        """The reply; an error's code says whose it is (pazzapi.framing): InputError and an
        argument missing or of the wrong type are the client's, the rest the server's."""
        try:
            return {"ok": True, "result": await self.handler(req)}
        except ApiError as e:
            return error_reply(str(e), e.code)
        except (KeyError, ValueError, TypeError, RecursionError) as e:
            log.info("API command %s: bad request: %s: %s", req.get("cmd"), type(e).__name__, e)
            return error_reply(f"bad request: {type(e).__name__}: {e}", INPUT)
        except Exception as e:  # a bug: report it, keep serving
            log.exception("API command %s failed", req.get("cmd"))
            return error_reply(
                f"internal error in {req.get('cmd')}: {e} (the traceback is in pazzd's log)"
            )

    async def _reply(self, writer, msg: dict) -> None:
        writer.write(reply_line(msg))
        await asyncio.wait_for(writer.drain(), self.idle_timeout)


def group_id(group: str) -> int:
    """A group's number, from its name or number."""
    return int(group) if group.isascii() and group.isdigit() else grp.getgrnam(group).gr_gid


def _clear_stale(p: Path) -> None:
    """Remove a stale socket at p (nothing answers on it: an earlier run's); refuse, with
    an OSError naming why, a live socket (another program's) or anything that is not a
    socket, and leave it alone."""
    if not p.exists() and not p.is_symlink():
        return
    if not p.is_socket():
        raise OSError(errno.EEXIST, "something other than a socket is there; left alone")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(1.0)
        try:
            s.connect(str(p))
        except (ConnectionRefusedError, FileNotFoundError):
            p.unlink(missing_ok=True)  # nobody listens: an earlier run's
            return
        except OSError:
            pass  # it answers oddly: treat as live
    raise OSError(errno.EADDRINUSE, "a live socket of another program is there; left alone")
