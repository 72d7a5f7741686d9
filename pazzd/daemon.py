"""pazzd: one process that wires the model, the tester, the sFlow collector, the fuzzer,
the OpenFlow proxy (optional), the metrics endpoint and the local API.

    pazzd --config /etc/pazz/pazzd.yaml

Start-up: load and validate the config (exit 2 on an error naming file, line and key),
build the model (from the rule file, or empty and fed by the proxy), read the sFlow
ifIndex map from OVSDB, start the collector, the API socket and the metrics endpoint,
then tell systemd READY=1. SIGHUP reloads the config: on an error the last good one stays
in force, the error is logged and pazz_config_load_error is 1. SIGTERM/SIGINT stop.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ctypes
import fcntl
import grp
import logging
import os
import signal
import socket
import sqlite3
import ssl
import subprocess
import sys
import threading
import time
from pathlib import Path

from cpc.intents import IntentChecker
from cpc.interference import Apps, InterferenceChecker
from cpc.model import Model
from cpc.ofctl import format_match, parse_flow
from cpc.results import RuleRef
from cpc.rules import ModelError
from cpc.topology import TopologyError
from pazzapi import ApiError
from tester.collector import SflowCollector
from tester.engine import FaultEvent, LocalizationRequest, Tester
from tester.ifmap import IfMap
from tester.store import FaultStore
from tester.timers import BlackholeMonitor, TransientGuard

from . import answers, version
from .answers import fault_json
from .api import ApiServer
from .audit import AUDIT, AuditFaults, audit_answer
from .config import Config, ConfigError, load_config
from .confirm import Confirmations, exits
from .entries import EntryConfirmations
from .findings import IntentFindings
from .guard import IntentGuard
from .interference import InterferenceFindings
from .limits import LoopErrorLimiter, limit_http_server
from .localize import ChangeLog, Localizer, ofctl_path
from .metrics import FAULT_CLASSES, Metrics, config_hash
from .notify import Notifier, setup_logging
from .packetins import PacketInWatch
from .probewatch import ProbeWatch
from .ui.data import coverage_json, topology_json
from .workers import ModelServer, VersionFile, WorkerPool, pick_udp_port

__all__ = ["Daemon", "main", "fault_json"]

STOP_BOUND = 5.0  # seconds from SIGTERM to exit

log = logging.getLogger("pazzd")

_TICK = 0.5  # seconds between tester timer ticks
# Settings that take effect at the next restart: a reload warns when they change and keeps
# the running instance's.
RESTART_ONLY = (
    "topology_path",
    "rules",
    "sflow_host",
    "sflow_port",
    "api_socket",
    "metrics_host",
    "metrics_port",
    "ui_enabled",
    "ui_host",
    "ui_port",
    "database",
    "controller_enabled",
    "listen_host",
    "listen_port",
    "agents_confirm",
    "fuzz_delivered_share",
    "sampling_rate",  # the fuzzer's shares and the probe copies are sized by it at start
    "controller_host",
    "controller_port",
    "controller_name",
    "controllers",
)
PACKET_IN_RATE = 200.0  # PACKET_INs judged per second at most (each is a model trace)
_STALL = 1.0  # a tick this much late means the loop was blocked
CLONE_NEWNET = 0x40000000


def netns_packet_socket(ns: str, ifname: str) -> socket.socket:
    """An AF_PACKET socket bound to ifname inside network namespace ns."""
    libc = ctypes.CDLL(None, use_errno=True)
    with open("/proc/self/ns/net") as own, open(f"/run/netns/{ns}") as target:
        if libc.setns(target.fileno(), CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), f"setns into {ns}")
        try:
            s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
            s.bind((ifname, 0))
        finally:
            if libc.setns(own.fileno(), CLONE_NEWNET) != 0:  # pragma: no cover
                raise OSError(ctypes.get_errno(), "setns back")
    return s


class StartError(Exception):
    """A resource the start needs is unavailable; the message names it."""


@contextlib.contextmanager
def _resource(what: str):
    """Start-up errors name the resource: which address is in use, which database is bad."""
    try:
        yield
    except OSError as e:
        raise StartError(f"{what}: {e.strerror or e}") from None
    except sqlite3.Error as e:
        raise StartError(f"{what}: {e}") from None


def lock_instance(api_socket: str) -> int:
    """Lock API_SOCKET.lock: one pazzd per API socket. Returns the lock's file descriptor
    (held until the process exits); raises StartError naming the holder if another pazzd
    has it."""
    path = f"{api_socket}.lock"
    with _resource(f"lock file {path} (next to api.socket)"):
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o640)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
        os.close(fd)
        raise StartError(
            f"another pazzd (pid {holder}) uses api.socket {api_socket}: its lock {path} is "
            "held; stop it first, or give this one another api.socket"
        ) from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return fd


DEFAULT_API_GROUP = "pazz"


def api_group(cfg: Config) -> str | None:
    """The API socket's group: api.group, else "pazz" where that group exists."""
    if cfg.api_group is not None:
        return cfg.api_group
    try:
        grp.getgrnam(DEFAULT_API_GROUP)
    except KeyError:
        return None
    return DEFAULT_API_GROUP


def _int_arg(req: dict, name: str) -> int:
    try:
        return int(req[name])
    except (TypeError, ValueError):
        raise ApiError(f"{name} must be an integer, not {req[name]!r}") from None


