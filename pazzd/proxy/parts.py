"""The records and narrow services of a proxy session (pazzd.proxy.session): pazzd's
subscribers (`Hooks`), the drop counters, what a session uses of its proxy (`Services`),
a FlowMod or GroupMod awaiting its barrier, the proxy's own requests, and one upstream
controller connection."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import ofwire as of
from pazzd.proxy import roles
from pazzd.proxy.feed import ModelFeed
from pazzd.proxy.store import Store
from pazzd.proxy.table import EntryChange, IntendedTable

if TYPE_CHECKING:  # a session's parts name it only in their types
    from pazzd.proxy.session import Session

log = logging.getLogger("pazzd.proxy")

__all__ = [
    "Counters",
    "Hooks",
    "OwnRequest",
    "Pending",
    "Services",
    "Upstream",
    "UpstreamProtocol",
    "abort",
    "orig_xid",
]


def orig_xid(msg: bytes) -> int:
    return int.from_bytes(msg[4:8], "big")


def abort(transport) -> None:
    """Close at once, dropping what is queued (a transport without abort just closes)."""
    (getattr(transport, "abort", None) or transport.close)()


@dataclass
class Hooks:
    """pazzd's subscribers to what sessions see (Proxy.hooks; each a list, called in order).

    guards(dpid, RawFlowMod) -> why it is refused, or None: asked before a FlowMod is
    forwarded; the first reason refuses it (an OFPT_ERROR, never sent to the switch).
    packet_in(dpid, message) for every PACKET_IN; release(dpid, buffer_id) for every
    PACKET_OUT and FLOW_MOD of the controller; commit(dpid, changes): the committed changes
    of a switch's intended table (proxy.table's EntryChange), after the model has them.
    batches() -> a context manager around each slice of a controller's messages (the
    guard keeps its trial across the slice's FlowMods, see pazzd.guard).
    """

    guards: list[Callable[[int, of.RawFlowMod], str | None]] = field(default_factory=list)
    packet_in: list[Callable[[int, bytes], None]] = field(default_factory=list)
    release: list[Callable[[int, int], None]] = field(default_factory=list)
    commit: list[Callable[[int, list], None]] = field(default_factory=list)
    batches: list[Callable[[], contextlib.AbstractContextManager]] = field(default_factory=list)

    @contextlib.contextmanager
    def batch(self):
        with contextlib.ExitStack() as stack:
            for b in self.batches:
                stack.enter_context(b())
            yield

    def call(self, name: str, *args) -> None:
        """Call every subscriber of `name`; one that fails is logged, the others still run
        (a subscriber must never cost the controller its messages)."""
        for fn in getattr(self, name):
            try:
                fn(*args)
            except Exception:
                log.exception("%s subscriber failed", name)

    def refusal(self, dpid: int, fm) -> str | None:
        for g in self.guards:
            why = g(dpid, fm)
            if why:
                return why
        return None


@dataclass
class Counters:
    """Connections dropped or refused, and messages refused (see Proxy.drops)."""

    stuck_drops: int = 0  # peers dropped because they stopped reading
    handshake_timeouts: int = 0  # switch connections without a handshake in time
    idle_drops: int = 0  # switches silent for idle_timeout
    refused: int = 0  # connections refused at the cap
    barrier_drops: int = 0  # switches that did not answer a barrier in time
    refused_mods: int = 0  # controller messages answered with an error, not forwarded
    takeovers_refused: int = 0  # connections that claimed a live switch's dpid
    unexplained_removals: int = 0  # FLOW_REMOVED (delete) the controller did not cause
    ignored_removals: int = 0  # FLOW_REMOVED for a timeout (or cookie) the entry did not have
    closed_before_handshake: int = 0  # connections closed before the switch said its dpid


@dataclass
class Services:
    """What a Session uses of its proxy: the configuration, the intended state, the model
    feed, the callbacks, the counters, and a few proxy-wide steps."""

    config: object  # ProxyConfig
    store: Store
    tables: dict[int, IntendedTable]
    feed: ModelFeed
    hooks: Hooks
    counters: Counters
    next_xid: Callable[[], int]
    log_limited: Callable[..., None]  # (key, level, fmt, *args): once a minute per key
    attach: Callable[[Session], None]  # a new connection
    detach: Callable[[Session], None]  # a connection gone
    claim: Callable[[Session], None]  # its dpid is known: go live, or contest a live one
    register: Callable[[Session], None]  # it is the switch of its dpid now
    group_mod: Callable[[int, of.RawGroupMod, IntendedTable], list[EntryChange]]
    removed: Callable[[int, tuple], None]  # an intended entry left the switch unasked
    flush_soon: Callable[[], None]  # write the intended state to the store soon


@dataclass
class Pending:
    seq: int
    xid: int
    kind: str  # "flow" | "group"
    msg: object  # RawFlowMod | RawGroupMod
    orig: bytes
    sent: bytes
    rule_id: int = 0
    rejected: bool = False
    conn: str = ""  # the controller connection that sent it
    cxid: int = 0  # its xid as that controller sent it


@dataclass
class OwnRequest:
    kind: str
    future: asyncio.Future | None = None
    parts: list = field(default_factory=list)
    seq: int = 0
    snapshot: dict | None = None
    sent: float = 0.0  # time.monotonic() when sent
    xseq: int = 0  # a barrier: the translated requests sent before it (roles.XidMap.seq)


class Upstream:
    """One controller connection of a session: its role and asynchronous configuration
    (pazzd.proxy.roles) and what is queued for it."""

    def __init__(self, addr, first: bool) -> None:
        self.addr = addr  # proxy.Controller
        self.name = addr.name
        self.key = "controller" if first else f"controller {addr.name}"  # in Session.paused
        self.transport = None
        self.ready = False  # its HELLO arrived
        self.buf = bytearray()
        self.out: list[bytes] = []
        self.role = roles.EQUAL
        self.async_cfg = roles.DEFAULT_ASYNC
        self.gone: asyncio.Event | None = None
        self.sliced = False  # the rest of buf waits for the next turn (Session._next_slice)


class UpstreamProtocol(asyncio.Protocol):
    """The asyncio protocol of one upstream connection: its events go to the session."""

    def __init__(self, session: Session, u: Upstream) -> None:
        self.session = session
        self.u = u
        self.transport = None

    def connection_made(self, transport) -> None:
        self.transport = transport
        transport.set_write_buffer_limits(high=self.session.svc.config.write_buffer_high)
        self.session.upstream_made(transport, self.u)

    def data_received(self, data: bytes) -> None:
        if self.transport is self.u.transport:
            self.session.from_controller(data, self.u)

    def connection_lost(self, exc) -> None:
        self.session.upstream_lost(self.transport, exc, self.u)

    def pause_writing(self) -> None:
        if self.transport is self.u.transport:
            self.session.peer_paused(self.u.key, True)

    def resume_writing(self) -> None:
        if self.transport is self.u.transport:
            self.session.peer_paused(self.u.key, False)
