"""Who may use the web view, and how much of pazzd it may take.

Access: the same people as the API socket's. At each start pazzd makes a random token
and writes it to a file next to the API socket (`pazzd.ui-token` beside `pazzd.sock`),
readable by the socket's owner and group only (0640); `pazzctl ui-url`, which needs the
socket, prints the view's URL with it. Every request but the page's script and style
(public package files) carries it: `?token=` in the URL, or `Authorization: Bearer`.

Load: `reach` and `trace` run on pazzd's event loop. Through the view they run one at a
time, and each is followed by a rest as long as it took, so the view never takes more
than half of the loop (the API socket's clients, pazzctl status among them, keep the
rest); a request that waits longer than `wait` seconds for its turn is answered 503.
"""

from __future__ import annotations

import contextlib
import hmac
import os
import secrets
import threading
import time
from pathlib import Path

__all__ = [
    "Throttle",
    "check_token",
    "new_token",
    "remove_token_file",
    "token_path",
    "write_token_file",
]


def new_token() -> str:
    return secrets.token_urlsafe(32)


def token_path(api_socket: str) -> str:
    return str(Path(api_socket).with_suffix(".ui-token"))


def write_token_file(path: str, token: str, gid: int | None) -> None:
    """Write the token to path, mode 0640 with group gid, replacing an older file whole
    (a reader never sees a part, and never a file more open than that)."""
    tmp = f"{path}.{os.getpid()}.tmp"
    with contextlib.suppress(FileNotFoundError):
        os.unlink(tmp)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        if gid is not None:
            os.fchown(fd, -1, gid)
        os.fchmod(fd, 0o640)
        os.write(fd, f"{token}\n".encode())
    finally:
        os.close(fd)
    os.replace(tmp, path)


def remove_token_file(path: str, token: str) -> None:
    """Remove the file if it still holds this token (not a newer pazzd's)."""
    with contextlib.suppress(OSError):
        if Path(path).read_text().strip() == token:
            os.unlink(path)


def check_token(token: str, query: dict[str, str], authorization: str | None) -> bool:
    """Does the request carry the token (?token=, or Authorization: Bearer)?"""
    given = query.get("token", "")
    if not given and authorization and authorization[:7].lower() == "bearer ":
        given = authorization[7:].strip()
    return hmac.compare_digest(given.encode(), token.encode())


class Throttle:
    """One expensive request at a time, each followed by a rest as long as it took."""

    def __init__(self, wait: float = 30.0) -> None:
        self.wait = wait
        self._lock = threading.Lock()
        self.refused = 0

    @contextlib.contextmanager
    def turn(self):
        """Yields True with the turn, False when none came within `wait` seconds."""
        if not self._lock.acquire(timeout=self.wait):
            self.refused += 1
            yield False
            return
        t0 = time.monotonic()
        try:
            yield True
        finally:
            time.sleep(time.monotonic() - t0)  # the rest: the loop's other half
            self._lock.release()
