"""The OpenFlow proxy: switches connect here, each gets its own upstream controller session.

See docs/proxy.md for the behaviour and the API. One asyncio event loop runs everything;
a `Session` (pazzd.proxy.session) is one switch connection plus its upstream connection.
This module holds the proxy's lifecycle, its connections and its own requests; the
message checks are in ofwire.message_types, the model feed in .feed, the audit in .audit.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import itertools
import logging
import resource
import ssl
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import ofwire as of
from cpc.rules import Group, ModelError
from ofwire import message_types
from pazzd.addresses import is_loopback
from pazzd.options import RESTART, option
from pazzd.proxy import roles
from pazzd.proxy.audit import AuditFinding, Auditor
from pazzd.proxy.feed import ModelFeed
from pazzd.proxy.parts import Counters, Hooks, OwnRequest, Services, abort
from pazzd.proxy.session import Session
from pazzd.proxy.store import Entry, Store
from pazzd.proxy.table import EntryChange, GroupChange, IntendedTable

log = logging.getLogger("pazzd.proxy")


@dataclass
class Controller:
    """One upstream controller; every switch gets a connection to each."""

    host: str
    port: int
    name: str = ""  # default: HOST:PORT
    ssl: ssl.SSLContext | None = None
    server_hostname: str | None = None
    tls: dict | None = None  # the config's upstream_tls for it (ssl is built from it)

    def __post_init__(self) -> None:
        self.name = self.name or f"{self.host}:{self.port}"


@dataclass
class ProxyConfig:
    """The controller section of pazzd.yaml, and what the proxy runs with. ssl contexts:
    server side for switches, client side for the controller (None = plain TCP), built
    at start from tls and upstream_tls (pazzd.wiring.proxy_config)."""

    enabled: bool = option(False, restart=True)  # pazzd runs the proxy
    listen_host: str = field(default="0.0.0.0", metadata=RESTART)
    listen_port: int = field(default=6653, metadata=RESTART)
    listen_unix: str | None = None  # also accept switches on this unix socket (ovs: unix:PATH)
    controller_host: str = field(default="127.0.0.1", metadata=RESTART)
    controller_port: int = field(default=6633, metadata=RESTART)
    db_path: str | None = None  # None: in memory (nothing survives a restart)
    unique_ids: bool = True
    # seconds between audits of every switch (0 = never; in the config at most a day)
    audit_interval: float = option(30.0, lo=0.0, hi=86400.0)
    audit_delay: float = option(2.0, lo=0.0, hi=3600.0)  # after a switch connects; < 0 = none
    # TLS: {"cert", "key", "ca"} towards the switches (ca: require switch certificates
    # signed by it); {"ca", "cert", "key", "server_hostname"} towards the controller.
    tls: dict | None = None
    upstream_tls: dict | None = None
    switch_ssl: ssl.SSLContext | None = None
    controller_ssl: ssl.SSLContext | None = None
    controller_server_hostname: str | None = None
    reconnect_min: float = 0.1
    reconnect_max: float = 5.0
    request_timeout: float = 10.0
    # Flow control (docs/reliability.md): reading from one side pauses while the other
    # side's transport holds more than write_buffer_high bytes; a peer whose transport
    # holds more than max_write_buffer, or that stays paused for stall_timeout, is dropped.
    write_buffer_high: int = 1 << 20
    max_write_buffer: int = 8 << 20
    stall_timeout: float = option(30.0, lo=0.1, hi=86400.0)
    # A switch has handshake_timeout to say HELLO and answer FEATURES_REQUEST; one silent
    # for idle_timeout / 2 gets an ECHO_REQUEST, one silent for idle_timeout is dropped.
    handshake_timeout: float = option(10.0, lo=0.1, hi=3600.0)
    idle_timeout: float = option(60.0, lo=0.0, hi=86400.0)
    # Switch connections per listener (each also holds an upstream connection). At the
    # cap, the oldest connection still in its handshake makes room, else the new one is
    # refused. Clamped to what RLIMIT_NOFILE allows.
    max_connections: int = option(4096, lo=1, hi=1 << 20)
    # A switch that does not answer the proxy's barrier within barrier_timeout is dropped;
    # with max_pending FlowMods/GroupMods awaiting a barrier, reading from the controller
    # pauses until the switch catches up.
    barrier_timeout: float = 30.0
    # A connection claiming a connected dpid waits this long for the first connection to
    # answer an echo request: answered, the newcomer is refused; silent, it is replaced.
    takeover_timeout: float = 2.0
    max_pending: int = 10000
    # A FlowMod whose actions name one group twice (it crashes Open vSwitch 3.1.0 when the
    # group is deleted, docs/agents.md): "refuse" answers it with an OFPT_ERROR, "warn"
    # forwards it and logs a warning.
    group_twice: str = "refuse"
    # More controllers: with any, every switch gets a connection to each (the first,
    # controller_host:controller_port, is the default; docs/proxy.md, "Several controllers").
    controllers: list[Controller] = field(default_factory=list, metadata=RESTART)
    # the default controller's name (default: HOST:PORT)
    controller_name: str = field(default="", metadata=RESTART)

    def upstreams(self) -> list[Controller]:
        """The default controller, then the others."""
        first = Controller(
            self.controller_host,
            self.controller_port,
            self.controller_name,
            self.controller_ssl,
            self.controller_server_hostname,
        )
        return [first, *self.controllers]


class _SwitchProtocol(asyncio.Protocol):
    def __init__(self, proxy: Proxy, listener: str = "tcp") -> None:
        self.proxy = proxy
        self.listener = listener
        self.session: Session | None = None

    def connection_made(self, transport) -> None:
        if not self.proxy._admit(self.listener):
            abort(transport)
            return
        transport.set_write_buffer_limits(high=self.proxy.config.write_buffer_high)
        self.session = Session(self.proxy.services, transport, self.listener)

    def data_received(self, data: bytes) -> None:
        if self.session is not None:
            self.session.from_switch(data)

    def connection_lost(self, exc) -> None:
        if self.session is not None:
            self.session.switch_lost(exc)

    def pause_writing(self) -> None:
        if self.session is not None:
            self.session.peer_paused("switch", True)

    def resume_writing(self) -> None:
        if self.session is not None:
            self.session.peer_paused("switch", False)


def tls_contexts(
    switch_tls: dict | None, controller_tls: dict | None
) -> tuple[ssl.SSLContext | None, ssl.SSLContext | None]:
    """(server context for switches, client context for the controller) from the config's
    controller.tls / controller.upstream_tls; raises ssl.SSLError or OSError."""
    server = client = None
    if switch_tls:
        server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        server.load_cert_chain(switch_tls["cert"], switch_tls["key"])
        if switch_tls.get("ca"):
            server.load_verify_locations(switch_tls["ca"])
            server.verify_mode = ssl.CERT_REQUIRED
    if controller_tls:
        client = ssl.create_default_context(cafile=controller_tls["ca"])
        if controller_tls.get("cert"):
            client.load_cert_chain(controller_tls["cert"], controller_tls["key"])
    return server, client


def _part(part: str, name: str) -> property:
    """An attribute of the proxy that lives in one of its parts."""
    return property(
        lambda self: getattr(getattr(self, part), name),
        lambda self, v: setattr(getattr(self, part), name, v),
    )


class Proxy:
    """The OpenFlow proxy. `await start()`, then switches connect to config.listen_port.

    model: a cpc.model.Model to keep in step (or None). on_finding(AuditFinding) is called
    for every new audit finding; on_audit(dpid, findings) after every completed audit of a
    switch with all its current findings (before the new ones are logged, so that a fault
    store can commit them first); on_switch(dpid, connected) when a switch comes or goes.
    """

    def __init__(
        self,
        config: ProxyConfig | None = None,
        model=None,
        on_finding: Callable[[AuditFinding], None] | None = None,
        on_switch: Callable[[int, bool], None] | None = None,
        on_audit: Callable[[int, list[AuditFinding]], None] | None = None,
    ) -> None:
        self.config = config or ProxyConfig()
        self.on_switch = on_switch
        # pazzd's subscribers: proxy.hooks.commit.append(fn) etc. (session.Hooks).
        self.hooks = Hooks()
        self.counters = Counters()
        # feed.on_model_update(seconds): see ModelFeed (also an attribute).
        self.feed = ModelFeed(model, self._log_limited)
        self.auditor = Auditor(self._dump, self.barrier, self.config, on_finding, on_audit)
        self.store = Store(self.config.db_path)
        self.tables: dict[int, IntendedTable] = collections.defaultdict(IntendedTable)
        self.groups: dict[int, dict[int, tuple[int, bytes]]] = collections.defaultdict(dict)
        self.switches: dict[int, Session] = {}
        self._sessions: set[Session] = set()
        self._xids = itertools.cycle(range(0xFFF00000, 0xFFFFFFFF))
        self._server = None
        self._unix_server = None
        self._flush_handle = None
        self._tasks: set[asyncio.Task] = set()
        self._audit_task: asyncio.Task | None = None
        self._stopping = False
        self._listener_sessions: dict[str, set[Session]] = collections.defaultdict(set)
        self._log_last: dict[str, tuple[float, int]] = {}
        self.services = Services(
            config=self.config,
            store=self.store,
            tables=self.tables,
            feed=self.feed,
            hooks=self.hooks,
            counters=self.counters,
            next_xid=self._next_xid,
            log_limited=self._log_limited,
            attach=self._attach,
            detach=self._unregister,
            claim=self._claim,
            register=self._register,
            group_mod=self._group_mod,
            removed=lambda dpid, key: self.auditor.missing_once[dpid].add(key),
            flush_soon=self._flush_soon,
        )
        self._load()

    model = _part("feed", "model")
    on_model_update = _part("feed", "on_model_update")
    agent_warnings = _part("feed", "agent_warnings")
    on_finding = _part("auditor", "on_finding")
    on_audit = _part("auditor", "on_audit")
    findings = _part("auditor", "findings")
    stuck_drops = _part("counters", "stuck_drops")
    handshake_timeouts = _part("counters", "handshake_timeouts")
    idle_drops = _part("counters", "idle_drops")
    refused = _part("counters", "refused")
    barrier_drops = _part("counters", "barrier_drops")
    refused_mods = _part("counters", "refused_mods")
    takeovers_refused = _part("counters", "takeovers_refused")
    unexplained_removals = _part("counters", "unexplained_removals")
    ignored_removals = _part("counters", "ignored_removals")
    closed_before_handshake = _part("counters", "closed_before_handshake")

    # --- lifecycle -------------------------------------------------------------------------------
    def _load(self) -> None:
        flows, groups = self.store.load()
        for dpid, entries in flows.items():
            self.tables[dpid].entries.update(entries)
        for dpid, gs in groups.items():
            self.groups[dpid].update(gs)
        self.feed.load(flows, groups, self.store.path)

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            lambda: _SwitchProtocol(self, "tcp"),
            self.config.listen_host,
            self.config.listen_port,
            ssl=self.config.switch_ssl,
            reuse_address=True,
        )
        if self.config.listen_unix:
            self._unix_server = await loop.create_unix_server(
                lambda: _SwitchProtocol(self, "unix"),
                self.config.listen_unix,
                ssl=self.config.switch_ssl,
            )
        if self.config.audit_interval > 0:
            self._audit_task = self._spawn(self._audit_loop())
        if self.config.switch_ssl is None and not is_loopback(self.config.listen_host):
            log.warning(
                "switches connect over plain TCP on %s:%d: any host that reaches it can claim "
                "a switch's dpid once the switch is gone; controller.tls with a ca (switch "
                "certificates) stops that (docs/proxy.md)",
                self.config.listen_host,
                self.port,
            )
        log.info(
            "OpenFlow proxy listening on %s:%d, %s %s",
            self.config.listen_host,
            self.port,
            "controllers" if self.config.controllers else "controller",
            ", ".join(f"{c.name} ({c.host}:{c.port})" for c in self.config.upstreams()),
        )

    @property
    def port(self) -> int:
        return self._server.sockets[0].getsockname()[1] if self._server else 0

    async def stop(self) -> None:
        if self._flush_handle:
            self._flush_handle.cancel()
            self._flush_handle = None
        if self._server is not None:
            self._server.close()
        if self._unix_server is not None:
            self._unix_server.close()
        # Tasks first, while what they wait for is still pending: Python 3.11's wait_for
        # drops a cancellation when its future completes at the same time (the session
        # closing fails a flow dump's future), and an audit loop would then go on.
        self._stopping = True
        tasks = list(self._tasks)
        for t in tasks:
            t.cancel()
        for s in list(self._sessions):
            s.sw.close()
            s.switch_lost(None)
        if tasks:
            await asyncio.wait(tasks, timeout=2)
        if self._server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 2)
        self.store.close()

    def _spawn(self, coro) -> asyncio.Task:
        t = asyncio.ensure_future(coro)
        self._tasks.add(t)
        t.add_done_callback(self._tasks.discard)
        return t

    def _flush_soon(self) -> None:
        """Write the intended state to SQLite within 20 ms, in one transaction per burst."""
        if self._flush_handle:
            return
        try:
            self._flush_handle = asyncio.get_running_loop().call_later(0.02, self._flush_now)
        except RuntimeError:  # no loop running (tests driving a Session directly)
            self.store.flush()

    def _flush_now(self) -> None:
        self._flush_handle = None
        self.store.flush()

    def _next_xid(self) -> int:
        return next(self._xids)

    @property
    def max_connections(self) -> int:
        """The per-listener cap: the configured one, within what the descriptor limit
        allows (each switch connection takes two descriptors)."""
        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        room = (soft - 128) // 2 if soft != resource.RLIM_INFINITY else self.config.max_connections
        return max(1, min(self.config.max_connections, room))

    def _admit(self, listener: str) -> bool:
        """Room for one more switch connection on this listener?"""
        live = self._listener_sessions[listener]
        if len(live) < self.max_connections:
            return True
        waiting = [s for s in live if s.dpid is None]
        if waiting:  # the oldest connection still in its handshake makes room
            old = min(waiting, key=lambda s: s.started)
            self.handshake_timeouts += 1
            abort(old.sw)
            old.switch_lost(None)
            return True
        self.refused += 1
        self._log_limited(
            "cap-" + listener,
            logging.WARNING,
            "refusing switch connections on %s: %d connected (the cap)",
            listener,
            len(live),
        )
        return False

    def _log_limited(self, key: str, level: int, fmt: str, *args, every: float = 60.0) -> None:
        """Log once per `every` seconds per cause; says how many were not logged."""
        now = time.monotonic()
        last, n = self._log_last.get(key, (-1e18, 0))
        if now - last < every:
            self._log_last[key] = (last, n + 1)
            return
        self._log_last[key] = (now, 0)
        if n:
            fmt += " (%d more like it not logged)"
            args = (*args, n)
        log.log(level, fmt, *args)

    async def _contest(self, old: Session, new: Session) -> None:
        """A second connection claims a connected dpid. The first one gets an echo
        request: if it answers within takeover_timeout (or the proxy is not reading from
        it, flow control), the newcomer is refused; else the newcomer replaces it."""
        t0 = time.monotonic()
        with contextlib.suppress(Exception):
            old.send_own(of.message(old.version, of.OFPT_ECHO_REQUEST, self._next_xid()), None)
        end = t0 + self.config.takeover_timeout
        while time.monotonic() < end and not (old.closed or new.closed) and old.last_rx <= t0:
            await asyncio.sleep(0.02)
        if new.closed:
            return
        if not old.closed and (old.last_rx > t0 or old.up_paused()):
            self.takeovers_refused += 1
            self._log_limited(
                "takeover",
                logging.WARNING,
                "refusing %r: dpid %#x is connected and answering at %s",
                new,
                new.dpid,
                old.peer,
            )
            abort(new.sw)
            new.switch_lost(None)
            return
        new._go_live()

    def _attach(self, s: Session) -> None:
        self._sessions.add(s)
        self._listener_sessions[s.listener].add(s)

    def _claim(self, s: Session) -> None:
        old = self.switches.get(s.dpid)
        if old is not None and old is not s and not old.closed:
            # Any peer can claim a dpid: the live switch is not dropped for it.
            self._spawn(self._contest(old, s))
            return
        s._go_live()

    def _register(self, s: Session) -> None:
        old = self.switches.get(s.dpid)
        if old is not None and old is not s:
            log.info(
                "%r replaces an older connection of the same dpid (it did not answer "
                "an echo request)",
                s,
            )
            old.sw.close()
            old.switch_lost(None)
        self.switches[s.dpid] = s
        if self.on_switch:
            self.on_switch(s.dpid, True)
        if s.version == of.OFP13 and self.config.audit_delay >= 0:
            self._spawn(self._audit_later(s, self.config.audit_delay))

    def _unregister(self, s: Session) -> None:
        self._sessions.discard(s)
        self._listener_sessions[s.listener].discard(s)
        if s.dpid is not None and self.switches.get(s.dpid) is s:
            del self.switches[s.dpid]
            if self.on_switch:
                self.on_switch(s.dpid, False)

    # --- intended groups ---------------------------------------------------------------------------
    def _group_mod(self, dpid: int, gm: of.RawGroupMod, table: IntendedTable) -> list[EntryChange]:
        groups = self.groups[dpid]
        changes: list[EntryChange] = []
        if gm.command in (of.GC_ADD, of.GC_MODIFY):
            groups[gm.group_id] = (gm.type, gm.buckets)
            self.store.put_group(dpid, gm.group_id, gm.type, gm.buckets)
            try:
                g = of.group_to_cpc(dpid, gm.type, gm.group_id, gm.buckets)
            except (ModelError, of.ProtocolError, struct.error) as e:
                g = None
                log.warning("dpid %#x: group %d not modelled: %s", dpid, gm.group_id, e)
            self.feed.feed(dpid, [GroupChange(gm.group_id, g)])
        elif gm.command == of.GC_DELETE:
            gids = list(groups) if gm.group_id == of.OFPG_ALL else [gm.group_id]
            for gid in gids:
                if groups.pop(gid, None) is None:
                    continue
                self.store.delete_group(dpid, gid)
                self.feed.feed(dpid, [GroupChange(gid, None)])
                # Deleting a group deletes the flow entries that use it (OpenFlow 1.3 6.5).
                for e in list(table.entries.values()):
                    if gid in of.action_targets(e.instr)[1]:
                        table.remove(e.key)
                        changes.append(EntryChange("delete", e))
        return changes

    # --- own traffic ---------------------------------------------------------------------------------
    def _session(self, dpid: int) -> Session:
        s = self.switches.get(dpid)
        if s is None or s.closed:
            raise KeyError(f"switch {dpid:#x} is not connected")
        return s

    async def send_packet_out(
        self, dpid: int, in_port: int, data: bytes, actions: bytes | list[int] | None = None
    ) -> None:
        """Send a packet into switch dpid as if it arrived on in_port. actions: None sends it
        through the flow tables (output:TABLE); a list of ints outputs to those ports; bytes
        are raw OpenFlow 1.3 actions."""
        s = self._session(dpid)
        if s.version != of.OFP13:
            raise RuntimeError("packet-out needs OpenFlow 1.3")
        if isinstance(actions, list):
            actions = b"".join(of.output_action(p, 0) for p in actions)
        s.send_own(of.packet_out(self._next_xid(), in_port, data, actions), None)

    async def dump_flows(self, dpid: int, table: int = of.OFPTT_ALL) -> list[of.FlowStat]:
        """The switch's flow table (flow-stats), rule IDs taken out into FlowStat.rule_id.
        FlowStat.entry(dpid) gives the model's FlowEntry."""
        stats, _ = await self._dump(dpid, table)
        return stats

    async def dump_groups(self, dpid: int) -> list[Group]:
        """The switch's groups (group-desc) as the model's Groups; one the model cannot
        hold (a type it does not model) is left out with a warning."""
        s = self._session(dpid)
        if s.version != of.OFP13:
            raise RuntimeError("group dumps need OpenFlow 1.3")
        fut = asyncio.get_running_loop().create_future()
        xid = self._next_xid()
        s.send_own(of.group_desc_request(xid), OwnRequest("groups", fut))
        try:
            descs = await asyncio.wait_for(fut, self.config.request_timeout)
        finally:
            s.forget(xid)
        out = []
        for gtype, gid, buckets in descs:
            try:
                out.append(of.group_to_cpc(dpid, gtype, gid, buckets))
            except ModelError as e:
                log.warning("dpid %d: group %d not modelled: %s", dpid, gid, e)
        return out

    async def _dump(self, dpid: int, table: int = of.OFPTT_ALL):
        s = self._session(dpid)
        if s.version != of.OFP13:
            raise RuntimeError("flow dumps need OpenFlow 1.3")
        fut = asyncio.get_running_loop().create_future()
        xid = self._next_xid()
        s.send_own(of.flow_stats_request(xid, table), OwnRequest("flows", fut))
        try:
            return await asyncio.wait_for(fut, self.config.request_timeout)
        finally:
            s.forget(xid)  # a reply that never came leaves nothing behind

    async def barrier(self, dpid: int) -> None:
        """Wait until the switch has processed everything sent to it so far."""
        s = self._session(dpid)
        fut = asyncio.get_running_loop().create_future()
        xid = self._next_xid()
        s.send_own(
            of.message(s.version, message_types.BARRIER_REQ[s.version], xid), OwnRequest("x", fut)
        )
        try:
            await asyncio.wait_for(fut, self.config.request_timeout)
        finally:
            s.forget(xid)

    # --- audit ---------------------------------------------------------------------------------------
    async def _audit_later(self, s: Session, delay: float) -> None:
        await asyncio.sleep(delay)
        if not s.closed:
            with contextlib.suppress(Exception):
                await self.audit(s.dpid)

    def set_audit(self, interval: float, delay: float) -> None:
        """Change the audit period (0 = never) and the first-audit delay of new connections
        live (config reload). A new period starts now, not at the end of the old one."""
        self.config.audit_interval, self.config.audit_delay = interval, delay
        if self._audit_task is not None:
            self._audit_task.cancel()  # an audit in flight just ends; its reply is dropped
        self._audit_task = self._spawn(self._audit_loop()) if interval > 0 else None

    async def _audit_loop(self) -> None:
        while not self._stopping:
            await asyncio.sleep(self.config.audit_interval)
            for dpid, s in list(self.switches.items()):
                if s.version != of.OFP13 or self._stopping:
                    continue
                try:
                    await self.audit(dpid)
                except (KeyError, ConnectionError, TimeoutError, RuntimeError) as e:
                    log.info("audit of dpid %#x skipped: %s", dpid, e)

    async def audit(self, dpid: int) -> list[AuditFinding]:
        """Compare the switch's table with the intended one now (see Auditor.audit)."""
        return await self.auditor.audit(dpid)

    def intended(self, dpid: int) -> list[Entry]:
        return list(self.tables[dpid].entries.values())

    def pending_flowmods(self) -> list:
        """[(dpid, RawFlowMod)] sent to the switches and not committed yet, in the order
        each session sent them (the guard judges a new FlowMod after them)."""
        return [
            (s.dpid, p.msg)
            for s in self.switches.values()
            for p in s.pending
            if p.kind == "flow" and not p.rejected
        ]

    @property
    def controller_connected(self) -> bool:
        """True when at least one switch session has its upstream controller connection up."""
        return any(u.transport is not None for s in self._sessions for u in s.ups)

    def controllers(self) -> dict[str, dict]:
        """Per controller (by name): on how many switches its connection is up, and its
        roles there."""
        out = {c.name: {"switches": 0, "roles": {}} for c in self.config.upstreams()}
        for s in self.switches.values():
            for u in s.ups:
                if u.ready and u.name in out:
                    o = out[u.name]
                    o["switches"] += 1
                    r = roles.ROLE_NAMES[u.role]
                    o["roles"][r] = o["roles"].get(r, 0) + 1
        return out

    def drops(self) -> dict[str, int]:
        """Connections dropped or refused to stay bounded, by reason."""
        return {
            "stalled": self.stuck_drops,
            "handshake": self.handshake_timeouts,
            "idle": self.idle_drops,
            "refused": self.refused,
            "barrier": self.barrier_drops,
            "takeover": self.takeovers_refused,
        }

    def ignored(self) -> dict[str, int]:
        """What a peer sent that moved nothing: FLOW_REMOVEDs that do not fit the intended
        entry, connections closed before the OpenFlow handshake."""
        return {
            "flow_removed": self.ignored_removals,
            "closed_before_handshake": self.closed_before_handshake,
        }

    def stats(self) -> dict:
        return {
            "switches": len(self.switches),
            "intended_entries": sum(len(t.entries) for t in self.tables.values()),
            "findings": len(self.findings),
            "time": time.time(),
        }