class Daemon:
    def __init__(
        self, config_path: str, notifier: Notifier | None = None, tester_workers: int | None = None
    ) -> None:
        self.config_path = config_path
        self.tester_workers = tester_workers  # --tester-workers, over the config's tester.workers
        self.workers: WorkerPool | None = None
        self.model_server: ModelServer | None = None
        self.version_file: VersionFile | None = None
        self.notifier = notifier or Notifier()
        self.cfg: Config | None = None
        self.started = time.time()
        self.stop_event = asyncio.Event()
        self.loop_errors = LoopErrorLimiter()
        self.audit_store_errors = 0
        self.metrics = Metrics(self.state)
        self.model: Model | None = None
        self.tester: Tester | None = None
        self.store: FaultStore | None = None
        self.collector: SflowCollector | None = None
        self.api: ApiServer | None = None
        self.proxy = None
        self.audit_faults: AuditFaults | None = None
        self.fuzzer = None
        self.injector = None
        self._fuzz_ingresses: set | None = None  # None: every ingress (packet-out)
        self.localizer: Localizer | None = None
        self.changes = ChangeLog()  # committed controller changes, for localization
        self.guard: TransientGuard | None = None
        self.metrics_port = 0
        self.ui = None  # the web view's server (pazzd.ui.server), when ui.enabled
        self.ui_port = 0
        self.last_config_error: str | None = None
        self.reloads = 0
        self._tasks: set[asyncio.Task] = set()
        self._last_datagram = 0.0
        self._switch_up: dict[int, bool] = {}
        self._lock_fd: int | None = None
        self._started = False
        self._reload_pending = False
        self._reload_lock = asyncio.Lock()
        self.intents: IntentChecker | None = None
        self.intent_findings: IntentFindings | None = None
        self.interference: InterferenceFindings | None = None
        self._interference_unsynced = self._interference_rescan = False
        self.confirmations: Confirmations | None = None
        self.entry_confirm: EntryConfirmations | None = None
        self._intents_unsynced = False
        self._intent_causes: dict[str, dict] = {}  # violation key -> what opened it
        self._local_cause: dict | None = None  # what the model update being made is (API)
        self.intent_guard: IntentGuard | None = None
        self.packet_ins: PacketInWatch | None = None
        self._packet_in_second = [0.0, 0]  # [start of the current second, judged in it]

    # --- state for metrics and status ----------------------------------------------------------
    def faults_open(self) -> dict[str, int]:
        out = dict.fromkeys(FAULT_CLASSES, 0)
        if self.store is not None:
            for r in self.store.faults("open"):
                out[r.kind] = out.get(r.kind, 0) + 1
        return out

    def tester_stats(self) -> dict:
        """The tester's counters: the in-process tester's plus every worker's latest."""
        if self.tester is None:
            return {}
        out = self.tester.stats.as_dict()
        out["fault_store_errors"] = out.get("fault_store_errors", 0) + self.audit_store_errors
        if self.workers is not None:
            for k, v in self.workers.totals().items():
                out[k] = out.get(k, 0) + v
            out["workers"] = self.workers.alive()
            out["worker_restarts"] = self.workers.restarts
        return out

    def state(self) -> dict:
        m = self.model
        fz = None
        if self.fuzzer is not None:
            try:
                fz = self.fuzzer.metrics()
            except Exception as e:  # the fuzzer's own bookkeeping must not break status
                fz = {"error": str(e)}
        switches: dict[int, bool] = {}
        if self.proxy is not None:
            # Every switch of the topology: one that never connected is down too.
            switches = dict.fromkeys(self.cfg.topology.switches, False)
            switches.update(self._switch_up)
            for d in self.proxy.switches:
                switches[d] = True
        return {
            "tester": self.tester_stats(),
            "faults_open": self.faults_open(),
            "rules": m.rule_count() if m else 0,
            "classes": m.class_count() if m else 0,
            "version": m.version if m else 0,
            "fuzz": fz,
            "proxy_on": self.proxy is not None,
            "switches": switches,
            "controller_connected": self.proxy is not None and self.proxy.controller_connected,
            "proxy": self.proxy.drops() if self.proxy is not None else {},
            "intents": self.intents_open(),
            "interference": self.interference_open(),
            "agents": self.entry_confirm.state() if self.entry_confirm is not None else {},
        }

    def intents_open(self) -> dict[str, int]:
        """Open intent findings per configured policy (every policy present)."""
        if self.intent_findings is None or self.cfg is None:
            return {}
        return self.intent_findings.open_by_policy(self.cfg.intent_policies)

    # --- set-up ------------------------------------------------------------------------------------
    @staticmethod
    def _ovs_runner(bin_dir: str):
        def run(argv, **kw):
            tool = Path(bin_dir) / argv[0]
            return subprocess.run([str(tool) if tool.exists() else argv[0], *argv[1:]], **kw)

        return run

    def _ifmap(self, cfg: Config) -> IfMap:
        ifmap = IfMap.from_config(cfg.sflow_interfaces)
        done = set()
        for sw in cfg.switches:
            if sw.ovsdb and (sw.ovsdb, sw.agent) not in done:
                done.add((sw.ovsdb, sw.agent))
                n = ifmap.load_ovsdb(
                    sw.agent or "0.0.0.0", sw.ovsdb, run=self._ovs_runner(cfg.ovs_bin_dir)
                )
                log.info(
                    "sFlow ifIndex map: %d interfaces from %s (agent %s)", n, sw.ovsdb, sw.agent
                )
        return ifmap

    def _blackholes(self, cfg: Config) -> BlackholeMonitor | None:
        if not cfg.critical_flows:
            return None
        # The model derives each flow's header at its egress (rewrites applied).
        return BlackholeMonitor(
            cfg.critical_flows,
            k=cfg.blackhole_k,
            now=time.time(),
            grace=cfg.blackhole_grace,
            model=self.model,
        )

    def _rules_at(self):
        cache: dict = {"v": -1, "by": {}}

        def rules_at(dpid: int):
            if cache["v"] != self.model.version:
                by: dict[int, list[RuleRef]] = {}
                for e in self.model.entries():
                    by.setdefault(e.dpid, []).append(
                        RuleRef(e.table, e.priority, e.cookie, e.rule_id)
                    )
                cache["by"], cache["v"] = by, self.model.version
            return cache["by"].get(dpid, ())

        return rules_at

    async def start(self) -> None:
        cfg = load_config(self.config_path)  # ConfigError stops the start
        self._lock_fd = lock_instance(cfg.api_socket)  # before anything binds or unlinks
        self.cfg = cfg
        self.metrics.set_config_hash(config_hash(self.config_path))
        # A flood of connections must not turn into one log line (and traceback) per accept.
        asyncio.get_running_loop().set_exception_handler(self.loop_errors)
        logging.getLogger().setLevel(cfg.log_level.upper())
        t0 = time.monotonic()
        self.model = Model(cfg.topology)
        if cfg.rules:
            n = self.model.load_rules(cfg.rules)
            log.info(
                "model: %d rules from %s, %d classes in %.2f s",
                n,
                cfg.rules,
                self.model.class_count(),
                time.monotonic() - t0,
            )
        else:
            self.model.build()
        # The tester's clock is wall time (sample timestamps): the guard must use the same.
        self.guard = TransientGuard(settle=cfg.settle, clock=time.time)
        self.model.subscribe(self.guard.on_model_update)
        if cfg.database != ":memory:":
            Path(cfg.database).parent.mkdir(parents=True, exist_ok=True)
        with _resource(f"database {cfg.database}"):  # not a database, truncated, read-only
            self.store = FaultStore(cfg.database)
        self.rules_at = self._rules_at()
        self.tester = Tester(
            self.model,
            self.store,
            self._ifmap(cfg),
            ports=None,
            guard=self.guard,
            blackholes=self._blackholes(cfg),
            resolve_after=cfg.resolve_after,
            on_fault=self._on_fault,
            on_localize=self._on_localize,
            rules_at=self.rules_at,
        )
        self.tester.agents = cfg.sflow_agents
        self.tester.corroborate = cfg.corroborate
        self.tester.corroborate_window = cfg.corroborate_window
        self.tester.on_suspect = self._on_suspect
        n_workers = self.tester_workers or cfg.tester_workers
        if n_workers > 1 and cfg.database == ":memory:":  # --tester-workers over the config
            raise ConfigError(
                f"{self.config_path}: --tester-workers needs a database file "
                "(the workers share it), not ':memory:'"
            )
        if cfg.controller_enabled:
            with _resource(f"controller.listen {cfg.listen_host}:{cfg.listen_port}"):
                await self._start_proxy(cfg)
        self.localizer = Localizer(
            self.model.entries,
            {s.dpid: s.ofctl for s in cfg.switches if s.ofctl},
            ofctl=ofctl_path(cfg.ovs_bin_dir),
            proxy=self.proxy,
            names={d: s.name for d, s in cfg.topology.switches.items()},
            changes=self.changes,
        )
        if (
            any(s.ofctl for s in cfg.switches)
            and not (Path(cfg.ovs_bin_dir) / "ovs-ofctl").exists()
        ):
            log.warning(
                "ovs.bin_dir %s has no ovs-ofctl: polling uses the ovs-ofctl on PATH, "
                "which cannot decode set_verify_rule unless it is the patched build",
                cfg.ovs_bin_dir,
            )
        if cfg.fuzz_enabled:
            # Before the collector: importing scapy and planning take seconds, and nothing
            # should block the loop once datagrams arrive. The probe task starts after start().
            self._start_fuzzer(cfg)
        self._start_intents(cfg, n_workers)
        self._start_interference(cfg)
        if n_workers > 1:
            await self._start_workers(cfg, n_workers)
        else:
            self.collector = SflowCollector(
                self._datagram, hosts=(cfg.sflow_host,), port=cfg.sflow_port, pass_source=True
            )
            with _resource(f"sflow.listen {cfg.sflow_host}:{cfg.sflow_port} (UDP)"):
                await self.collector.start()
        self.api = ApiServer(cfg.api_socket, self.handle, group=api_group(cfg))
        with _resource(f"api.socket {cfg.api_socket}"):
            await self.api.start()
        with _resource(f"metrics.listen {cfg.metrics_host}:{cfg.metrics_port}"):
            self.metrics_port = self.metrics.serve(cfg.metrics_host, cfg.metrics_port)
        if self.metrics._server is not None:
            limit_http_server(self.metrics._server, max_clients=32, timeout=10.0)
        if cfg.ui_enabled:
            with _resource(f"ui.listen {cfg.ui_host}:{cfg.ui_port}"):
                self._start_ui(cfg)
        self.metrics.config_load_error.set(0)
        if self.tester.blackholes is not None:
            # Silence counts from now: before this the datagrams were not being read.
            self.tester.blackholes.arm(time.time())
        self._spawn(self._ticker())
        wd = self.notifier.watchdog_interval
        if wd:
            self._spawn(self._watchdog(wd))
        log.info(
            "pazzd ready: sFlow %s:%d, API %s, metrics %s:%d",
            cfg.sflow_host,
            cfg.sflow_port,
            cfg.api_socket,
            cfg.metrics_host,
            self.metrics_port,
        )
        self.notifier.ready(
            f"monitoring {len(cfg.topology.switches)} switches, {self.model.rule_count()} rules"
        )

    def _start_ui(self, cfg: Config) -> None:
        from .ui.server import UiServer, loop_answer

        answer = loop_answer(asyncio.get_running_loop(), self.api.answer, timeout=10.0)
        self.ui = UiServer(cfg.topology, answer, cfg.ui_host, cfg.ui_port)
        self.ui_port = self.ui.start()
        limit_http_server(self.ui.server, max_clients=32, timeout=10.0)
        log.info("web view: http://%s:%d/ui/ (read-only)", _url_host(cfg.ui_host), self.ui_port)

    async def _start_workers(self, cfg: Config, n: int) -> None:
        """Serve the model over Thrift, then start n workers on a shared sFlow port."""
        if cfg.sflow_port == 0:
            cfg.sflow_port = pick_udp_port(cfg.sflow_host)
        self.model_server = ModelServer(self, str(Path(cfg.api_socket).with_suffix(".model")))
        await self.model_server.start()
        vf = self.version_file = VersionFile(
            str(Path(cfg.api_socket).with_suffix(".version")), writer=True
        )
        vf.publish(self.model.version)
        self.model.subscribe(lambda upd: vf.publish(upd.version))
        self.workers = WorkerPool(n, self.config_path, self.model_server.path, vf.path, cfg)
        self.workers.start()
        await self.workers.wait_ready()
        self._spawn(self.workers.supervise(self.stop_event))
        log.info(
            "tester: %d worker processes on sFlow port %d, model over Thrift at %s",
            n,
            cfg.sflow_port,
            self.model_server.path,
        )

    async def _start_proxy(self, cfg: Config) -> None:
        from pazzd.proxy import Proxy, ProxyConfig
        from pazzd.proxy.proxy import Controller, tls_contexts

        try:
            switch_ssl, controller_ssl = tls_contexts(cfg.switch_tls, cfg.controller_tls)
            more = []
            for c in cfg.controllers:
                tls = c.tls or cfg.controller_tls
                ctx = tls_contexts(None, c.tls)[1] if c.tls else controller_ssl
                host = (tls or {}).get("server_hostname") or c.host
                more.append(Controller(c.host, c.port, c.name, ctx, host))
        except (ssl.SSLError, OSError) as e:
            raise ConfigError(f"{self.config_path}: controller TLS: {e}") from None
        pc = ProxyConfig(
            switch_ssl=switch_ssl,
            controller_ssl=controller_ssl,
            controller_server_hostname=(cfg.controller_tls or {}).get("server_hostname")
            or cfg.controller_host,
            listen_host=cfg.listen_host,
            listen_port=cfg.listen_port,
            controller_host=cfg.controller_host,
            controller_port=cfg.controller_port,
            controller_name=cfg.controller_name,
            controllers=more,
            audit_interval=cfg.audit_interval,
            audit_delay=cfg.audit_delay,
            handshake_timeout=cfg.handshake_timeout,
            idle_timeout=cfg.idle_timeout,
            stall_timeout=cfg.stall_timeout,
            max_connections=cfg.max_connections,
            group_twice=cfg.agents_group_twice,
            db_path=str(Path(cfg.database).with_suffix(".rules.db"))
            if cfg.database != ":memory:"
            else None,
        )

        def on_switch(dpid: int, up: bool) -> None:
            self._switch_up[dpid] = up
            log.info("switch %#x %s", dpid, "connected" if up else "disconnected")

        names = {d: s.name for d, s in cfg.topology.switches.items()}
        self.audit_faults = AuditFaults(self.store, names)
        try:
            self.proxy = Proxy(pc, self.model, on_switch=on_switch, on_audit=self._on_audit)
        except sqlite3.Error as e:
            raise OSError(f"database {pc.db_path}: {e}") from None
        self.proxy.on_commit = self._note_commit
        self.proxy.on_model_update = self.metrics.model_update.observe
        await self.proxy.start()

    def _on_audit(self, dpid: int, findings) -> None:
        """One completed audit of a switch: store its findings as faults, then report.
        When the store fails, the next audit finds them again (nothing is reported now)."""
        try:
            events = self.audit_faults.round(dpid, findings, time.time())
        except (sqlite3.Error, OSError) as e:
            self.audit_store_errors += 1
            log.error(
                "audit of dpid:%d not stored (fault store: %s); the next audit retries", dpid, e
            )
            return
        for ev in events:
            f = ev.finding
            if ev.what == "new":
                self.metrics.faults_detected.labels(AUDIT).inc()
                log.warning("fault #%d audit at dpid:%d: %s", ev.fault_id, dpid, f)
            elif ev.what == "merged":
                log.warning("fault #%d: the audit sees its entry too: %s", ev.fault_id, f)
            elif ev.what == "merged_away":
                log.info("fault #%d resolved: audit, merged into fault #%d", ev.fault_id, ev.into)
            else:
                log.info("fault #%d resolved: audit at dpid:%d", ev.fault_id, dpid)

    def _note_commit(self, dpid: int, changes) -> None:
        """Log the entries a committed batch of the proxy changed (for localization)."""
        import ofwire as of

        if self.entry_confirm is not None:
            try:
                self.entry_confirm.committed(dpid, changes)
            except (sqlite3.Error, OSError) as e:
                log.error("entry confirmation: %s", e)
        for ch in changes:  # entry changes (proxy.table.EntryChange)
            for e in (ch.entry, ch.old):
                if e is None:
                    continue
                # A match the model cannot represent is in no intended table: never a finding.
                with contextlib.suppress(ModelError):
                    self.changes.note(dpid, e.table, e.priority, of.cpc_match(e.mkey))

    # --- intent checks ------------------------------------------------------------------------
    def _start_intents(self, cfg: Config, n_workers: int) -> None:
        """Check the intended state now, then on every model update (cpc.intents)."""
        self.intents = IntentChecker(self.model, cfg.intent_policies)
        self.intent_findings = IntentFindings(self.store, cfg.topology)
        probes = None
        if self.fuzzer is not None and n_workers == 1:  # the watches need the tester here
            self.fuzzer.confirm_share = cfg.agents_share
            probes = ProbeWatch(self.tester, self.fuzzer, cfg.topology, cfg.sampling_rate)
        if cfg.intents_confirm and probes is not None:
            self.confirmations = Confirmations(
                self.store,
                self.tester,
                self.fuzzer,
                cfg.topology,
                cfg.sampling_rate,
                cfg.fuzz_rate,
                probes=probes,
                share=cfg.agents_share,
            )
        if cfg.agents_confirm and probes is not None and self.proxy is not None:
            self.entry_confirm = EntryConfirmations(
                self.model,
                probes,
                self.store,
                cfg.topology,
                probe_rate=cfg.fuzz_rate,
                share=cfg.agents_share,
                # reports of the changed headers are held for tester.settle
                delay=cfg.settle + cfg.agents_delay,
                probes_per_entry=cfg.agents_probes_per_entry,
                max_pending=cfg.agents_max_pending,
            )
        elif cfg.intents_confirm and cfg.intent_policies and n_workers > 1:
            log.info("intents: findings are not confirmed by probes with tester workers")
        t0 = time.monotonic()
        self.intents.check_all()
        self._intents_sync({"source": "start-up"})
        log.info(
            "intents: %d policies checked in %.2f s, %d violations open",
            len(cfg.intent_policies),
            time.monotonic() - t0,
            len(self.intents.open),
        )
        pending = self.proxy.pending_flowmods if self.proxy is not None else list
        self.intent_guard = IntentGuard(self.model, self._enforced, pending)
        self.model.subscribe(self._on_intents)
        if self.proxy is not None:
            self.proxy.guard = self.intent_guard.for_proxy
            if cfg.intents_packet_ins:
                self.packet_ins = PacketInWatch(
                    self.model,
                    cfg.topology,
                    forgotten_after=cfg.intents_forgotten_after,
                    resolve_after=cfg.intents_resolve_after,
                )
                self.proxy.on_packet_in = self._on_packet_in
                self.proxy.on_release = self.packet_ins.released
                note, watch = self.proxy.on_commit, self.packet_ins

                def on_commit(dpid: int, changes) -> None:
                    watch.committed(dpid)  # paths through dpid settle from now
                    if note is not None:
                        note(dpid, changes)

                self.proxy.on_commit = on_commit

    def _on_packet_in(self, dpid: int, msg: bytes) -> None:
        import ofwire as of

        sec, now = self._packet_in_second, time.monotonic()
        if now - sec[0] >= 1.0:
            sec[0], sec[1] = now, 0
        if sec[1] >= PACKET_IN_RATE:
            return  # a storm: judge a sample, at most PACKET_IN_RATE a second
        sec[1] += 1
        try:
            buffer_id, in_port, frame = of.parse_packet_in(msg)
        except of.ProtocolError:
            self.packet_ins.unparsed += 1
            return
        self.packet_ins.packet_in(dpid, buffer_id, in_port, frame)

    def _packet_ins_tick(self) -> None:
        w = self.packet_ins
        try:
            for o in w.tick():
                if o.stored:
                    self.intent_findings.resolve_key(o.key)
            for o in w.open.values():
                if not o.stored:
                    self.intent_findings.occurrence(o)
                    o.stored = True
        except (sqlite3.Error, OSError) as e:
            log.error("packet-in findings not stored (%s); retrying", e)

    def _intents_sync(self, cause: dict) -> None:
        """Bring the findings table in step with the checker (start, reload, after a store
        failure)."""
        try:
            new = self.intent_findings.sync(self.intents.open, cause)
            self._intents_unsynced = False
        except (sqlite3.Error, OSError) as e:
            self._intents_unsynced = True
            log.error("intent findings not stored (%s); retrying", e)
            return
        self._confirm(new)

    def _on_intents(self, upd) -> None:
        """Every model update: the checker's state now; the ticker stores what changed
        (violations that open and close within one tick are never stored)."""
        try:
            ch = self.intents.on_update(upd)
        except Exception:
            log.exception("intent checks failed on model version %d", upd.version)
            return
        if self.intent_guard.collect(ch):  # the guard's trial: judged, not stored
            return
        if ch.opened or ch.resolved or ch.changed:
            if ch.opened:
                cause = self._cause()
                for v in ch.opened:
                    self._intent_causes.setdefault(v.key, cause)
            self._intents_unsynced = True

    def _intents_store(self) -> None:
        """The ticker's half of _on_intents: store, then report."""
        try:
            new = self.intent_findings.reconcile(self.intents.open, self._intent_causes)
            self._intents_unsynced = False
        except (sqlite3.Error, OSError) as e:
            log.error("intent findings not stored (%s); retrying", e)
            return
        self._confirm(new)

    # --- interference between controller applications ----------------------------------------
    def _start_interference(self, cfg: Config) -> None:
        """With apps configured: find their interfering entries now, then on every update."""
        if not cfg.apps:
            return
        checker = InterferenceChecker(self.model, Apps(cfg.apps))
        self.interference = InterferenceFindings(self.store, cfg.topology, checker)
        self.interference.on_new = self._confirm_interference
        t0 = time.monotonic()
        checker.scan()
        self._interference_sync()
        log.info(
            "interference: %d apps, %d findings open, scanned in %.2f s",
            len(cfg.apps),
            len(checker.findings),
            time.monotonic() - t0,
        )
        self.model.subscribe(self._on_interference)

    def _interference_sync(self) -> None:
        try:
            if self._interference_rescan:  # the checker failed mid-update: start it afresh
                self._interference_rescan = False
                self.interference.checker.scan()
            self.interference.sync()
            self._interference_unsynced = False
        except (sqlite3.Error, OSError) as e:
            self._interference_unsynced = True
            log.error("interference findings not stored (%s); retrying", e)

    def _on_interference(self, upd) -> None:
        try:
            self.interference.checker.on_update(upd)
            if not self._interference_unsynced:
                self.interference.apply()
        except (sqlite3.Error, OSError) as e:
            self._interference_unsynced = True  # the ticker stores them again from the checker
            log.error("interference findings not stored (%s); retrying", e)
        except Exception:
            self._interference_unsynced = self._interference_rescan = True
            log.exception("interference check failed on model version %d", upd.version)

    def _reload_apps(self, cfg: Config, old: Config) -> None:
        """A changed apps section: every entry's owner is worked out again and every pair
        judged again (a full scan); findings between entries that are no longer of two
        owners resolve. Without apps left, nothing is of two owners."""
        if cfg.apps == old.apps:
            return
        if self.interference is None:
            self._start_interference(cfg)
            return
        self.interference.checker.apps = Apps(cfg.apps)
        self._interference_rescan = True
        t0 = time.monotonic()
        self._interference_sync()
        log.info(
            "interference: apps changed (%d apps): %d findings open, rescanned in %.2f s",
            len(cfg.apps),
            len(self.interference.checker.findings),
            time.monotonic() - t0,
        )

    def interference_open(self) -> dict:
        return self.interference.open_counts() if self.interference is not None else {}

    def _reload_agents(self, cfg: Config) -> None:
        if self.proxy is not None:
            self.proxy.config.group_twice = cfg.agents_group_twice
        if self.fuzzer is not None:
            self.fuzzer.confirm_share = cfg.agents_share
        ec = self.entry_confirm
        if ec is not None:
            ec.delay = cfg.settle + cfg.agents_delay
            ec.n, ec.max_pending = cfg.agents_probes_per_entry, cfg.agents_max_pending
            ec.rate = max(cfg.fuzz_rate * cfg.agents_share, 1.0)

    def _enforced(self) -> set[str]:
        return {p.name for p in self.cfg.intent_policies if p.enforce}

    def _confirm_interference(self, fid: int, f) -> None:
        """Probe an interference finding's witness from an edge port whose path reaches
        the finding's switch (at its in_port); the verdict says which app's entry the
        data plane obeyed: the model's winner if the reports carry the tags it expects."""
        if self.confirmations is None:
            return
        for ing in self.cfg.topology.edge_ports():
            paths = self.model.trace(ing, f.witness)
            if any(
                h.dpid == f.dpid and (f.in_port is None or h.in_port == f.in_port)
                for d in paths
                for h in d.hops
            ):
                side = {"a": f.a, "b": f.b}.get(f.winner)
                winner = side.owner if side is not None else "another entry"
                probe = [("witness", ing, f.witness, exits(paths))]
                self.confirmations.start_probes(fid, probe, {"model_winner": winner})
                return

    def _confirm(self, new: list) -> None:
        if self.confirmations is None:
            return
        for fid, v in new:
            self.confirmations.start(fid, v)

    def _cause(self) -> dict:
        """What caused the model update being checked: the proxy's batch, or an API call."""
        feeding = self.proxy.feeding if self.proxy is not None else None
        if feeding is None:
            return self._local_cause or {"source": "model update"}
        import ofwire as of
        from pazzd.proxy.table import GroupChange

        dpid, changes, xids = feeding
        entries = []
        for ch in changes[:8]:
            if isinstance(ch, GroupChange):
                entries.append({"change": "group", "group_id": ch.group_id})
                continue
            kind, new = ch.kind, ch.entry
            try:
                match = format_match(of.cpc_match(new.mkey))
            except (ModelError, of.ProtocolError):
                match = "(not modelled)"
            entries.append(
                {
                    "change": kind,
                    "table": new.table,
                    "priority": new.priority,
                    "cookie": f"0x{new.cookie:x}",
                    "match": match,
                }
            )
        return {
            "source": "controller",
            "switch": self.cfg.topology.switches[dpid].name,
            "xids": list(xids[:16]),
            "changes": len(changes),
            "entries": entries,
        }

    def _start_fuzzer(self, cfg: Config) -> None:
        try:
            from fuzzer.engine import Fuzzer
            from fuzzer.inject import ByIngress, QueuedPacketOut, RawSocketInjector
            from fuzzer.plan import shares_with_delivered
        except Exception as e:
            log.warning("fuzzer unavailable (%s); running without fuzz probes", e)
            return
        socks = {}
        try:
            for port, spec in cfg.fuzz_inject.items():
                if spec.startswith("netns:"):
                    _, ns, ifname = spec.split(":", 2)
                    socks[port] = netns_packet_socket(ns, ifname)
            ifaces = {p: s for p, s in cfg.fuzz_inject.items() if not s.startswith("netns:")}
            injectors = set(socks) | set(ifaces)
            pairs = cfg.fuzz_pairs
            if pairs is None:
                eps = cfg.edge_ports
                pairs = [(i, e) for i in eps for e in eps if i != e]
            if self.proxy is None:
                pairs = [(i, e) for i, e in pairs if i in injectors]
            if not pairs:
                log.warning("fuzz: no pair has an injection interface (fuzz.inject); fuzzer off")
                return
            self.injector = RawSocketInjector(ifaces, sockets=socks)
            self._fuzz_ingresses = injectors if self.proxy is None else None
            if any(i not in injectors for i, _ in pairs):
                # The other ingresses get their probes by PACKET_OUT through the proxy.
                packet_out = QueuedPacketOut(self.proxy.send_packet_out)
                self.injector = ByIngress(dict.fromkeys(injectors, self.injector), packet_out)
                self._spawn(packet_out.run(self.stop_event))
            self.fuzzer = Fuzzer(
                self.model,
                pairs,
                rate=cfg.fuzz_rate,
                window_s=cfg.fuzz_window,
                seed=1,
                shares=shares_with_delivered(cfg.fuzz_delivered_share, cfg.sampling_rate),
            )
        except Exception as e:
            log.warning("fuzzer failed to start (%s); running without fuzz probes", e)
            self.fuzzer = None
            return
        self._fuzz_critical(cfg)
        self._spawn(self._fuzz_loop())
        log.info("fuzzer: %d pairs at %.0f probes/s", len(pairs), cfg.fuzz_rate)

    def _fuzz_critical(self, cfg: Config) -> None:
        """The critical flows are probed from their ingress once a second too (those the
        fuzzer can inject at)."""
        ok = self._fuzz_ingresses
        self.fuzzer.set_critical(c for c in cfg.critical_flows if ok is None or c.ingress in ok)

    async def _fuzz_loop(self) -> None:
        try:
            await self.fuzzer.run(self.injector, self.stop_event)
        except Exception:
            log.exception("fuzzer stopped")

    def _spawn(self, coro) -> asyncio.Task:
        t = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(t)
        t.add_done_callback(self._tasks.discard)
        return t

    # --- running ------------------------------------------------------------------------------------
    def _datagram(self, data: bytes, source: str | None = None) -> None:
        self._last_datagram = time.time()
        self.tester.process_datagram(data, source=source)

    def worker_report(self, last_datagram: float, events) -> None:
        """What a tester worker reported (pazzd.workers): when it last had a datagram, and
        its fault events and localization requests, in order."""
        self._last_datagram = max(self._last_datagram, last_datagram)
        for ev in events:
            (self._on_localize if isinstance(ev, LocalizationRequest) else self._on_fault)(ev)

    def _on_fault(self, ev: FaultEvent) -> None:
        if ev.resolved:
            log.info("fault #%d resolved: %s at %s", ev.fault_id, ev.kind, ev.location)
            return
        if not ev.new:
            return
        self.metrics.faults_detected.labels(ev.kind).inc()
        latency = 0.0
        row = self.store.get(ev.fault_id)
        if row is not None:
            since = (row.localization or {}).get("silent_since") if ev.kind == "blackhole" else None
            # From the fault's first evidence: with corroboration that is its first sample,
            # earlier than the datagram that completed it.
            start = since if since else min(self._last_datagram or row.first_seen, row.first_seen)
            latency = max(0.0, time.time() - start)
        self.metrics.detection_latency.observe(latency)
        hdr = ev.header.get("text") if "text" in ev.header else None
        log.warning(
            "fault #%d %s at %s, candidates %s, header %s",
            ev.fault_id,
            ev.kind,
            ev.location,
            list(ev.candidates),
            hdr or ev.header_class,
        )

    def _on_suspect(self, egress, header: dict, expected) -> None:
        """A fault's first sample (the in-process tester's on_suspect)."""
        self.corroborate(header, [e.ingress for e in expected])

    def corroborate(self, header: dict, expected_from) -> None:
        """Have the fuzzer send a fault's first sample again, 3N times at sampling 1/N (so
        that a copy is sampled within a second or two), from the probe's own ingress when
        it was a probe, else from the ingresses the model expects it from (corroboration,
        tester.corroborate; tester workers send theirs with their reports)."""
        if self.fuzzer is None:
            return
        hdr = {k: v for k, v in header.items() if k != "text"}
        sender = self.fuzzer.sender(hdr)
        ings = [sender] if sender is not None else list(expected_from)
        n = self.cfg.sampling_rate if self.cfg is not None else 1
        for ing in list(dict.fromkeys(ings))[:4]:
            self.fuzzer.corroborate(ing, hdr, n)

    def _on_localize(self, req: LocalizationRequest) -> None:
        self._spawn(self._auto_localize(req.fault_id))

    async def _auto_localize(self, fid: int) -> None:
        await asyncio.sleep(0.2)  # let OVS finish the change that caused it
        try:
            ans = await self.localize(fid)
            if ans.get("switch"):
                log.warning(
                    "fault #%d localized: %s %s entry %s",
                    fid,
                    ans["switch"],
                    ans["finding"],
                    ans["cause"],
                )
        except Exception as e:
            log.warning("fault #%d: localization failed: %s", fid, e)

    async def localize(self, fid: int) -> dict:
        row = self.store.get(fid)
        if row is None:
            raise ApiError(f"no fault with id {fid}")
        if row.kind == AUDIT:  # the audit compared the whole table: nothing to poll
            return audit_answer(row)
        t0 = time.monotonic()
        ans = await self.localizer.localize(row)
        self.metrics.localize.observe(time.monotonic() - t0)
        if self.tester is not None:
            self.tester.answer_localization(fid, ans)
        return ans

    async def _ticker(self) -> None:
        last = time.monotonic()
        while not self.stop_event.is_set():
            now = time.monotonic()
            if now - last > _TICK + _STALL and self.tester.blackholes is not None:
                # The event loop was blocked: reports may still wait in the socket buffer.
                log.warning(
                    "event loop stalled %.1f s; blackhole alarms held for %.0f s",
                    now - last - _TICK,
                    _STALL,
                )
                self.tester.blackholes.hold(time.time() + _STALL)
            last = now
            try:
                self.tester.tick()
            except Exception:
                log.exception("tester tick failed")
            if self._intents_unsynced:
                self._intents_store()
            if self.packet_ins is not None:
                self._packet_ins_tick()
            if self._interference_unsynced:
                self._interference_sync()
            if self.confirmations is not None:
                try:
                    self.confirmations.tick()
                except Exception:
                    log.exception("confirmations tick failed")
            if self.entry_confirm is not None:
                try:
                    self.entry_confirm.tick()
                except Exception:
                    log.exception("entry confirmations tick failed")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.stop_event.wait(), _TICK)

    async def _watchdog(self, interval: float) -> None:
        while not self.stop_event.is_set():
            self.notifier.watchdog()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.stop_event.wait(), interval)

    def request_reload(self) -> None:
        """SIGHUP. During the start the config is being read anyway: reload once started."""
        if not self._started:
            self._reload_pending = True
            log.info("SIGHUP during start-up: reloading once started")
            return
        self._spawn(self.reload())

    def request_stop(self) -> None:
        if not self._started:
            log.info("stop requested during start-up: stopping once started")
        self.stop_event.set()

    async def reload(self) -> bool:
        """SIGHUP: apply a new config; on error keep the last good one. Never blocks the
        event loop: the OVSDB lookups of the ifIndex map run in a thread (with timeouts)."""
        async with self._reload_lock:
            return await self._reload()

    async def _reload(self) -> bool:
        self.notifier.reloading()
        loop = asyncio.get_running_loop()
        try:  # in a thread: reading the files and resolving the listen hosts may take time
            cfg = await loop.run_in_executor(None, load_config, self.config_path)
        except ConfigError as e:
            self.last_config_error = str(e)
            self.metrics.config_load_error.set(1)
            self.metrics.config_reloads.labels("error").inc()
            log.error("config reload failed, keeping the last good config: %s", e)
            self.notifier.ready("config reload failed; running on the last good config")
            return False
        old = self.cfg
        for key in RESTART_ONLY:
            if getattr(old, key) != getattr(cfg, key):
                log.warning("config: %s changed; it takes effect at the next restart", key)
        logging.getLogger().setLevel(cfg.log_level.upper())
        self._reload_agents(cfg)
        self._reload_apps(cfg, old)
        t = self.tester
        t.resolve_after = cfg.resolve_after
        self.guard.settle = cfg.settle
        if [c for c in cfg.critical_flows] != [c for c in old.critical_flows] or (
            (cfg.blackhole_k, cfg.blackhole_grace) != (old.blackhole_k, old.blackhole_grace)
        ):
            t.blackholes = self._blackholes(cfg)
        t.ifmap = await loop.run_in_executor(None, self._ifmap, cfg)
        t.agents = cfg.sflow_agents  # workers get it when recycled below
        t.corroborate, t.corroborate_window = cfg.corroborate, cfg.corroborate_window
        self.localizer.targets = {s.dpid: s.ofctl for s in cfg.switches if s.ofctl}
        self.localizer.ofctl = ofctl_path(cfg.ovs_bin_dir)
        if self.fuzzer is not None:
            self.fuzzer.set_rate(cfg.fuzz_rate)
            self.fuzzer.window_s = cfg.fuzz_window
            self._fuzz_critical(cfg)
        if cfg.intent_policies != old.intent_policies:
            self.intents.set_policies(cfg.intent_policies)
            self.intents.check_all()
            self._intents_sync({"source": "config reload"})
            log.info("intents: %d policies in force", len(cfg.intent_policies))
        audit = (cfg.audit_interval, cfg.audit_delay)
        if self.proxy is not None and audit != (old.audit_interval, old.audit_delay):
            self.proxy.set_audit(*audit)  # the new period starts now
        if self.workers is not None:
            self.workers.recycle()
        # Keep the start-up-only settings of the running instance (the topology with its file).
        for key in ("topology", *RESTART_ONLY):
            setattr(cfg, key, getattr(old, key))
        self.cfg = cfg
        self.last_config_error = None
        self.metrics.config_load_error.set(0)
        self.metrics.config_reloads.labels("ok").inc()
        self.metrics.set_config_hash(config_hash(self.config_path))
        self.reloads += 1
        log.info("config reloaded from %s", self.config_path)
        self.notifier.ready("config reloaded")
        return True

    async def stop(self) -> None:
        self.notifier.stopping()
        self.stop_event.set()
        for t in list(self._tasks):
            t.cancel()
        if self.collector is not None:
            self.collector.close()
        try:  # cancelled by the shutdown bound (_amain): the finally part still runs
            if self.workers is not None:
                await asyncio.get_running_loop().run_in_executor(None, self.workers.stop)
            if self.model_server is not None:
                await self.model_server.close()
            if self.version_file is not None:
                self.version_file.close()
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(self.version_file.path)
            if self.api is not None:
                await self.api.close()
            if self.proxy is not None:
                with contextlib.suppress(Exception):
                    await self.proxy.stop()
        finally:
            if self.proxy is not None:
                with contextlib.suppress(Exception):
                    self.proxy.store.close()
            if self.injector is not None:
                self.injector.close()
            self.metrics.close()
            if self.ui is not None:
                self.ui.close()
            if self.store is not None:
                self.store.close()
            if self._lock_fd is not None:  # the lock file stays: unlinking it would race
                os.close(self._lock_fd)
                self._lock_fd = None

    # --- API -----------------------------------------------------------------------------------------
    async def handle(self, req: dict):
        cmd = req["cmd"]
        fn = getattr(self, f"api_{cmd.replace('-', '_')}", None)
        if fn is None:
            raise ApiError(f"unknown command {cmd!r}")
        # A request that lacks an argument or gives a bad value is the user's error: an
        # answer in words, no traceback in the log.
        try:
            res = fn(req)
            if asyncio.iscoroutine(res):
                res = await res
        except KeyError as e:
            raise ApiError(f"the {cmd} request needs the argument {e.args[0]!r}") from None
        except ValueError as e:  # int("x"), and TopologyError, ModelError, ConfigError
            raise ApiError(f"{cmd}: {e}") from None
        return res

    def api_status(self, req) -> dict:
        st = self.state()
        t = st["tester"]
        return {
            "pid": os.getpid(),
            "uptime_s": round(time.time() - self.started, 1),
            "config": self.config_path,
            "config_error": self.last_config_error,
            "config_reloads": self.reloads,
            "model": {
                "rules": st["rules"],
                "classes": st["classes"],
                "version": st["version"],
                "switches": len(self.cfg.topology.switches),
                "edge_ports": len(self.cfg.edge_ports),
            },
            "tester": t,
            "tester_workers": None
            if self.workers is None
            else [
                {
                    "index": i,
                    "alive": self.workers.procs[i].poll() is None,
                    "datagrams": self.workers.stats.get(i, {}).get("datagrams", 0),
                    "reports": self.workers.stats.get(i, {}).get("reports", 0),
                }
                for i in sorted(self.workers.procs)
            ],
            "faults_open": st["faults_open"],
            "intents_open": st["intents"],
            "agents": st["agents"],
            "fuzz": None
            if st["fuzz"] is None
            else {
                k: st["fuzz"].get(k)
                for k in (
                    "probes_sent_total",
                    "window_s",
                    "areas",
                    "areas_recent",
                    "expected_detect_s_1_256",
                    "error",
                )
            },
            "controller": "proxy" if self.proxy is not None else "off (rules from file)",
            "switches_connected": sorted(d for d, up in st["switches"].items() if up),
            "controllers": self.proxy.controllers() if self.proxy is not None else None,
            "metrics": f"http://{self.cfg.metrics_host}:{self.metrics_port}/metrics",
            "ui": f"http://{_url_host(self.cfg.ui_host)}:{self.ui_port}/ui/"
            if self.ui is not None
            else None,
            "sflow": f"{self.cfg.sflow_host}:{self.cfg.sflow_port}",
        }

    def api_faults(self, req) -> list:
        state = req.get("state")
        return [fault_json(r) for r in self.store.faults(state)]

    def api_fault(self, req) -> dict:
        row = self.store.get(_int_arg(req, "id"))
        if row is None:
            raise ApiError(f"no fault with id {req['id']}")
        return fault_json(row)

    async def api_localize(self, req) -> dict:
        return await self.localize(_int_arg(req, "id"))

    def api_trace(self, req) -> dict:
        try:
            return answers.trace(self.cfg.topology, self.model, req["ingress"], req["header"])
        except answers.QueryError as e:
            raise ApiError(str(e)) from None

    def api_reach(self, req) -> dict:
        limit = req.get("limit", 20)
        if isinstance(limit, bool) or not isinstance(limit, int) or not 0 <= limit <= 100000:
            raise ApiError(f"limit must be an integer from 0 to 100000, not {limit!r}")
        try:
            return answers.reach(self.cfg.topology, self.model, req["src"], req["dst"], limit)
        except answers.QueryError as e:
            raise ApiError(str(e)) from None

    def api_flowmod(self, req) -> dict:
        """Apply a FlowMod to the model (when the controller does not go through the proxy)."""
        dpid = self.cfg.topology.resolve_switch(str(req["switch"]))
        command = req.get("command", "add")
        t0 = time.perf_counter()
        try:
            fm = parse_flow(req["flow"], dpid, command)
            self._local_cause = {
                "source": "api flowmod",
                "switch": self.cfg.topology.switches[dpid].name,
                "command": command,
                "flow": str(req["flow"]),
            }
            upd = self.model.apply(fm)
        except ModelError as e:
            raise ApiError(str(e)) from None
        finally:
            self._local_cause = None
        self.changes.note(dpid, fm.table, fm.priority, fm.match)
        dt = time.perf_counter() - t0
        self.metrics.model_update.observe(dt)
        return {"version": upd.version, "classes_changed": len(upd.classes), "seconds": dt}

    def api_findings(self, req) -> list:
        """Findings about the intended state (kind: intent; state: open or resolved)."""
        kind, state = req.get("kind"), req.get("state")
        for name, v in (("kind", kind), ("state", state)):
            if v is not None and not isinstance(v, str):
                raise ApiError(f"{name} must be a string, not {v!r}")
        return [f.as_json() for f in self.store.findings(kind, state)]

    def api_finding(self, req) -> dict:
        f = self.store.finding(_int_arg(req, "id"))
        if f is None:
            raise ApiError(f"no finding with id {req['id']}")
        return f.as_json()

    def api_topology(self, req) -> dict:
        """Switches, ports (with their Verify_Port bits), links and edge ports."""
        return topology_json(self.cfg.topology)

    def api_coverage(self, req) -> dict:
        """The fuzzer's coverage per ingress; with `ingress`, that ingress's areas."""
        return coverage_json(self.fuzzer, self.cfg.topology, req.get("ingress"))

    async def api_reload(self, req) -> dict:
        ok = await self.reload()
        return {"ok": ok, "error": self.last_config_error}


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def _setup_logging(level: str = "info") -> None:
    setup_logging(level, "%(levelname)s %(name)s: %(message)s")


STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


def hold_signals() -> list[int]:
    """Remember SIGHUP, SIGTERM and SIGINT instead of dying of them, until the event loop's
    handlers take over (the start-up imports and builds for seconds). Returns the list that
    collects them."""
    got: list[int] = []
    for sig in (signal.SIGHUP, *STOP_SIGNALS):
        signal.signal(sig, lambda signum, _frame: got.append(signum))
    return got


async def _amain(d: Daemon, early: list[int] | None = None) -> int:
    loop = asyncio.get_running_loop()
    # Handlers first, then the build: a signal during the start is acted on, not fatal.
    loop.add_signal_handler(signal.SIGHUP, d.request_reload)
    for sig in STOP_SIGNALS:
        loop.add_signal_handler(sig, d.request_stop)
    for sig in early or ():
        (d.request_reload if sig == signal.SIGHUP else d.request_stop)()
    try:
        await d.start()
    except ConfigError as e:
        log.error("%s", e)
        await d.stop()
        return 2
    except StartError as e:
        log.error("start-up failed: %s", e)
        await d.stop()
        return 1
    except (ModelError, TopologyError, OSError) as e:
        log.error("start-up failed: %s", e)
        await d.stop()
        return 1
    d._started = True
    if d._reload_pending:
        await d.reload()
    await d.stop_event.wait()
    log.info("stopping")
    try:
        await asyncio.wait_for(d.stop(), STOP_BOUND - 1.0)
    except TimeoutError:
        log.error("shutdown did not finish within %.0f s; exiting anyway", STOP_BOUND - 1.0)
    return 0


