"""The API client: one request to pazzd over its Unix socket, one reply."""

from __future__ import annotations

import socket

from pazzapi.framing import ApiError, parse_reply, request_line

__all__ = ["call"]


def call(path: str, cmd: str, timeout: float = 30.0, **args) -> object:
    """One request to pazzd; returns the result or raises ApiError."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(timeout)
            s.connect(path)
            s.sendall(request_line(cmd, args))
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
    return parse_reply(buf)
