"""The line format of pazzd's API, shared by the server (pazzd.api) and the client.

A request is one JSON object with a string "cmd", on one line of at most MAX_LINE bytes;
the reply is one JSON line, {"ok": true, "result": ...} or {"ok": false, "error": "...",
"code": CODE}. CODE tells whose the error is: "input" for a request that cannot be served
as sent (an unknown command, a missing or bad argument, an ID or port that does not
exist: the caller's to fix), "failed" for the server's own failure (an internal error, too
many clients). A reply without a code is taken as "failed".
"""

from __future__ import annotations

import json

__all__ = [
    "INPUT",
    "MAX_LINE",
    "ApiError",
    "InputError",
    "error_reply",
    "parse_reply",
    "parse_request",
    "reply_line",
    "request_line",
]

MAX_LINE = 1 << 20


INPUT, FAILED = "input", "failed"


class ApiError(Exception):
    """A request the server answered with an error, or a server that cannot be reached."""

    code = FAILED


class InputError(ApiError):
    """A request that cannot be served as sent: the caller's error (code "input")."""

    code = INPUT


def error_reply(message: str, code: str = FAILED) -> dict:
    return {"ok": False, "error": message, "code": code}


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
    """The result of a reply line, or the server's error: InputError for the caller's
    error, ApiError for the server's failure."""
    msg = json.loads(buf)
    if not msg.get("ok"):
        cls = InputError if msg.get("code") == INPUT else ApiError
        raise cls(msg.get("error", "unknown error"))
    return msg["result"]
