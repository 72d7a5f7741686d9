"""The line format of pazzd's API, shared by the server (pazzd.api) and the client.

A request is one JSON object with a string "cmd", on one line of at most MAX_LINE bytes;
the reply is one JSON line, {"ok": true, "result": ...} or {"ok": false, "error": "..."}.
"""

from __future__ import annotations

import json

__all__ = ["MAX_LINE", "ApiError", "parse_reply", "parse_request", "reply_line", "request_line"]

MAX_LINE = 1 << 20


class ApiError(Exception):
    """A request the server answered with an error, or a server that cannot be reached."""


def request_line(cmd: str, args: dict) -> bytes:
    return json.dumps({"cmd": cmd, **args}).encode() + b"\n"


def parse_request(line: bytes) -> dict:
    """The request on a line; ValueError (its text: what is wrong) if it is not one."""
    try:
        req = json.loads(line)
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None
    if not isinstance(req, dict) or not isinstance(req.get("cmd"), str):
        raise ValueError("a request is a JSON object with a string 'cmd'")
    return req


def reply_line(msg: dict) -> bytes:
    """A reply as a line; values JSON does not know are sent as their str()."""
    return json.dumps(msg, default=str).encode() + b"\n"


def parse_reply(buf: bytes) -> object:
    """The result of a reply line, or ApiError with the server's error."""
    msg = json.loads(buf)
    if not msg.get("ok"):
        raise ApiError(msg.get("error", "unknown error"))
    return msg["result"]
