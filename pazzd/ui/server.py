"""The web view's HTTP server: a page, its script and style, the topology as SVG, and the
API's read-only commands as JSON (the same answers as the API socket: `answer` runs them
on the daemon's event loop).

    GET /ui/                 the page (static/index.html)
    GET /ui/static/NAME      ui.js, ui.css
    GET /ui/topology.svg     the topology drawn on the server (pazzd.ui.svg)
    GET /ui/api/CMD?ARG=...  {"ok": true, "result": ...} or {"ok": false, "error": ...}
                             for CMD in READ_ONLY (HTTP 400 for a bad request, 500 for
                             pazzd's failure, 503 while it stops); anything else is 404

Read-only by construction: GET and HEAD only, no command that changes pazzd (flowmod,
reload) or makes it poll switches (localize). Bound to loopback, it answers only requests
whose Host is a loopback name (no DNS rebinding from a web page elsewhere). Open to the
API socket's users only: every request but the script and style carries the token that
`pazzctl ui-url` gives (pazzd.ui.access), else 401; `reach` and `trace` run one at a time
and take at most half of pazzd's event loop, and `reach` lists at most REACH_LIMIT cubes.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import logging
import socket
import threading
from collections.abc import Awaitable, Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from urllib.parse import parse_qsl, urlsplit

from cpc.topology import Topology
from pazzapi.framing import INPUT
from pazzd.addresses import is_loopback

from .access import Throttle, check_token
from .svg import render

__all__ = ["READ_ONLY", "UiServer", "loop_answer"]

log = logging.getLogger("pazzd.ui")

READ_ONLY = frozenset({"status", "faults", "fault", "trace", "reach", "topology", "coverage"})
EXPENSIVE = frozenset({"trace", "reach"})  # one at a time (pazzd.ui.access.Throttle)
REACH_LIMIT = 1000  # cubes listed at most, through the view (the API socket: 100000)
INT_ARGS = frozenset({"id", "limit"})
NO_TOKEN = (
    b"pazzd's web view needs its token: open the URL that `pazzctl ui-url` prints "
    b"(pazzd makes a new token at each start)\n"
)
STATIC = {
    "index.html": "text/html; charset=utf-8",
    "ui.js": "text/javascript; charset=utf-8",
    "ui.css": "text/css; charset=utf-8",
}
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
)
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})

Answer = Callable[[dict], tuple[int, dict]]


def _host_name(header: str) -> str:
    """The name part of a Host header: 'localhost:9474' -> 'localhost', '[::1]:80' -> '::1'."""
    h = header.strip().lower()
    if h.startswith("["):
        return h[1 : h.find("]")] if "]" in h else h
    return h.rsplit(":", 1)[0] if h.count(":") == 1 else h


def loop_answer(
    loop: asyncio.AbstractEventLoop, serve: Callable[[dict], Awaitable[dict]], timeout: float
) -> Answer:
    """An Answer that runs serve(request) (the API's reply: {"ok": ...}) on the event loop
    and waits for it at most `timeout` seconds."""

    def answer(req: dict) -> tuple[int, dict]:
        try:
            fut = asyncio.run_coroutine_threadsafe(serve(req), loop)
        except RuntimeError:  # the loop is closed: pazzd is stopping
            return 503, {"ok": False, "error": "pazzd is stopping"}
        try:
            reply = fut.result(timeout)
        except concurrent.futures.TimeoutError:
            fut.cancel()
            return 503, {"ok": False, "error": f"pazzd did not answer within {timeout:g} s"}
        except concurrent.futures.CancelledError:
            return 503, {"ok": False, "error": "pazzd is stopping"}
        if reply.get("ok"):
            return 200, reply
        return (400 if reply.get("code") == INPUT else 500), reply

    return answer


class UiServer:
    """answer(request) -> (HTTP status, the API's reply object); thread-safe."""

    def __init__(
        self, topo: Topology, answer: Answer, host: str, port: int, token: str, wait: float = 30.0
    ) -> None:
        self.topo = topo
        self.answer = answer
        self.host = host
        self.port = port
        self.token = token
        self.throttle = Throttle(wait)
        self.loopback = is_loopback(host)
        self._files = {
            name: resources.files("pazzd.ui").joinpath("static", name).read_bytes()
            for name in STATIC
        }
        self._svg: bytes | None = None
        self._svg_lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def svg(self) -> bytes:
        with self._svg_lock:  # drawn once, on the first request (the topology is fixed)
            if self._svg is None:
                self._svg = render(self.topo).encode()
            return self._svg

    def start(self) -> int:
        """Bind and serve in a daemon thread; returns the bound port."""
        ui = self

        class Handler(_Handler):
            server_ui = ui

        cls = type("UiHttpServer", (ThreadingHTTPServer,), {"daemon_threads": True})
        if ":" in self.host:
            cls.address_family = socket.AF_INET6
        self._server = cls((self.host, self.port), Handler)
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="pazzd-ui", daemon=True
        )
        self._thread.start()
        return self._server.server_address[1]

    @property
    def server(self) -> ThreadingHTTPServer | None:
        return self._server

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


class _Handler(BaseHTTPRequestHandler):
    server_ui: UiServer
    server_version = "pazzd-ui"
    sys_version = ""

    def log_message(self, fmt, *args) -> None:
        # The request line without its query: it may hold the token.
        args = tuple(a.split("?", 1)[0] if isinstance(a, str) else a for a in args)
        log.debug("ui: %s " + fmt, self.address_string(), *args)

    def _send(self, code: int, body: bytes, ctype: str, extra: dict | None = None) -> None:
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("Content-Security-Policy", CSP)
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("X-Frame-Options", "DENY")
        self.send_header("Referrer-Policy", "no-referrer")
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _json(self, code: int, obj: dict) -> None:
        body = json.dumps(obj, default=str).encode()
        self._send(code, body, "application/json")

    def _not_allowed(self) -> None:
        self._send(
            405,
            b"read-only: GET and HEAD only\n",
            "text/plain; charset=utf-8",
            {"Allow": "GET, HEAD"},
        )

    do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = _not_allowed

    def do_HEAD(self) -> None:
        self.do_GET()

    def do_GET(self) -> None:
        ui = self.server_ui
        if ui.loopback and _host_name(self.headers.get("Host", "")) not in LOOPBACK_NAMES:
            self._send(421, b"this view answers only to a loopback Host\n", "text/plain")
            return
        url = urlsplit(self.path)
        path = url.path
        public = path.startswith("/ui/static/") or path in ("/", "/ui")
        query = dict(parse_qsl(url.query, keep_blank_values=True))
        if not public and not check_token(ui.token, query, self.headers.get("Authorization")):
            self._send(401, NO_TOKEN, "text/plain; charset=utf-8", {"WWW-Authenticate": "Bearer"})
            return
        if path in ("/", "/ui"):  # the query (the token) goes along
            where = "/ui/" + (f"?{url.query}" if url.query else "")
            self._send(302, b"", "text/plain", {"Location": where})
        elif path == "/ui/":
            self._send(200, ui._files["index.html"], STATIC["index.html"])
        elif path.startswith("/ui/static/") and path[11:] in STATIC and path[11:] != "index.html":
            name = path[11:]
            self._send(200, ui._files[name], STATIC[name])
        elif path == "/ui/topology.svg":
            self._send(200, ui.svg(), "image/svg+xml")
        elif path.startswith("/ui/api/"):
            self._api(path[8:], url.query)
        else:
            self._send(404, b"not found\n", "text/plain; charset=utf-8")

    def _api(self, cmd: str, query: str) -> None:
        if cmd not in READ_ONLY:
            self._json(404, {"ok": False, "error": f"no read-only command {cmd!r}"})
            return
        req: dict = {"cmd": cmd}
        for k, v in parse_qsl(query, keep_blank_values=True):
            if k in ("cmd", "token"):
                continue
            digits = v.lstrip("-")
            req[k] = int(v) if k in INT_ARGS and digits.isascii() and digits.isdigit() else v
        if cmd == "reach" and isinstance(req.get("limit"), int) and req["limit"] > REACH_LIMIT:
            msg = f"limit: at most {REACH_LIMIT} through the web view (pazzctl reach for more)"
            self._json(400, {"ok": False, "error": msg})
            return
        if cmd not in EXPENSIVE:
            self._json(*self.server_ui.answer(req))
            return
        with self.server_ui.throttle.turn() as mine:
            if not mine:
                busy = {"ok": False, "error": f"busy: {cmd} requests run one at a time; try again"}
                self._send(503, json.dumps(busy).encode(), "application/json", {"Retry-After": "1"})
                return
            self._json(*self.server_ui.answer(req))  # answered, then the turn's rest
