"""How the daemon builds its parts from the config: the lock, the sFlow ifIndex map, the
blackhole timers, the proxy's settings, the fuzzer and its injectors. Each function takes
what it needs and returns the part; start-up errors name the resource (StartError)."""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import grp
import logging
import os
import socket
import sqlite3
import ssl
import subprocess
import time
from dataclasses import replace
from pathlib import Path

from cpc.results import RuleRef
from tester.ifmap import IfMap, read_ovsdb
from tester.timers import BlackholeMonitor

from .config import Config, ConfigError
from .ifmaps import InterfaceMaps
from .proxy import ProxyConfig
from .proxy.proxy import tls_contexts

__all__ = [
    "StartError",
    "api_group",
    "blackhole_settings",
    "blackholes",
    "ifmap",
    "ovsdb_reader",
    "lock_instance",
    "netns_packet_socket",
    "probe_sampling",
    "proxy_config",
    "resource",
    "rules_at",
    "start_fuzzer",
    "tune_tester",
    "unmarked_injection",
]

log = logging.getLogger("pazzd")

CLONE_NEWNET = 0x40000000
DEFAULT_API_GROUP = "pazz"


class StartError(Exception):
    """A resource the start needs is unavailable; the message names it."""


def probe_sampling(cfg) -> int:
    """The rate at which the exits report a probe: 1 with marked reports, else sFlow's."""
    return 1 if cfg.sflow.marked_reports else cfg.sflow.sampling_rate


def watch_probe_loss(cfg, model, tester, fuzzer, guard) -> bool:
    """Count the delivered group's probes that no exit reports (tester.probeloss), where
    the switches report every marked probe and the group probes; True when on."""
    if not (cfg.tester.probe_loss and cfg.sflow.marked_reports and delivered_share(cfg) > 0):
        return False
    from tester.engine import watch_key
    from tester.probeloss import ProbeLoss

    def delivers(ingress, header):
        outs = model.trace(ingress, header)
        if not outs or any(d.kind != "egress" for d in outs):
            return None  # dropped, looped or to the controller somewhere: not a loss
        return [d.egress for d in outs]

    def held(header, since):
        return guard.held_until(model.classify(header), header) > since

    # A probe is handed to the injector a little before it leaves (the PACKET_OUT queue).
    loss = ProbeLoss(delivers, watch_key, held, batch=1.0, latency=1.5, replay=fuzzer.replay)
    tester.probe_loss = loss
    fuzzer.on_delivered = lambda ingress, header, area: loss.sent(
        ingress, header, area, tester.clock()
    )
    return True


def delivered_share(cfg) -> float:
    """fuzz.delivered_share as configured; by default fuzzer.plan.DELIVERED_SHARE_MARKED with
    marked reports, where the patched switches report every probe and drop it at the
    network's edge, so that probes into delivered space reach no host; else 0."""
    if cfg.fuzz.delivered_share is not None:
        return cfg.fuzz.delivered_share
    if not cfg.sflow.marked_reports:
        return 0.0
    from fuzzer.plan import DELIVERED_SHARE_MARKED  # the fuzzer is optional (scapy)

    return DELIVERED_SHARE_MARKED


@contextlib.contextmanager
def resource(what: str):
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
    with resource(f"lock file {path} (next to api.socket)"):
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


def api_group(cfg: Config) -> str | None:
    """The API socket's group: api.group, else "pazz" where that group exists."""
    if cfg.api.group is not None:
        return cfg.api.group
    try:
        grp.getgrnam(DEFAULT_API_GROUP)
    except KeyError:
        return None
    return DEFAULT_API_GROUP


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


def ovs_runner(bin_dir: str):
    """subprocess.run for an OVS tool, from bin_dir when it has it."""

    def run(argv, **kw):
        tool = Path(bin_dir) / argv[0]
        return subprocess.run([str(tool) if tool.exists() else argv[0], *argv[1:]], **kw)

    return run


def ovsdb_reader(cfg: Config):
    """read(ovsdb) for the sFlow ifIndex map (pazzd.ifmaps): by the ovs-vsctl of
    ovs.bin_dir."""
    run = ovs_runner(cfg.ovs.bin_dir)
    return lambda db: read_ovsdb(db, run)


def ifmap(cfg: Config, maps: InterfaceMaps) -> IfMap:
    """The sFlow ifIndex map in force: the config's interfaces, and each switch's OVSDB as
    last read (maps.refresh)."""
    m = maps.build(cfg)
    for msg in unmarked_injection(cfg, m):
        log.warning("%s", msg)
    return m


def unmarked_injection(cfg: Config, m: IfMap) -> list[str]:
    """The fuzz.inject ports whose switch strips the probe mark (other_config:verify-probe
    unset, as far as the switches' OVSDBs say): their probes are reported at 1/N,
    confirmations sent there see nothing, and those into delivered space reach hosts."""
    out = []
    for port in sorted(cfg.fuzz.inject):
        have = m.verify_probe.get(port)
        if have is not None and have not in ("true", "trust") and cfg.sflow.marked_reports:
            name = cfg.topology.port_name(port)
            out.append(
                f"fuzz.inject {name}: the switch port has other_config:verify-probe="
                f"{have or '(unset)'}, so it strips the probes' mark (reported at "
                f"1/{cfg.sflow.sampling_rate}, not 1/1, and delivered to hosts): set it to trust "
                '(docs/verify-header.md, "The probe mark")'
            )
    return out


