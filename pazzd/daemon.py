"""pazzd: one process that hosts the checks over the model, the tester, the sFlow
collector, the fuzzer, the OpenFlow proxy (optional), the metrics endpoint and the API.

    pazzd --config /etc/pazz/pazzd.yaml

Start-up: load and validate the config (exit 2 on an error naming file, line and key),
build the model (from the rule file, or empty and fed by the proxy), read the sFlow
ifIndex map from OVSDB, start the checks (pazzd.checks), the collector, the API socket and
the metrics endpoint, then tell systemd READY=1. SIGHUP reloads the config: on an error the
last good one stays in force, the error is logged and pazz_config_load_error is 1.
SIGTERM/SIGINT stop. The daemon keeps the lifecycle; what happens on a FlowMod or a sample
is the checks' (docs/daemon.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sqlite3
import time
import weakref
from pathlib import Path

from cpc.model import Model
from cpc.selecthash import group_bucket
from tester.collector import SflowCollector
from tester.engine import Tester
from tester.store import FaultStore
from tester.timers import TransientGuard

from . import status, wiring
from .api import ApiServer, group_id
from .checks import REGISTRY
from .commands import Commands, url_host
from .config import RESTART_ONLY, Config, ConfigError, load_config, set_setting, setting
from .confirm import Confirmations
from .faults import FaultEvents
from .findstore import FindingStore
from .ifmaps import InterfaceMaps
from .limits import LoopErrorLimiter, limit_http_server
from .localize import ChangeLog, Localizer, ofctl_path
from .metrics import Metrics, config_hash
from .notify import Notifier
from .probes import ProbeService
from .proxy import Proxy
from .services import FindingSink, Services, Startup
from .startchecks import model_socket, unix_path_problem
from .ui.access import new_token, remove_token_file, token_path, write_token_file
from .ui.server import UiServer, loop_answer
from .wiring import resource
from .workers import ModelServer, VersionFile, WorkerPool, pick_udp_port

__all__ = ["Daemon", "STOP_BOUND", "StartCancelled"]

STOP_BOUND = 5.0  # seconds from SIGTERM to exit

log = logging.getLogger("pazzd")

_TICK = 0.5  # seconds between ticks of the tester and the checks
_STALL = 1.0  # a tick this much late means the loop was blocked


class StartCancelled(Exception):
    """SIGTERM or SIGINT came during the start: it ends at its next step (Daemon.start)."""


class Daemon:
    def __init__(
        self, config_path: str, notifier: Notifier | None = None, tester_workers: int | None = None
    ) -> None:
        self.config_path = config_path
        self.tester_workers = tester_workers  # --tester-workers, over the config's tester.workers
        self.notifier = notifier or Notifier()
        self.started = time.time()
        self.stop_event = asyncio.Event()
        self.loop_errors = LoopErrorLimiter()
        me = weakref.ref(self)  # the metrics live as long as the daemon: no cycle with it
        self.metrics = Metrics(lambda: me().state())
        self.cfg: Config | None = None
        self.svc: Services | None = None
        self.checks: list = []
        self.model: Model | None = None
        self.tester: Tester | None = None
        self.store: FaultStore | None = None
        self.findings: FindingStore | None = None
        self.proxy = None
        self.fuzzer = None
        self.injector = None
        self.probes: ProbeService | None = None
        self.workers: WorkerPool | None = None
        self.model_server: ModelServer | None = None
        self.scaleout = None  # pazzd.scaleout.primary.PrimaryLink, with scaleout.nats
        self.version_file: VersionFile | None = None
        self.collector: SflowCollector | None = None
        self.api: ApiServer | None = None
        self.localizer: Localizer | None = None
        self.faults: FaultEvents | None = None
        self.changes = ChangeLog()  # committed controller changes, for localization
        self.guard: TransientGuard | None = None
        self.ui = None  # the web view's server (pazzd.ui.server), when ui.enabled
        self.ui_token_path: str | None = None
        self.metrics_port = self.ui_port = 0
        self.last_config_error: str | None = None
        self.last_reload_warnings: list[str] = []  # what the latest reload left undone
        self.ifmaps: InterfaceMaps | None = None  # the sFlow ifIndex map's OVSDB parts
        self._ifmap_retrying = False
        self.reloads = 0
        self._fuzz_ingresses: set | None = None  # None: every ingress (packet-out)
        self._tasks: set[asyncio.Task] = set()
        self.switch_up: dict[int, bool] = {}
        self._lock_fd: int | None = None
        self._started = False
        self._reload_pending = False
        self._reload_lock = asyncio.Lock()

    # --- state for metrics and status (pazzd.status) ----------------------------------------
    def state(self) -> dict:
        return status.state(self)

    def faults_open(self) -> dict[str, int]:
        return status.faults_open(self.store, self.unsaved_faults())

    def unsaved_faults(self) -> list[dict]:
        return status.unsaved_faults(self)

    # --- start ---------------------------------------------------------------------------------
    async def _step(self) -> None:
        """Between two steps of the start: a stop asked for meanwhile ends it (the loop
        runs the signal's handler at the first chance it gets, here)."""
        for _ in range(3):
            await asyncio.sleep(0)
        if self.stop_event.is_set():
            raise StartCancelled

    async def _until_stopped(self, fut):
        """fut's result, or StartCancelled as soon as a stop is asked for (fut, a lookup in
        a thread, is left to end by itself)."""
        fut = asyncio.ensure_future(fut)
        stop = asyncio.ensure_future(self.stop_event.wait())
        try:
            await asyncio.wait({fut, stop}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stop.cancel()
        if not fut.done():
            fut.cancel()
            raise StartCancelled
        return fut.result()

    async def start(self) -> None:
        await self._step()
        cfg = load_config(self.config_path)  # ConfigError stops the start
        await self._step()
        self._lock_fd = wiring.lock_instance(cfg.api.socket)  # before anything binds or unlinks
        self.cfg = cfg
        self.metrics.set_config_hash(config_hash(self.config_path))
        # A flood of connections must not turn into one log line (and traceback) per accept.
        asyncio.get_running_loop().set_exception_handler(self.loop_errors)
        logging.getLogger().setLevel(cfg.log_level.upper())
        self._build_model(cfg)
        await self._step()
        if cfg.database != ":memory:":
            Path(cfg.database).parent.mkdir(parents=True, exist_ok=True)
        with resource(f"database {cfg.database}"):  # not a database, truncated, read-only
            self.store = FaultStore(cfg.database)
            self.findings = FindingStore(cfg.database)
        self.faults = FaultEvents(
            self.store, self.metrics, None, self._spawn, cfg.topology.edge_ports()
        )
        # In a thread: the OVSDB lookups wait for their switches, the loop keeps serving.
        # An OVSDB that cannot be read is retried (tick).
        self.ifmaps = InterfaceMaps(wiring.ovsdb_reader(cfg))
        read = asyncio.get_running_loop().run_in_executor(None, self.ifmaps.refresh, cfg)
        await self._until_stopped(read)
        await self._step()
        self._build_tester(cfg, wiring.ifmap(cfg, self.ifmaps))
        n_workers = self.tester_workers or cfg.tester.workers
        if n_workers > 1 and cfg.database == ":memory:":  # --tester-workers over the config
            raise ConfigError(
                f"{self.config_path}: --tester-workers needs a database file "
                "(the workers share it), not ':memory:'"
            )
        if n_workers > 1 and (long := unix_path_problem(model_socket(cfg.api.socket))):
            raise ConfigError(
                f"{self.config_path}: api.socket: the tester workers' model socket {long}"
            )
        if cfg.controller.enabled:
            with resource(
                f"controller.listen {cfg.controller.listen_host}:{cfg.controller.listen_port}"
            ):
                await self._start_proxy(cfg)
        self.localizer = Localizer(
            self.model.entries,
            {s.dpid: s.ofctl for s in cfg.switches if s.ofctl},
            ofctl=ofctl_path(cfg.ovs.bin_dir),
            proxy=self.proxy,
            names={d: s.name for d, s in cfg.topology.switches.items()},
            changes=self.changes,
            intended_group=self.model.group,
        )
        self.faults.localizer = self.localizer
        if (
            any(s.ofctl for s in cfg.switches)
            and not (Path(cfg.ovs.bin_dir) / "ovs-ofctl").exists()
        ):
            log.warning(
                "ovs.bin_dir %s has no ovs-ofctl: polling uses the ovs-ofctl on PATH, "
                "which cannot decode set_verify_rule unless it is the patched build",
                cfg.ovs.bin_dir,
            )
        if cfg.fuzz.enabled:
            # Before the collector: importing scapy and planning take seconds, and nothing
            # should block the loop once datagrams arrive. The probe task starts after start().
            self.fuzzer, self.injector, self._fuzz_ingresses = wiring.start_fuzzer(
                cfg, self.model, self.proxy, self._spawn, self.stop_event
            )
            if self.fuzzer is not None:
                self.faults.fuzzer = self.fuzzer
                self._fuzz_critical(cfg)
                self._spawn(self._fuzz_loop())
        await self._step()
        # The probes' watches need their reports judged in this process: so they are by
        # the scale-out workers (they pass them on), not by the local Thrift workers.
        self._start_checks(cfg, judged_here=n_workers == 1)
        local = self.fuzzer is not None and n_workers == 1 and not cfg.scaleout.nats
        if local and wiring.watch_probe_loss(cfg, self.model, self.tester, self.fuzzer, self.guard):
            log.info("probe loss: the delivered group's unreported probes are blackholes")
        if n_workers > 1:
            await self._start_workers(cfg, n_workers)
            await self._step()
        else:
            self.collector = SflowCollector(
                self._datagram, hosts=(cfg.sflow.host,), port=cfg.sflow.port, pass_source=True
            )
            with resource(f"sflow.listen {cfg.sflow.host}:{cfg.sflow.port} (UDP)"):
                await self.collector.start()
        if cfg.scaleout.nats:
            from .scaleout.primary import PrimaryLink  # NATS only when configured

            so = cfg.scaleout
            self.scaleout = PrimaryLink(self, so.nats, so.shards, so.snapshot_every)
            self._spawn(self.scaleout.run(self.stop_event))
            log.info("scale-out: model journal and worker reports over NATS %s", so.nats)
        self.api = ApiServer(
            cfg.api.socket, Commands(self.svc, self).handle, group=wiring.api_group(cfg)
        )
        with resource(f"api.socket {cfg.api.socket}"):
            await self.api.start()
        with resource(f"metrics.listen {cfg.metrics.host}:{cfg.metrics.port}"):
            self.metrics_port = self.metrics.serve(cfg.metrics.host, cfg.metrics.port)
        if self.metrics._server is not None:
            limit_http_server(self.metrics._server, max_clients=32, timeout=10.0)
        if cfg.ui.enabled:
            with resource(f"ui.listen {cfg.ui.host}:{cfg.ui.port}"):
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
            cfg.sflow.host,
            cfg.sflow.port,
            cfg.api.socket,
            cfg.metrics.host,
            self.metrics_port,
        )
        self.notifier.ready(
            f"monitoring {len(cfg.topology.switches)} switches, {self.model.rule_count()} rules"
        )

    def _build_model(self, cfg: Config) -> None:
        t0 = time.monotonic()
        self.model = Model(cfg.topology)
        if cfg.ovs.select_hash:  # the one bucket Open vSwitch sends each flow down
            self.model.select = group_bucket
        # probes and witnesses from an edge port carry its host's MAC (else the rules')
        self.model.set_host_macs(cfg.fuzz.host_macs)
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
        self.guard = TransientGuard(settle=cfg.tester.settle, clock=time.time)
        self.model.subscribe(self.guard.on_model_update)

    def _build_tester(self, cfg: Config, ifmap) -> None:
        self.tester = t = Tester(
            self.model,
            self.store,
            ifmap,
            ports=None,
            guard=self.guard,
            blackholes=wiring.blackholes(cfg, self.model),
            on_fault=self.faults.fault,
            on_localize=self.faults.localize_soon,
            rules_at=wiring.rules_at(self.model),
        )
        wiring.tune_tester(t, cfg)
        t.on_suspect = self.faults.suspect
        t.on_unexplained = self.faults.unexplained
        self.faults.tester = t
        self.faults.sampling_rate = wiring.probe_sampling(cfg)

    def _start_checks(self, cfg: Config, judged_here: bool) -> None:
        """The services every check gets, then each check the config turns on."""
        sink = FindingSink(self.findings)
        if self.fuzzer is not None and judged_here:  # the watches need the tester here
            self.fuzzer.confirm_share = cfg.agents.share
            self.probes = ProbeService(
                self.tester,
                self.fuzzer,
                self.model,
                cfg.topology,
                sampling_rate=wiring.probe_sampling(cfg),
                probe_rate=cfg.fuzz.rate,
                share=cfg.agents.share,
            )
            if cfg.intents.confirm:
                sink.confirmations = Confirmations(self.findings, self.probes)
        elif cfg.intents.confirm and not judged_here:
            log.info("findings are not confirmed by probes with tester or scale-out workers")
        self.svc = Services(
            cfg=cfg,
            model=self.model,
            store=self.store,
            findings=self.findings,
            tester=self.tester,
            topology=cfg.topology,
            sink=sink,
            startup=Startup(time.time(), needs_controller=self.proxy is not None),
            changes=self.changes,
            metrics=self.metrics,
            fuzzer=self.fuzzer,
            proxy=self.proxy,
            probes=self.probes,
        )
        self.model.subscribe(self._on_update, weak=True)
        if self.proxy is not None:
            self.proxy.hooks.commit.append(self._on_commit)
        for cls in REGISTRY:
            self._start_check(cls, cfg)

    def _start_check(self, cls, cfg: Config) -> None:
        if not cls.enabled(cfg, self.svc):
            return
        check = cls()
        check.start(self.svc)
        self.checks.append(check)

    def _start_ui(self, cfg: Config) -> None:
        """The web view, open to the API socket's users: its token in a file beside the
        socket, with the socket's group (pazzd.ui.access)."""
        answer = loop_answer(asyncio.get_running_loop(), self.api.answer, timeout=10.0)
        token = new_token()
        group = wiring.api_group(cfg)
        path = token_path(cfg.api.socket)
        with resource(f"the web view's token file {path}"):
            write_token_file(path, token, None if group is None else group_id(group))
        self.ui_token_path = path
        self.ui = UiServer(cfg.topology, answer, cfg.ui.host, cfg.ui.port, token)
        self.ui_port = self.ui.start()
        limit_http_server(self.ui.server, max_clients=32, timeout=10.0)
        log.info(
            "web view: http://%s:%d/ui/ (read-only; `pazzctl ui-url` gives it with its token)",
            url_host(cfg.ui.host),
            self.ui_port,
        )

    def ui_url(self) -> str | None:
        """The web view's URL with its token (None: the view is off)."""
        if self.ui is None:
            return None
        host = url_host(self.cfg.ui.host)
        return f"http://{host}:{self.ui_port}/ui/?token={self.ui.token}"

    async def _start_workers(self, cfg: Config, n: int) -> None:
        """Serve the model over Thrift, then start n workers on a shared sFlow port."""
        if cfg.sflow.port == 0:
            cfg.sflow.port = pick_udp_port(cfg.sflow.host)
        self.model_server = ModelServer(self, model_socket(cfg.api.socket))
        await self.model_server.start()
        vf = self.version_file = VersionFile(
            str(Path(cfg.api.socket).with_suffix(".version")), writer=True
        )
        vf.publish(self.model.version)
        self.model.subscribe(lambda upd: vf.publish(upd.version))
        self.workers = WorkerPool(n, self.config_path, self.model_server.path, vf.path, cfg)
        self.workers.start()
        await self._until_stopped(self.workers.wait_ready())
        self._spawn(self.workers.supervise(self.stop_event))
        log.info(
            "tester: %d worker processes on sFlow port %d, model over Thrift at %s",
            n,
            cfg.sflow.port,
            self.model_server.path,
        )

    async def _start_proxy(self, cfg: Config) -> None:
        pc = wiring.proxy_config(cfg, self.config_path)

        def on_switch(dpid: int, up: bool) -> None:
            self.switch_up[dpid] = up
            log.info("switch %#x %s", dpid, "connected" if up else "disconnected")

        try:
            self.proxy = Proxy(pc, self.model, on_switch=on_switch)
        except sqlite3.Error as e:
            raise OSError(f"database {pc.db_path}: {e}") from None
        self.proxy.on_model_update = self.metrics.model_update.observe
        await self.proxy.start()

    def _fuzz_critical(self, cfg: Config) -> None:
        """The critical flows are probed from their ingress once a second too (those the
        fuzzer can inject at); the blackhole monitor is told of every probe sent."""
        ok = self._fuzz_ingresses
        self.fuzzer.set_critical(c for c in cfg.critical_flows if ok is None or c.ingress in ok)
        self.fuzzer.on_critical = self._critical_probe_sent

    def _critical_probe_sent(self, ingress, header: dict) -> None:
        bh = self.tester.blackholes
        if bh is not None:
            bh.on_probe(ingress, header, self.tester.clock())

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

    # --- events, handed to every check ---------------------------------------------------------
    def _on_update(self, upd) -> None:
        for c in self.checks:
            try:
                c.on_update(upd)
            except Exception:
                log.exception("check %s failed on model version %d", c.name, upd.version)

    def _on_commit(self, dpid: int, changes) -> None:
        self.svc.startup.committed(time.time())
        self.changes.committed(dpid, changes)
        for c in self.checks:
            try:
                c.on_commit(dpid, changes)
            except Exception:
                log.exception("check %s failed on a commit of dpid %#x", c.name, dpid)

    def _datagram(self, data: bytes, source: str | None = None) -> None:
        self.faults.last_datagram = time.time()
        self.tester.process_datagram(data, source=source)

    # --- running -------------------------------------------------------------------------------
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
            self._tick(time.time())
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.stop_event.wait(), _TICK)

    def _tick(self, now: float) -> None:
        try:
            self.tester.tick()
        except Exception:
            log.exception("tester tick failed")
        if not self._ifmap_retrying and self.ifmaps.due():
            self._ifmap_retrying = True
            self._spawn(self._retry_ifmaps())
        connected = self.proxy is not None and self.proxy.controller_connected
        self.svc.startup.check(now, connected)
        if self.probes is not None:
            try:
                self.probes.tick()
            except Exception:
                log.exception("probe service tick failed")
        for c in self.checks:
            try:
                c.tick(now)
            except Exception:
                log.exception("check %s tick failed", c.name)

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
            log.info("stop requested during start-up: stopping at the start's next step")
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
            self.last_reload_warnings = []
            self.metrics.config_load_error.set(1)
            self.metrics.config_reloads.labels("error").inc()
            log.error("config reload failed, keeping the last good config: %s", e)
            self.notifier.ready("config reload failed; running on the last good config")
            return False
        old = self.cfg
        for key in RESTART_ONLY:
            if setting(old, key) != setting(cfg, key):
                log.warning("config: %s changed; it takes effect at the next restart", key)
        # Keep the start-up-only settings of the running instance (the topology with its file).
        for key in ("topology", *RESTART_ONLY):
            set_setting(cfg, key, setting(old, key))
        logging.getLogger().setLevel(cfg.log_level.upper())
        t = self.tester
        wiring.tune_tester(t, cfg)  # workers get theirs when recycled below
        self.guard.settle = cfg.tester.settle
        if wiring.blackhole_settings(cfg) != wiring.blackhole_settings(old):
            t.blackholes = wiring.blackholes(cfg, self.model)
        self.ifmaps.read = wiring.ovsdb_reader(cfg)
        warnings = await loop.run_in_executor(None, self.ifmaps.refresh, cfg)
        t.ifmap = wiring.ifmap(cfg, self.ifmaps)
        self.localizer.targets = {s.dpid: s.ofctl for s in cfg.switches if s.ofctl}
        self.localizer.ofctl = ofctl_path(cfg.ovs.bin_dir)
        if self.proxy is not None:
            self.proxy.config.group_twice = cfg.agents.group_twice
        self.model.set_host_macs(cfg.fuzz.host_macs)
        if self.fuzzer is not None:
            self.fuzzer.set_rate(cfg.fuzz.rate)
            self.fuzzer.window_s = cfg.fuzz.window
            self.fuzzer.confirm_share = cfg.agents.share
            self._fuzz_critical(cfg)
        if self.probes is not None:
            self.probes.rate = max(cfg.fuzz.rate * cfg.agents.share, 1.0)
        self.cfg = self.svc.cfg = cfg
        for c in self.checks:
            c.reload(cfg, old)
        running = {type(c) for c in self.checks}
        for cls in REGISTRY:  # a check the new config turns on (apps added, say)
            if cls not in running:
                self._start_check(cls, cfg)
        if self.workers is not None:
            self.workers.recycle()
        self.last_config_error = None
        self.last_reload_warnings = warnings
        self.metrics.config_load_error.set(0)
        self.metrics.config_reloads.labels("warnings" if warnings else "ok").inc()
        self.metrics.set_config_hash(config_hash(self.config_path))
        self.reloads += 1
        if warnings:
            log.warning(
                "config reloaded from %s with warnings: %s", self.config_path, "; ".join(warnings)
            )
            self.notifier.ready(f"config reloaded with warnings: {'; '.join(warnings)}")
        else:
            log.info("config reloaded from %s", self.config_path)
            self.notifier.ready("config reloaded")
        return True

    async def _retry_ifmaps(self) -> None:
        """Read the stale OVSDBs whose retry is due; put a map read again in force."""
        try:
            async with self._reload_lock:  # a reload reads them all meanwhile
                loop = asyncio.get_running_loop()
                before = len(self.ifmaps.stale())
                await loop.run_in_executor(None, self.ifmaps.refresh, self.cfg, True)
                if len(self.ifmaps.stale()) < before:
                    self.tester.ifmap = wiring.ifmap(self.cfg, self.ifmaps)
                    if self.workers is not None:  # they read the map when they start
                        self.workers.recycle()
        except Exception:
            log.exception("sFlow ifIndex map retry failed")
        finally:
            self._ifmap_retrying = False

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
                remove_token_file(self.ui_token_path, self.ui.token)
            for store in (self.store, self.findings):
                if store is not None:
                    store.close()
            if self._lock_fd is not None:  # the lock file stays: unlinking it would race
                os.close(self._lock_fd)
                self._lock_fd = None
            self._release()

    def _release(self) -> None:
        """Break the reference cycles through the daemon's callbacks, so that the model
        and everything holding its BDDs go by reference counting once the daemon goes:
        the cyclic collector may free the BDD manager before the nodes (dd then keeps all
        of the manager's memory)."""
        if self.tester is not None:
            t = self.tester
            t.on_fault = t.on_localize = t.on_suspect = t.on_unexplained = None
            self.tester.watches.clear()
        if self.proxy is not None:
            self.proxy.on_switch = self.proxy.on_audit = None
            self.proxy.model = None  # the proxy's parts refer to each other
            for subscribers in vars(self.proxy.hooks).values():
                subscribers.clear()
        if self.probes is not None:
            self.probes.jobs.clear()  # their verdict callbacks hold the checks
        self.checks = []
        self.svc = None
        self.model_server = self.collector = self.api = None