def _run(coro) -> int:
    """asyncio.run, bounded: tasks left over get a second to end, and threads of the
    default executor (a blocked localization, say) are not waited for."""
    loop = asyncio.new_event_loop()
    try:
        rc = loop.run_until_complete(coro)
        left = [t for t in asyncio.all_tasks(loop) if not t.done()]
        for t in left:
            t.cancel()
        if left:
            loop.run_until_complete(asyncio.wait(left, timeout=1.0))
    finally:
        ex = getattr(loop, "_default_executor", None)
        if ex is not None:
            ex.shutdown(wait=False, cancel_futures=True)
        loop.close()
    stuck = [
        t
        for t in threading.enumerate()
        if t is not threading.main_thread() and not t.daemon and t.is_alive()
    ]
    if stuck:  # the interpreter would join them at exit, for ever
        log.warning("exiting with %d threads still busy", len(stuck))
        logging.shutdown()
        os._exit(rc)
    return rc


def main(argv=None, early: list[int] | None = None) -> int:
    """early: signals received before main (see hold_signals and pazzd/__main__.py)."""
    if early is None:
        early = hold_signals()
    p = argparse.ArgumentParser(prog="pazzd", description="PAZZ consistency monitor daemon")
    p.add_argument("--version", action="version", version=f"pazzd {version()}")
    p.add_argument(
        "--config",
        "-c",
        default="/etc/pazz/pazzd.yaml",
        metavar="FILE",
        help="the config file (default /etc/pazz/pazzd.yaml)",
    )
    p.add_argument("--check", action="store_true", help="validate the config and exit")
    p.add_argument(
        "--tester-workers",
        type=int,
        metavar="N",
        default=None,
        help="judge sFlow in N worker processes (default: the config's tester.workers)",
    )
    args = p.parse_args(argv)
    if args.tester_workers is not None and not 1 <= args.tester_workers <= 64:
        p.error("--tester-workers must be between 1 and 64")
    _setup_logging()
    if args.check:  # no daemon: the signals kill again
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGHUP, signal.SIG_DFL)
        try:
            load_config(args.config, deep=True)
        except ConfigError as e:
            print(f"pazzd: {e}", file=sys.stderr)
            return 2
        print(f"{args.config}: OK")
        return 0
    return _run(_amain(Daemon(args.config, tester_workers=args.tester_workers), early))


if __name__ == "__main__":
    sys.exit(main())
