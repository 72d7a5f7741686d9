"""pazzd's local API as its clients see it: JSON lines over a Unix socket.

Request: one JSON object per line, {"cmd": NAME, ...arguments}. Reply: one line,
{"ok": true, "result": ...} or {"ok": false, "error": "...", "code": "input" or "failed"}
(the caller's error, InputError, or the server's failure, ApiError). `framing` holds the line
format (shared with the server, pazzd.api), `client` the one-request client `call` that
pazzctl and the lab use. The package imports nothing else of ours.
"""

from pazzapi.client import call
from pazzapi.framing import ApiError, InputError

__all__ = ["ApiError", "InputError", "call"]