def blackholes(cfg: Config, model) -> BlackholeMonitor | None:
    if not cfg.critical_flows:
        return None
    # The model derives each flow's header at its egress (rewrites applied).
    return BlackholeMonitor(
        cfg.critical_flows,
        k=cfg.tester.blackhole_k,
        now=time.time(),
        grace=cfg.tester.blackhole_grace,
        model=model,
        per_hour=cfg.tester.blackhole_false_alarms,
        max_silence=cfg.tester.blackhole_max_silence,
        # The fuzzer's probes of the flows are reported 1 in 1: judged by the probe rule.
        probe_reports=cfg.sflow.marked_reports and cfg.fuzz.enabled,
    )


def rules_at(model):
    """rules_at(dpid): the RuleRefs of the switch's intended entries, kept per version."""
    cache: dict = {"v": -1, "by": {}}

    def at(dpid: int):
        if cache["v"] != model.version:
            by: dict[int, list[RuleRef]] = {}
            for e in model.entries():
                by.setdefault(e.dpid, []).append(RuleRef(e.table, e.priority, e.cookie, e.rule_id))
            cache["by"], cache["v"] = by, model.version
        return cache["by"].get(dpid, ())

    return at


def tune_tester(t, cfg: Config) -> None:
    """A tester's settings from the config that a reload changes live: pazzd's own at
    start and on reload, each worker's at its start (a reload restarts the workers)."""
    ts = cfg.tester
    t.resolve_after, t.judge_hops = ts.resolve_after, ts.judge_hops
    t.corroborate, t.corroborate_window = ts.corroborate, ts.corroborate_window
    t.agents = cfg.sflow.agents
    topo = cfg.topology
    t.set_tag_ports((d, p) for d in topo.switches for p in topo.ports_of(d))


def blackhole_settings(cfg: Config) -> tuple:
    """What the blackhole monitor is built from (wiring.blackholes)."""
    ts = cfg.tester
    silence = (ts.blackhole_max_silence, ts.blackhole_false_alarms)
    return (list(cfg.critical_flows), ts.blackhole_k, ts.blackhole_grace, *silence)


def proxy_config(cfg: Config, config_path: str) -> ProxyConfig:
    """What the proxy runs with: the controller section, with the TLS contexts it names,
    the rules database next to the faults database and agents.group_twice."""
    pc = cfg.controller
    try:
        switch_ssl, controller_ssl = tls_contexts(pc.tls, pc.upstream_tls)
        more = []
        for c in pc.controllers:
            tls = c.tls or pc.upstream_tls
            ctx = tls_contexts(None, c.tls)[1] if c.tls else controller_ssl
            host = (tls or {}).get("server_hostname") or c.host
            more.append(replace(c, ssl=ctx, server_hostname=host))
    except (ssl.SSLError, OSError) as e:
        raise ConfigError(f"{config_path}: controller TLS: {e}") from None
    db = cfg.database
    return replace(
        pc,
        switch_ssl=switch_ssl,
        controller_ssl=controller_ssl,
        controller_server_hostname=(pc.upstream_tls or {}).get("server_hostname")
        or pc.controller_host,
        controllers=more,
        group_twice=cfg.agents.group_twice,
        db_path=str(Path(db).with_suffix(".rules.db")) if db != ":memory:" else None,
    )


def start_fuzzer(cfg: Config, model, proxy, spawn, stop_event):
    """The fuzzer and its injector: (fuzzer, injector, the ingresses it injects at, None for
    all), or (None, None, None) when it cannot run (logged). Probes go out by raw sockets
    where fuzz.inject names an interface, else by PACKET_OUT through the proxy."""
    try:
        from fuzzer.engine import Fuzzer  # optional: scapy
        from fuzzer.inject import ByIngress, QueuedPacketOut, RawSocketInjector
        from fuzzer.plan import shares_with_delivered
    except Exception as e:
        log.warning("fuzzer unavailable (%s); running without fuzz probes", e)
        return None, None, None
    socks = {}
    try:
        for port, spec in cfg.fuzz.inject.items():
            if spec.startswith("netns:"):
                _, ns, ifname = spec.split(":", 2)
                socks[port] = netns_packet_socket(ns, ifname)
        ifaces = {p: s for p, s in cfg.fuzz.inject.items() if not s.startswith("netns:")}
        injectors = set(socks) | set(ifaces)
        pairs = cfg.fuzz.pairs
        if pairs is None:
            eps = cfg.edge_ports
            pairs = [(i, e) for i in eps for e in eps if i != e]
        if proxy is None:
            pairs = [(i, e) for i, e in pairs if i in injectors]
        if not pairs:
            log.warning("fuzz: no pair has an injection interface (fuzz.inject); fuzzer off")
            return None, None, None
        injector = RawSocketInjector(ifaces, sockets=socks)
        ingresses = injectors if proxy is None else None
        if any(i not in injectors for i, _ in pairs):
            # The other ingresses get their probes by PACKET_OUT through the proxy.
            packet_out = QueuedPacketOut(proxy.send_packet_out)
            injector = ByIngress(dict.fromkeys(injectors, injector), packet_out)
            spawn(packet_out.run(stop_event))
        fuzzer = Fuzzer(
            model,
            pairs,
            rate=cfg.fuzz.rate,
            window_s=cfg.fuzz.window,
            seed=1,
            # The shares for the rate the probes are seen at: with marked reports every
            # probe is, whatever the sFlow rate (fuzzer.plan.default_shares).
            shares=shares_with_delivered(delivered_share(cfg), probe_sampling(cfg)),
        )
    except Exception as e:
        log.warning("fuzzer failed to start (%s); running without fuzz probes", e)
        return None, None, None
    log.info("fuzzer: %d pairs at %.0f probes/s", len(pairs), cfg.fuzz.rate)
    return fuzzer, injector, ingresses
