"""One switch connection and its upstream controller connections (a `Session`). Its
records and the narrow `Services` of the proxy it uses are in pazzd.proxy.parts; how it
writes the intended table, in pazzd.proxy.writes."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import ssl
import struct
import time

import ofwire as of
from ofwire import flow_monitor, message_types
from pazzd.proxy import roles
from pazzd.proxy.parts import (
    OwnRequest,
    Pending,
    Services,
    Upstream,
    UpstreamProtocol,
    abort,
    orig_xid,
)
from pazzd.proxy.writes import IntendedWrites

log = logging.getLogger("pazzd.proxy")
# Seconds of a controller's messages handled in one turn of the event loop (a burst
# judged by the intent guard takes about a millisecond per FlowMod).
SLICE = 0.05


class Session(IntendedWrites):
    """One switch connection and its upstream controller connections (`ups`, the default
    controller first; `up` and `up_ready` are the default one's)."""

    def __init__(self, services: Services, transport, listener: str = "tcp") -> None:
        self.svc = services
        self.sw = transport
        self.listener = listener
        self.started = time.monotonic()
        self.last_rx = self.started
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        ups = services.config.upstreams()
        self.ups = [Upstream(a, i == 0) for i, a in enumerate(ups)]
        # Several controllers: their xids are translated (roles.XidMap); with one, the
        # proxy relays its xids unchanged.
        self.xmap = roles.XidMap() if len(ups) > 1 else None
        self.generation = roles.Generation()
        self.switch_async = roles.DEFAULT_ASYNC
        self.buf_sw = bytearray()
        self.version: int | None = None
        self.hello_for_controller = b""
        self.dpid: int | None = None
        self.features: bytes | None = None
        self.own: dict[int, OwnRequest] = {}
        self.own_fire: collections.OrderedDict[int, str] = collections.OrderedDict()
        self.pending: collections.deque[Pending] = collections.deque()
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
    def up(self):
        return self.ups[0].transport

    @property
    def up_ready(self) -> bool:
        return self.ups[0].ready

    def up_paused(self) -> bool:
        """Is some controller's transport over its high-water mark (the proxy is then not
        reading from the switch)?"""
        return any(k != "switch" for k in self.paused)

    def _ctl(self, u: Upstream) -> str:
        """' NAME' of a controller in log lines, when there are several."""
        return f" {u.name}" if len(self.ups) > 1 else ""

    def _upstream(self, key: str) -> Upstream | None:
        return next((u for u in self.ups if u.key == key), None)

    @property
    def ids_on(self) -> bool:
        return self.svc.config.unique_ids and self.version == of.OFP13

    # --- own requests ------------------------------------------------------------------------
    def own_xid(self) -> int:
        return self.svc.next_xid()

    def send_own(self, data: bytes, req: OwnRequest | None) -> None:
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
            abort(self.sw)
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
        if self.up_paused():  # not reading from the switch: its silence is ours
            self.last_rx = now
        silent = now - self.last_rx
        if silent >= t:
            self.svc.counters.idle_drops += 1
            log.warning("disconnecting %r: silent for %.1f s (no echo reply)", self, silent)
            abort(self.sw)
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
            abort(self.sw)
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
            for u in self.ups:
                if u.transport is not None:
                    u.transport.pause_reading()
        elif self._full and n <= limit // 2:
            self._full = False
            if "switch" not in self.paused and not self.closed:
                for u in self.ups:
                    if u.transport is not None:
                        u.transport.resume_reading()

    # --- flow control ------------------------------------------------------------------------
    def _write_sw(self, data: bytes) -> None:
        self.sw.write(data)
        self._check_buffer("switch")

    def _check_buffer(self, who: str) -> None:
        if who == "switch":
            t = self.sw
        else:
            u = self._upstream(who)
            t = u.transport if u is not None else None
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
        others = [u.transport for u in self.ups] if who == "switch" else [self.sw]
        if paused:
            self.paused.setdefault(who, time.monotonic())
            for other in others:
                if other is not None:
                    other.pause_reading()
            if self._stall_handle is None:
                loop = asyncio.get_running_loop()
                self._stall_handle = loop.call_later(
                    self.svc.config.stall_timeout, self._stall_check
                )
        else:
            self.paused.pop(who, None)
            go = not (self._full if who == "switch" else self.up_paused())
            if go and not self.closed:
                for other in others:
                    if other is not None:
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
            abort(self.sw)
            self.switch_lost(None)
        elif (u := self._upstream(who)) is not None and u.transport is not None:
            log.warning(
                "disconnecting controller%s of %r: it stopped reading: %s", self._ctl(u), self, why
            )
            up = u.transport
            abort(up)
            self.upstream_lost(up, None, u)

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
        elif req.kind == "barrier" and t == message_types.BARRIER_REQ[self.version] + 1:
            del self.own[xid]
            self._commit_upto = req.seq  # after the relayed replies are written
            if self.xmap is not None:
                self.xmap.done_upto(req.xseq)
        elif req.kind == "groups" and t == of.OFPT_MULTIPART_REPLY:
            req.parts.extend(of.parse_group_desc_body(msg[16:]))
            if not struct.unpack_from("!H", msg, 10)[0] & of.OFPMPF_REPLY_MORE:
                del self.own[xid]
                if req.future is not None and not req.future.done():
                    req.future.set_result(req.parts)
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
        try:
            off = of.split_messages(buf, self._switch_msg)
        except of.ProtocolError as e:
            self._flush_up()
            self.fail_switch(str(e))
            return
        except Exception:
            log.exception("%r: internal error on a switch message", self)
            self._flush_up()
            self.fail_switch("internal error (see the traceback above)")
            return
        del buf[:off]
        self._flush_up()
        if self._commit_upto:
            upto, self._commit_upto = self._commit_upto, 0
            try:
                self._commit(upto)
            except Exception:  # a bug of ours must not take the switch session down
                log.exception("%r: committing accepted changes failed", self)

    def _flush_up(self) -> None:
        for u in self.ups:
            if u.out:
                data = b"".join(u.out)
                u.out.clear()
                if u.ready:
                    u.transport.write(data)
                    self._check_buffer(u.key)

    def _route(self, t: int, xid: int, msg: bytes) -> None:
        """Queue a switch message for the controllers it is for: an asynchronous one for
        those whose role and configuration ask for it, a reply for the one that asked
        (several controllers), anything else for the default controller."""
        if t in roles.ASYNC_TYPES:
            v13 = self.version == of.OFP13
            for u in self.ups:
                if u.ready and (not v13 or roles.wants(u.role, u.async_cfg, t, msg)):
                    u.out.append(msg)
            return
        if self.xmap is not None:
            more = t == message_types.STATS_REPLY[self.version] and msg[11] & of.OFPMPF_REPLY_MORE
            barrier = t == message_types.BARRIER_REQ[self.version] + 1
            hit = self.xmap.back(xid, not more, barrier)
            if hit is not None:
                u, cxid = hit
                if u.ready:
                    u.out.append(roles.with_xid(msg, cxid))
                return
        u = self.ups[0]
        if u.ready:
            u.out.append(msg)

    def _switch_msg(self, msg: bytes) -> None:
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
                OwnRequest("features"),
            )
            return
        message_types.check(self.version, ver, t, ln)
        if t in message_types.REPLY_TYPES[self.version] and (
            xid in self.own or xid in self.own_fire
        ):
            self._own_reply(t, xid, msg)
            return
        v13 = self.version == of.OFP13
        if t == of.OFPT_ERROR:
            msg = self._error(msg, xid)
        elif t == of.OFPT_ECHO_REQUEST and (not self.up_ready or self.xmap is not None):
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
            elif self.ids_on and (kind := flow_monitor.monitor_kind(msg)) is not None:
                msg = flow_monitor.strip_reply(msg, kind, self.own_fire)
                if msg is None:
                    return
        elif t == of.OFPT_PACKET_IN:
            self.svc.hooks.call("packet_in", self.dpid, msg)
        elif t == of.OFPT_PORT_STATUS:
            reason, port, up = of.parse_port_status(msg)
            self.svc.feed.call(self.dpid, "port_status", self.dpid, port, up)
        elif t == of.OFPT_FLOW_REMOVED:
            self._flow_removed(of.parse_flow_removed(msg))
        self._route(t, xid, msg)

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

    def fail_switch(self, reason: str) -> None:
        log.warning("disconnecting %r: protocol error: %s", self, reason)
        self.sw.close()
        self.switch_lost(None)

    def switch_lost(self, exc) -> None:
        if self.closed:
            return
        self.closed = True
        if self.dpid is None:  # never said who it is: a scan, a health check, a loop
            self.svc.counters.closed_before_handshake += 1
            self.svc.log_limited(
                "early",
                logging.INFO,
                "connections closed before the OpenFlow handshake (the last from %s)",
                self.peer,
            )
        else:
            log.info("%r disconnected%s", self, f": {exc}" if exc else "")
        self.svc.detach(self)
        for h in (self._timer, self._barrier_handle):
            if h is not None:
                h.cancel()
        self._timer = self._barrier_handle = None
        if self._stall_handle is not None:
            self._stall_handle.cancel()
            self._stall_handle = None
        stuck = set(self.paused)
        self.paused.clear()
        if self.upstream_task is not None:
            self.upstream_task.cancel()
        for u in self.ups:
            if u.transport is not None:
                abort(u.transport) if u.key in stuck else u.transport.close()
        for req in self.own.values():
            if req.future is not None and not req.future.done():
                req.future.set_exception(ConnectionError(f"{self!r} disconnected"))
        self.own.clear()
        self.pending.clear()

    # --- upstream ------------------------------------------------------------------------------
    async def _upstream_loop(self) -> None:
        await asyncio.gather(*(self._connect_loop(u) for u in self.ups))

    async def _connect_loop(self, u: Upstream) -> None:
        cfg, a = self.svc.config, u.addr
        delay = cfg.reconnect_min
        loop = asyncio.get_running_loop()
        while not self.closed:
            if u.transport is None:
                try:
                    await loop.create_connection(
                        lambda: UpstreamProtocol(self, u),
                        a.host,
                        a.port,
                        ssl=a.ssl,
                        server_hostname=(a.server_hostname or a.host) if a.ssl else None,
                    )
                    delay = cfg.reconnect_min
                except (OSError, ssl.SSLError) as e:
                    log.info(
                        "%r: controller%s %s:%s unreachable (%s); retry in %.1fs",
                        self,
                        self._ctl(u),
                        a.host,
                        a.port,
                        e,
                        delay,
                    )
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, cfg.reconnect_max)
                    continue
            u.gone = asyncio.Event()
            await u.gone.wait()
            await asyncio.sleep(delay)
            delay = min(delay * 2, cfg.reconnect_max)

    def upstream_made(self, transport, u: Upstream | None = None) -> None:
        u = u or self.ups[0]
        if self.closed:
            transport.close()
            return
        u.transport = transport
        u.ready = False
        u.buf = bytearray()
        u.out.clear()
        u.role, u.async_cfg = roles.EQUAL, roles.DEFAULT_ASYNC  # a new connection starts so
        if "switch" in self.paused or self._full:  # the switch is still behind
            transport.pause_reading()
        transport.write(self.hello_for_controller)

    def upstream_lost(self, transport, exc, u: Upstream | None = None) -> None:
        u = u or self.ups[0]
        if transport is not u.transport:
            return
        u.transport = None
        u.ready = False
        if u.key in self.paused:
            self.peer_paused(u.key, False)  # reading from the switch resumes
        if not self.closed:
            log.info(
                "%r: controller%s connection lost%s", self, self._ctl(u), f": {exc}" if exc else ""
            )
        if u.gone is not None:
            u.gone.set()

    def fail_controller(self, reason: str, u: Upstream | None = None) -> None:
        u = u or self.ups[0]
        log.warning(
            "disconnecting controller%s of %r: protocol error: %s", self._ctl(u), self, reason
        )
        if u.transport is not None:
            u.transport.close()
            self.upstream_lost(u.transport, None, u)

    # --- from the controller ---------------------------------------------------------------------
    def from_controller(self, data: bytes, u: Upstream | None = None) -> None:
        """Handle the controller's complete messages, for at most SLICE seconds: the rest
        waits for the next turn of the event loop (reading paused meanwhile), so that a
        burst cannot hold the API, the sFlow socket or the signals."""
        u = u or self.ups[0]
        buf = u.buf
        buf += data
        out: list[bytes] = []
        end = time.perf_counter() + SLICE
        try:
            with self.svc.hooks.batch():
                off = of.split_messages(
                    buf,
                    lambda msg: self._controller_msg(msg, out, u),
                    stop=lambda: time.perf_counter() > end,
                )
        except of.ProtocolError as e:
            self._flush_down(out)
            self.fail_controller(str(e), u)
            return
        except Exception:
            log.exception("%r: internal error on a message of controller %s", self, u.name)
            self._flush_down(out)
            self.fail_controller("internal error (see the traceback above)", u)
            return
        del buf[:off]
        self._flush_down(out)
        self._check_pending()
        if of.complete_message(buf) and not u.sliced and not self.closed:
            u.sliced = True
            u.transport.pause_reading()
            asyncio.get_running_loop().call_soon(self._next_slice, u, u.transport)

    def _next_slice(self, u: Upstream, transport) -> None:
        u.sliced = False
        if self.closed or u.transport is not transport:
            return
        self.from_controller(b"", u)
        if not u.sliced and not self._full and "switch" not in self.paused:
            transport.resume_reading()

    def _flush_down(self, out: list[bytes]) -> None:
        if self.unbarriered:
            self.unbarriered = False
            xid = self.own_xid()
            xseq = self.xmap.seq if self.xmap is not None else 0
            self.own[xid] = OwnRequest("barrier", seq=self.seq, sent=time.monotonic(), xseq=xseq)
            self._barrier_sent()
            out.append(of.message(self.version, message_types.BARRIER_REQ[self.version], xid))
        if out and not self.closed:
            self.svc.store.flush()  # rule IDs are on disk before the switch sees them
            self._write_sw(b"".join(out))

    def _controller_msg(self, msg: bytes, out: list[bytes], u: Upstream) -> None:
        ver, t, ln, xid = of.HDR.unpack_from(msg)
        if not u.ready:
            if t != of.OFPT_HELLO:
                raise of.ProtocolError(f"first message is type {t}, not HELLO")
            if self.version not in of.hello_versions(msg):
                raise of.ProtocolError(
                    f"controller does not offer OpenFlow 0x{self.version:02x}, which the "
                    "switch connection uses"
                )
            u.ready = True
            log.info("%r: controller%s session up", self, self._ctl(u))
            return
        if ver == self.version and t > message_types.MAX_TYPE[ver]:
            # As a switch does: an error for a type it does not know, the session kept.
            self._refuse(msg, of.OFPET_BAD_REQUEST, of.OFPBRC_BAD_TYPE, "an unknown type", u)
            return
        message_types.check(self.version, ver, t, ln)
        if t == of.OFPT_HELLO:
            raise of.ProtocolError("second HELLO")
        orig = msg
        if ver == of.OFP13:
            if t in roles.ANSWERED:  # the switch only sees the proxy: answered here
                self._answer(t, msg, u)
                return
            if u.role == roles.SLAVE and t in roles.SLAVE_REFUSED:
                if u.transport is not None:  # what a switch answers a slave: no warning
                    u.transport.write(roles.is_slave_error(msg))
                return
        if self.xmap is not None:
            xid = self.xmap.out(u, xid)
            msg = roles.with_xid(msg, xid)
        if ver == of.OFP13:
            if t == of.OFPT_FLOW_MOD:
                msg = self._flow_mod(msg, xid, orig, u)
                if msg is None:  # refused with an OFPT_ERROR
                    return
            elif t == of.OFPT_PACKET_OUT and self.svc.hooks.release:
                self.svc.hooks.call("release", self.dpid, of.packet_out_buffer(msg))
            elif t == of.OFPT_GROUP_MOD:
                gm = of.parse_group_mod(msg)
                if gm.command in (of.GC_ADD, of.GC_MODIFY) and of.buckets_have_verify_action(
                    gm.buckets
                ):
                    self._refuse(orig, of.OFPET_BAD_ACTION, of.OFPBAC_EPERM, "a Verify action", u)
                    return
                self.seq += 1
                p = Pending(self.seq, xid, "group", gm, orig, msg, conn=u.name, cxid=orig_xid(orig))
                self.pending.append(p)
                self.unbarriered = True
        out.append(msg)

    def _answer(self, t: int, msg: bytes, u: Upstream) -> None:
        """ROLE_REQUEST, GET_ASYNC_REQUEST and SET_ASYNC of a controller (pazzd.proxy.roles)."""
        xid = of.header(msg)[3]
        if t == roles.of13.OFPT_ROLE_REQUEST:
            role, reply = roles.role_request(msg, u.role, self.generation)
            if role == roles.MASTER and u.role != roles.MASTER:
                for o in self.ups:  # at most one master: the others become slaves
                    if o is not u and o.role == roles.MASTER:
                        o.role = roles.SLAVE
            if role != u.role:
                log.info(
                    "%r: controller %s is %s now", self, u.name, roles.ROLE_NAMES.get(role, role)
                )
            u.role = role
        elif t == roles.of13.OFPT_GET_ASYNC_REQUEST:
            reply = roles.async_reply(xid, u.async_cfg)
        else:  # SET_ASYNC: no reply; the switch is asked for what any controller wants
            u.async_cfg = roles.parse_async(msg)
            want = roles.switch_async(o.async_cfg for o in self.ups)
            if want != self.switch_async:
                self.switch_async = want
                self.send_own(roles.set_async(self.own_xid(), want), None)
            return
        if u.transport is not None:
            u.transport.write(reply)

    def _refuse(self, msg: bytes, etype: int, code: int, why: str, u: Upstream) -> None:
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
        if u.transport is not None:
            xid = of.header(msg)[3]
            u.transport.write(of.error_msg(self.version, xid, etype, code, msg))
