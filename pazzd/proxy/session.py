"""One switch connection and its upstream controller connection (a `Session`), and the
narrow `Services` of the proxy that a session uses."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import ssl
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from pazzd import openflow as of
from pazzd.proxy import monitor, wire
from pazzd.proxy.feed import ModelFeed
from pazzd.proxy.store import Store
from pazzd.proxy.table import EntryChange, IntendedTable

log = logging.getLogger("pazzd.proxy")


@dataclass
class Hooks:
    """The callbacks of pazzd that sessions call (set on the Proxy, see there)."""

    guard: Callable[[int, of.RawFlowMod], str | None] | None = None
    on_packet_in: Callable[[int, bytes], None] | None = None
    on_release: Callable[[int, int], None] | None = None
    on_commit: Callable[[int, list], None] | None = None


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
class _Pending:
    seq: int
    xid: int
    kind: str  # "flow" | "group"
    msg: object  # RawFlowMod | RawGroupMod
    orig: bytes
    sent: bytes
    rule_id: int = 0
    rejected: bool = False


@dataclass
class _OwnRequest:
    kind: str
    future: asyncio.Future | None = None
    parts: list = field(default_factory=list)
    seq: int = 0
    snapshot: dict | None = None
    sent: float = 0.0  # time.monotonic() when sent


class _UpstreamProtocol(asyncio.Protocol):
    def __init__(self, session: Session) -> None:
        self.session = session
        self.transport = None

    def connection_made(self, transport) -> None:
        self.transport = transport
        transport.set_write_buffer_limits(high=self.session.svc.config.write_buffer_high)
        self.session.upstream_made(transport)

    def data_received(self, data: bytes) -> None:
        if self.transport is self.session.up:
            self.session.from_controller(data)

    def connection_lost(self, exc) -> None:
        self.session.upstream_lost(self.transport, exc)

    def pause_writing(self) -> None:
        if self.transport is self.session.up:
            self.session.peer_paused("controller", True)

    def resume_writing(self) -> None:
        if self.transport is self.session.up:
            self.session.peer_paused("controller", False)


class Session:
    """One switch connection and its upstream controller connection."""

    def __init__(self, services: Services, transport, listener: str = "tcp") -> None:
        self.svc = services
        self.sw = transport
        self.listener = listener
        self.started = time.monotonic()
        self.last_rx = self.started
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        self.up = None
        self.up_ready = False
        self.buf_sw = bytearray()
        self.buf_up = bytearray()
        self.version: int | None = None
        self.hello_for_controller = b""
        self.dpid: int | None = None
        self.features: bytes | None = None
        self.own: dict[int, _OwnRequest] = {}
        self.own_fire: collections.OrderedDict[int, str] = collections.OrderedDict()
        self.pending: collections.deque[_Pending] = collections.deque()
        self.seq = 0
        self.unbarriered = False
        self.closed = False
        self.upstream_task: asyncio.Task | None = None
        self.mods_committed = 0
        self.reid: set = set()
        self._commit_upto = 0
        # Flow control: which peer's transport is over its high-water mark, and since when.
        self.paused: dict[str, float] = {}
        self._stall_handle = None
        self._timer = None
        self._barrier_handle = None
        self._full = False  # max_pending reached: not reading from the controller
        services.attach(self)
        with contextlib.suppress(RuntimeError):  # no loop: a test drives the session
            loop = asyncio.get_running_loop()
            self._timer = loop.call_later(services.config.handshake_timeout, self._handshake_check)
        self.sw.write(of.hello())

    def __repr__(self) -> str:
        d = f"dpid {self.dpid:#x}" if self.dpid is not None else "dpid ?"
        return f"switch {self.peer} ({d})"

    @property
    def ids_on(self) -> bool:
        return self.svc.config.unique_ids and self.version == of.OFP13

    # --- own requests ------------------------------------------------------------------------
    def own_xid(self) -> int:
        return self.svc.next_xid()

    def send_own(self, data: bytes, req: _OwnRequest | None) -> None:
        xid = of.header(data)[3]
        if req is None:
            self.own_fire[xid] = "fire"
            while len(self.own_fire) > 4096:
                self.own_fire.popitem(last=False)
        else:
            self.own[xid] = req
        self._write_sw(data)

    # --- timeouts ----------------------------------------------------------------------------
    def _handshake_check(self) -> None:
        self._timer = None
        if self.closed:
            return
        if self.dpid is None:
            self.svc.counters.handshake_timeouts += 1
            log.debug("%r: no handshake within %.1f s", self, self.svc.config.handshake_timeout)
            self.svc.log_limited(
                "handshake",
                logging.WARNING,
                "dropping switch connections without a handshake within %.1f s (%r)",
                self.svc.config.handshake_timeout,
                self,
            )
            wire.abort(self.sw)
            self.switch_lost(None)
            return
        self._idle_arm()

    def _idle_arm(self) -> None:
        t = self.svc.config.idle_timeout
        if t > 0 and not self.closed:
            loop = asyncio.get_running_loop()
            self._timer = loop.call_later(t / 2, self._idle_check)

    def _idle_check(self) -> None:
        self._timer = None
        if self.closed:
            return
        now, t = time.monotonic(), self.svc.config.idle_timeout
        if "controller" in self.paused:  # not reading from the switch: its silence is ours
            self.last_rx = now
        silent = now - self.last_rx
        if silent >= t:
            self.svc.counters.idle_drops += 1
            log.warning("disconnecting %r: silent for %.1f s (no echo reply)", self, silent)
            wire.abort(self.sw)
            self.switch_lost(None)
            return
        if silent >= t / 2 - 0.001:
            self.send_own(of.message(self.version, of.OFPT_ECHO_REQUEST, self.own_xid()), None)
        self._idle_arm()

    # --- barriers --------------------------------------------------------------------------
    def _barrier_sent(self) -> None:
        if self._barrier_handle is None:
            with contextlib.suppress(RuntimeError):  # no loop: a test drives the session
                loop = asyncio.get_running_loop()
                t = self.svc.config.barrier_timeout
                self._barrier_handle = loop.call_later(t, self._barrier_check)

    def _barrier_check(self) -> None:
        self._barrier_handle = None
        if self.closed:
            return
        sent = [r.sent for r in self.own.values() if r.kind == "barrier"]
        if not sent:
            return
        now, t = time.monotonic(), self.svc.config.barrier_timeout
        if now - min(sent) >= t:
            self.svc.counters.barrier_drops += 1
            log.warning(
                "disconnecting %r: no barrier reply within %.1f s (%d changes pending)",
                self,
                t,
                len(self.pending),
            )
            wire.abort(self.sw)
            self.switch_lost(None)
            return
        self._barrier_handle = asyncio.get_running_loop().call_later(
            t - (now - min(sent)), self._barrier_check
        )

    def _check_pending(self) -> None:
        """Stop reading from the controller at max_pending unconfirmed changes; go on
        once the switch has confirmed half of them."""
        n, limit = len(self.pending), self.svc.config.max_pending
        if not self._full and n >= limit:
            self._full = True
            if self.up is not None:
                self.up.pause_reading()
        elif self._full and n <= limit // 2:
            self._full = False
            if self.up is not None and "switch" not in self.paused and not self.closed:
                self.up.resume_reading()

    # --- flow control ------------------------------------------------------------------------
    def _write_sw(self, data: bytes) -> None:
        self.sw.write(data)
        self._check_buffer("switch")

    def _check_buffer(self, who: str) -> None:
        t = self.sw if who == "switch" else self.up
        if t is None:
            return
        limit = self.svc.config.max_write_buffer
        size = getattr(t, "get_write_buffer_size", None)  # test transports have none
        n = size() if size is not None else 0
        if n > limit:
            self.drop_stuck(who, f"{n} bytes queued for it (limit {limit})")

    def peer_paused(self, who: str, paused: bool) -> None:
        """who's transport went over (paused) or back under its high-water mark: stop or
        resume reading from the other side, so that the proxy buffers at most about one
        high-water mark per direction."""
        other = self.up if who == "switch" else self.sw
        if paused:
            self.paused.setdefault(who, time.monotonic())
            if other is not None:
                other.pause_reading()
            if self._stall_handle is None:
                loop = asyncio.get_running_loop()
                self._stall_handle = loop.call_later(
                    self.svc.config.stall_timeout, self._stall_check
                )
        else:
            self.paused.pop(who, None)
            if other is not None and not self.closed and not (who == "switch" and self._full):
                other.resume_reading()
            if not self.paused and self._stall_handle is not None:
                self._stall_handle.cancel()
                self._stall_handle = None

    def _stall_check(self) -> None:
        self._stall_handle = None
        now, limit = time.monotonic(), self.svc.config.stall_timeout
        for who, since in list(self.paused.items()):
            if now - since >= limit:
                self.drop_stuck(who, f"not reading for {now - since:.1f} s")
        if self.paused and not self.closed:
            wait = max(0.0, limit - (now - min(self.paused.values())))
            self._stall_handle = asyncio.get_running_loop().call_later(wait, self._stall_check)

    def drop_stuck(self, who: str, why: str) -> None:
        """Abort the connection of a peer that stopped reading (its queued bytes go too)."""
        self.svc.counters.stuck_drops += 1
        if who == "switch":
            log.warning("disconnecting %r: it stopped reading: %s", self, why)
            wire.abort(self.sw)
            self.switch_lost(None)
        elif self.up is not None:
            log.warning("disconnecting controller of %r: it stopped reading: %s", self, why)
            up = self.up
            wire.abort(up)
            self.upstream_lost(up, None)

    def forget(self, xid: int) -> None:
        """Stop waiting for the reply to own request xid; a late one is still swallowed."""
        if self.own.pop(xid, None) is not None:
            self.own_fire[xid] = "late"
            while len(self.own_fire) > 4096:
                self.own_fire.popitem(last=False)

    def _own_reply(self, t: int, xid: int, msg: bytes) -> bool:
        req = self.own.get(xid)
        if req is None:
            if xid in self.own_fire:
                if t == of.OFPT_ERROR:
                    etype, code = struct.unpack_from("!HH", msg, 8)
                    log.warning("%r: error %d/%d for the proxy's own message", self, etype, code)
                return True
            return False
        if t == of.OFPT_ERROR:
            del self.own[xid]
            etype, code = struct.unpack_from("!HH", msg, 8)
            err = RuntimeError(f"switch answered {req.kind} with error {etype}/{code}")
            if req.kind == "barrier":
                log.warning("%r: %s", self, err)
            if req.future is not None and not req.future.done():
                req.future.set_exception(err)
            return True
        if req.kind == "features" and t == of.OFPT_FEATURES_REPLY:
            del self.own[xid]
            self._features(msg)
        elif req.kind == "barrier" and t == wire.BARRIER_REQ[self.version] + 1:
            del self.own[xid]
            self._commit_upto = req.seq  # after the relayed replies are written
        elif req.kind == "flows" and t == of.OFPT_MULTIPART_REPLY:
            stats, _ = of.parse_flow_stats_body(msg[16:], strip=self.ids_on)
            req.parts.extend(stats)
            flags = struct.unpack_from("!H", msg, 10)[0]
            if not flags & of.OFPMPF_REPLY_MORE:
                del self.own[xid]
                snap = dict(self.svc.tables[self.dpid].entries)
                if req.future is not None and not req.future.done():
                    req.future.set_result((req.parts, snap))
        else:
            del self.own[xid]
            if req.future is not None and not req.future.done():
                req.future.set_result(msg)
        return True

    # --- from the switch -----------------------------------------------------------------------
    # from_switch and from_controller are alike on purpose: one shared receive path costs
    # 0.4 µs per relayed message, a tenth of the proxy's own work on one.
    def from_switch(self, data: bytes) -> None:
        self.last_rx = time.monotonic()
        buf = self.buf_sw
        buf += data
        out: list[bytes] = []
        try:
            off = wire.split_messages(buf, lambda msg: self._switch_msg(msg, out))
        except of.ProtocolError as e:
            self._flush_up(out)
            self.fail_switch(str(e))
            return
        except Exception:
            log.exception("%r: internal error on a switch message", self)
            self._flush_up(out)
            self.fail_switch("internal error (see the traceback above)")
            return
        del buf[:off]
        self._flush_up(out)
        if self._commit_upto:
            upto, self._commit_upto = self._commit_upto, 0
            try:
                self._commit(upto)
            except Exception:  # a bug of ours must not take the switch session down
                log.exception("%r: committing accepted changes failed", self)

    def _flush_up(self, out: list[bytes]) -> None:
        if out and self.up_ready:
            self.up.write(b"".join(out))
            self._check_buffer("controller")

    def _switch_msg(self, msg: bytes, out: list[bytes]) -> None:
        ver, t, ln, xid = of.HDR.unpack_from(msg)
        if self.version is None:
            if t != of.OFPT_HELLO:
                raise of.ProtocolError(f"first message is type {t}, not HELLO")
            offered = of.hello_versions(msg)
            common = set(of.SUPPORTED_VERSIONS) & offered
            if not common:
                raise of.ProtocolError(f"no common OpenFlow version (switch offers {offered})")
            self.version = max(common)
            self.hello_for_controller = of.hello(sorted(common), xid)
            self.send_own(
                of.message(self.version, of.OFPT_FEATURES_REQUEST, self.own_xid()),
                _OwnRequest("features"),
            )
            return
        wire.check(self.version, ver, t, ln)
        if t in wire.REPLY_TYPES[self.version] and (xid in self.own or xid in self.own_fire):
            self._own_reply(t, xid, msg)
            return
        v13 = self.version == of.OFP13
        if t == of.OFPT_ERROR:
            msg = self._error(msg, xid)
        elif t == of.OFPT_ECHO_REQUEST and not self.up_ready:
            self._write_sw(of.HDR.pack(ver, of.OFPT_ECHO_REPLY, ln, xid) + msg[8:])
            return
        elif t == of.OFPT_HELLO:
            raise of.ProtocolError("second HELLO")
        elif not v13:
            pass
        elif t == of.OFPT_MULTIPART_REPLY:
            if struct.unpack_from("!H", msg, 8)[0] == of.OFPMP_FLOW:
                _, body = of.parse_flow_stats_body(msg[16:], strip=self.ids_on)
                if len(body) != ln - 16:
                    msg = of.HDR.pack(ver, t, 16 + len(body), xid) + msg[8:16] + body
            elif self.ids_on and (kind := monitor.monitor_kind(msg)) is not None:
                msg = monitor.strip_reply(msg, kind, self.own_fire)
                if msg is None:
                    return
        elif t == of.OFPT_PACKET_IN and self.svc.hooks.on_packet_in is not None:
            try:
                self.svc.hooks.on_packet_in(self.dpid, msg)
            except Exception:  # the watch must never cost the controller its packets
                log.exception("on_packet_in callback failed")
        elif t == of.OFPT_PORT_STATUS:
            reason, port, up = of.parse_port_status(msg)
            self.svc.feed.call(self.dpid, "port_status", self.dpid, port, up)
        elif t == of.OFPT_FLOW_REMOVED:
            self._flow_removed(of.parse_flow_removed(msg))
        if self.up_ready:
            out.append(msg)

    def _error(self, msg: bytes, xid: int) -> bytes:
        """Mark the FlowMod/GroupMod it answers as rejected; give the controller its bytes."""
        for p in self.pending:
            if p.xid == xid and not p.rejected:
                p.rejected = True
                if p.sent is not p.orig:
                    data = msg[12:]
                    if data and p.sent.startswith(data[: min(len(data), len(p.sent))]):
                        orig = p.orig if len(data) >= len(p.sent) else p.orig[: len(data)]
                        return of.HDR.pack(msg[0], msg[1], 12 + len(orig), xid) + msg[8:12] + orig
                break
        return msg

    def _features(self, msg: bytes) -> None:
        dpid = of.features_dpid(msg)
        self.dpid = dpid
        self.features = msg
        self.svc.claim(self)

    def _go_live(self) -> None:
        self.svc.register(self)
        log.info("%r connected, OpenFlow 0x%02x", self, self.version)
        if self.upstream_task is None:
            self.upstream_task = asyncio.ensure_future(self._upstream_loop())

    def _flow_removed(self, fr: of.RawFlowRemoved) -> None:
        """Only a timeout ends intent here. A delete the controller sent (FlowMod or group
        delete) ends it when that change commits; any other delete is an entry removed
        behind the controller's back: it stays intended and the next audit reports it
        missing at once."""
        key = (fr.table, fr.priority, fr.mkey)
        table = self.svc.tables.setdefault(self.dpid, IntendedTable())
        if fr.reason not in (of.OFPRR_IDLE_TIMEOUT, of.OFPRR_HARD_TIMEOUT):
            if key in table.entries and not self._delete_pending():
                self.svc.counters.unexplained_removals += 1
                self.svc.removed(self.dpid, key)
                log.warning(
                    "%r: intended entry table=%d priority=%d removed (reason %d) by "
                    "something other than the controller",
                    self,
                    fr.table,
                    fr.priority,
                    fr.reason,
                )
            return
        old = table.remove(key)
        if old is not None:
            self.svc.store.delete(self.dpid, key)
            self._free_ids(table, (key,))
            self.svc.feed.feed(self.dpid, [EntryChange("delete", old)])

    def _free_ids(self, table: IntendedTable, keys) -> None:
        """Free the rule IDs of keys neither intended nor named by a FlowMod in flight."""
        if not keys:
            return
        busy = {(p.msg.table, p.msg.priority, p.msg.mkey) for p in self.pending if p.kind == "flow"}
        for key in keys:
            if key not in table.entries and key not in busy:
                self.svc.store.free_id(self.dpid, *key)

    def _delete_pending(self) -> bool:
        """Is a delete of the controller's (FlowMod or GroupMod) awaiting its barrier?"""
        for p in self.pending:
            if p.kind == "flow" and p.msg.command in (of.FC_DELETE, of.FC_DELETE_STRICT):
                return True
            if p.kind == "group" and p.msg.command == of.GC_DELETE:
                return True
        return False

    def fail_switch(self, reason: str) -> None:
        log.warning("disconnecting %r: protocol error: %s", self, reason)
        self.sw.close()
        self.switch_lost(None)

    def switch_lost(self, exc) -> None:
        if self.closed:
            return
        self.closed = True
        log.info("%r disconnected%s", self, f": {exc}" if exc else "")
        self.svc.detach(self)
        for h in (self._timer, self._barrier_handle):
            if h is not None:
                h.cancel()
        self._timer = self._barrier_handle = None
        if self._stall_handle is not None:
            self._stall_handle.cancel()
            self._stall_handle = None
        up_stuck = "controller" in self.paused
        self.paused.clear()
        if self.upstream_task is not None:
            self.upstream_task.cancel()
        if self.up is not None:
            wire.abort(self.up) if up_stuck else self.up.close()
        for req in self.own.values():
            if req.future is not None and not req.future.done():
                req.future.set_exception(ConnectionError(f"{self!r} disconnected"))
        self.own.clear()
        self.pending.clear()

    # --- upstream ------------------------------------------------------------------------------
    async def _upstream_loop(self) -> None:
        cfg = self.svc.config
        delay = cfg.reconnect_min
        loop = asyncio.get_running_loop()
        while not self.closed:
            if self.up is None:
                try:
                    await loop.create_connection(
                        lambda: _UpstreamProtocol(self),
                        cfg.controller_host,
                        cfg.controller_port,
                        ssl=cfg.controller_ssl,
                        server_hostname=cfg.controller_server_hostname
                        if cfg.controller_ssl
                        else None,
                    )
                    delay = cfg.reconnect_min
                except (OSError, ssl.SSLError) as e:
                    log.info(
                        "%r: controller %s:%s unreachable (%s); retry in %.1fs",
                        self,
                        cfg.controller_host,
                        cfg.controller_port,
                        e,
                        delay,
                    )
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, cfg.reconnect_max)
                    continue
            self._up_gone = asyncio.Event()
            await self._up_gone.wait()
            await asyncio.sleep(delay)
            delay = min(delay * 2, cfg.reconnect_max)

    def upstream_made(self, transport) -> None:
        if self.closed:
            transport.close()
            return
        self.up = transport
        self.up_ready = False
        self.buf_up = bytearray()
        if "switch" in self.paused or self._full:  # the switch is still behind
            transport.pause_reading()
        transport.write(self.hello_for_controller)

    def upstream_lost(self, transport, exc) -> None:
        if transport is not self.up:
            return
        self.up = None
        self.up_ready = False
        if "controller" in self.paused:
            self.peer_paused("controller", False)  # reading from the switch resumes
        if not self.closed:
            log.info("%r: controller connection lost%s", self, f": {exc}" if exc else "")
        ev = getattr(self, "_up_gone", None)
        if ev is not None:
            ev.set()

    def fail_controller(self, reason: str) -> None:
        log.warning("disconnecting controller of %r: protocol error: %s", self, reason)
        if self.up is not None:
            self.up.close()
            self.upstream_lost(self.up, None)

    # --- from the controller ---------------------------------------------------------------------
    def from_controller(self, data: bytes) -> None:
        buf = self.buf_up
        buf += data
        out: list[bytes] = []
        try:
            off = wire.split_messages(buf, lambda msg: self._controller_msg(msg, out))
        except of.ProtocolError as e:
            self._flush_down(out)
            self.fail_controller(str(e))
            return
        except Exception:
            log.exception("%r: internal error on a controller message", self)
            self._flush_down(out)
            self.fail_controller("internal error (see the traceback above)")
            return
        del buf[:off]
        self._flush_down(out)
        self._check_pending()

    def _flush_down(self, out: list[bytes]) -> None:
        if self.unbarriered:
            self.unbarriered = False
            xid = self.own_xid()
            self.own[xid] = _OwnRequest("barrier", seq=self.seq, sent=time.monotonic())
            self._barrier_sent()
            out.append(of.message(self.version, wire.BARRIER_REQ[self.version], xid))
        if out and not self.closed:
            self.svc.store.flush()  # rule IDs are on disk before the switch sees them
            self._write_sw(b"".join(out))

    def _controller_msg(self, msg: bytes, out: list[bytes]) -> None:
        ver, t, ln, xid = of.HDR.unpack_from(msg)
        if not self.up_ready:
            if t != of.OFPT_HELLO:
                raise of.ProtocolError(f"first message is type {t}, not HELLO")
            if self.version not in of.hello_versions(msg):
                raise of.ProtocolError(
                    f"controller does not offer OpenFlow 0x{self.version:02x}, which the "
                    "switch connection uses"
                )
            self.up_ready = True
            log.info("%r: controller session up", self)
            return
        wire.check(self.version, ver, t, ln)
        if t == of.OFPT_HELLO:
            raise of.ProtocolError("second HELLO")
        if ver == of.OFP13:
            if t == of.OFPT_FLOW_MOD:
                msg = self._flow_mod(msg, xid)
                if msg is None:  # refused with an OFPT_ERROR
                    return
            elif t == of.OFPT_PACKET_OUT and self.svc.hooks.on_release is not None:
                self.svc.hooks.on_release(self.dpid, of.packet_out_buffer(msg))
            elif t == of.OFPT_GROUP_MOD:
                gm = of.parse_group_mod(msg)
                if gm.command in (of.GC_ADD, of.GC_MODIFY) and of.buckets_have_verify_action(
                    gm.buckets
                ):
                    self._refuse(msg, of.OFPET_BAD_ACTION, of.OFPBAC_EPERM, "a Verify action")
                    return
                self.seq += 1
                self.pending.append(_Pending(self.seq, xid, "group", gm, msg, msg))
                self.unbarriered = True
        out.append(msg)

    def _refuse(self, msg: bytes, etype: int, code: int, why: str) -> None:
        """Answer a controller message with an OFPT_ERROR instead of forwarding it."""
        self.svc.counters.refused_mods += 1
        self.svc.log_limited(
            f"refuse-{why}",
            logging.WARNING,
            "%r: refused a controller message (type %d) with %s",
            self,
            msg[1],
            why,
        )
        if self.up is not None:
            xid = of.header(msg)[3]
            self.up.write(of.error_msg(self.version, xid, etype, code, msg))

    def _flow_mod(self, msg: bytes, xid: int) -> bytes | None:
        fm = of.parse_flow_mod(msg)
        if fm.buffer_id != of.OFP_NO_BUFFER and self.svc.hooks.on_release is not None:
            self.svc.hooks.on_release(self.dpid, fm.buffer_id)
        rid = 0
        sent = msg
        adds = fm.command in (of.FC_ADD, of.FC_MODIFY, of.FC_MODIFY_STRICT)
        if adds and of.has_verify_action(fm.instr):
            # The proxy's own set_verify_rule:ID (or the switch's implicit step) already
            # tags the entry; a second one, or push/pop/set_verify_port, breaks the tags.
            self._refuse(msg, of.OFPET_BAD_ACTION, of.OFPBAC_EPERM, "a Verify action")
            return None
        guard = self.svc.hooks.guard
        if guard is not None:
            why = guard(self.dpid, fm)
            if why:
                self._refuse(msg, of.OFPET_FLOW_MOD_FAILED, of.OFPFMFC_EPERM, why)
                return None
        if self.ids_on and adds and fm.match_end + len(of.add_rule_id(fm.instr, 0)) > 0xFFFF:
            # No room for the rule-ID action within OpenFlow's 16-bit length.
            self._refuse(msg, of.OFPET_BAD_REQUEST, of.OFPBRC_BAD_LEN, "no room for the rule ID")
            return None
        if self.ids_on and adds:
            store = self.svc.store
            rid = 0
            if fm.command == of.FC_MODIFY:
                sel = self.svc.tables[self.dpid].select(fm, False)
                if len(sel) == 1:
                    rid = sel[0].rule_id
            if not rid:
                rid = store.rule_id(self.dpid, fm.table, fm.priority, fm.mkey)
            sent = of.flow_mod_with_instructions(msg, fm, of.add_rule_id(fm.instr, rid))
        self.seq += 1
        self.pending.append(_Pending(self.seq, xid, "flow", fm, msg, sent, rid))
        self.unbarriered = True
        return sent

    def _reid(self, table: IntendedTable) -> list:
        """A non-strict MODIFY gave several entries one ID: give each its own again with a
        MODIFY_STRICT of the proxy's (same instructions; cookie and counters kept). Only
        when nothing else is in flight, so that it cannot overtake a later FlowMod."""
        changes = []
        for key in self.reid:
            e = table.entries.get(key)
            if e is None:
                continue
            rid = self.svc.store.rule_id(self.dpid, e.table, e.priority, e.mkey)
            if rid == e.rule_id:
                continue
            e.rule_id = rid
            fm = of.flow_mod(
                self.own_xid(),
                e.table,
                of.FC_MODIFY_STRICT,
                e.priority,
                e.oxm,
                of.add_rule_id(e.instr, rid),
                flags=e.flags,
                idle=e.idle,
                hard=e.hard,
            )
            self.svc.store.flush()
            self.send_own(fm, None)
            self.svc.store.put(self.dpid, e)
            changes.append(EntryChange("modify", e, e))
        self.reid.clear()
        return changes

    # --- commit ------------------------------------------------------------------------------------
    def _commit(self, upto: int) -> None:
        svc = self.svc
        table = svc.tables.setdefault(self.dpid, IntendedTable())
        store = svc.store
        changes = []
        freeable: set = set()  # keys whose rule ID may have no use left
        xids = []
        while self.pending and self.pending[0].seq <= upto:
            p = self.pending.popleft()
            if p.rejected:
                if p.kind == "flow" and p.rule_id:
                    freeable.add((p.msg.table, p.msg.priority, p.msg.mkey))
                continue
            self.mods_committed += 1
            xids.append(p.xid)
            if p.kind == "flow":
                ch = table.apply(p.msg, p.rule_id)
                if p.rule_id and len(ch) > 1 and p.msg.command == of.FC_MODIFY:
                    self.reid.update(c.entry.key for c in ch)
            else:
                ch = svc.group_mod(self.dpid, p.msg, table)
            for c in ch:
                if c.kind == "delete":
                    store.delete(self.dpid, c.entry.key)
                    freeable.add(c.entry.key)
                else:
                    store.put(self.dpid, c.entry)
            changes.extend(ch)
        self._free_ids(table, freeable)
        if self.reid and not self.pending:
            changes.extend(self._reid(table))
        self._check_pending()
        svc.flush_soon()
        svc.feed.feed(self.dpid, changes, tuple(xids))
        if svc.hooks.on_commit is not None and changes:
            try:
                svc.hooks.on_commit(self.dpid, changes)
            except Exception:
                log.exception("on_commit callback failed")
