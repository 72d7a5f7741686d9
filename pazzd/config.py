"""pazzd's configuration: one YAML file, validated as a whole before anything uses it.

Every error names the file, the line and the key (``pazzd.yaml:12: sflow.listen: ...``),
using the line-aware loader of cpc.yamlpos. `load_config(path)` returns a `Config`;
`pazzctl check-config FILE` calls it without starting anything. See docs/daemon.md for
every key; deploy/pazzd.yaml is the commented default.
"""

from __future__ import annotations

import grp
import ipaddress
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from cpc import yamlpos
from cpc.critical import CriticalFlow
from cpc.fields import MAC_GROUP_BIT, parse_header, parse_mac
from cpc.intents import Policy
from cpc.interference import App
from cpc.topology import Topology, TopologyError, load_topology

from .configread import ConfigError, Reader, as_int, read_section
from .configsections import (
    check_database,
    check_rules,
    controller_names,
    read_agents,
    read_apps,
    read_controllers,
    read_intents,
    read_tls,
)
from .options import RESTART, option
from .proxy.proxy import Controller, ProxyConfig
from .startchecks import check_start

__all__ = [
    "RESTART_ONLY",
    "SECTIONS",
    "AgentsConfig",
    "ApiConfig",
    "Config",
    "ConfigError",
    "Controller",
    "FuzzConfig",
    "IntentsConfig",
    "MetricsConfig",
    "OvsConfig",
    "ScaleoutConfig",
    "SflowConfig",
    "SwitchCfg",
    "TesterConfig",
    "UiConfig",
    "controller_names",
    "load_config",
    "set_setting",
    "setting",
]


DEFAULT_OVS_BIN_DIR = "/opt/pazz/ovs/bin"
# Every number in the config has bounds (and NaN and infinity are refused): durations
# at most an hour or a day, whichever an operator could still mean.
HOUR, DAY = 3600.0, 86400.0
U32 = (1 << 32) - 1


@dataclass(frozen=True)
class SwitchCfg:
    dpid: int
    ofctl: str | None = None  # ovs-ofctl target (bridge name or unix:/.../BR.mgmt)
    ovsdb: str | None = None  # OVSDB for the sFlow ifIndex map
    agent: str | None = None  # sFlow agent address of this switch


@dataclass(slots=True)
class SflowConfig:
    """sflow: where the datagrams arrive and what the switches sample."""

    host: str = field(default="0.0.0.0", metadata=RESTART)
    port: int = field(default=6343, metadata=RESTART)
    sampling_rate: int = option(64, lo=1, hi=1 << 20, restart=True)
    # The switches report every marked probe (patched OVS: packet-outs keep the mark, a
    # fuzz.inject interface needs other_config:verify-probe): a few copies of a probe
    # show, instead of 3N at sampling 1/N.
    marked_reports: bool = option(True, restart=True)
    interfaces: list[dict] = field(default_factory=list)
    agents: frozenset[str] | None = None  # None: datagrams of every agent accepted


@dataclass(slots=True)
class OvsConfig:
    # The patched build (docs/operations.md, "Install"); stock ovs-ofctl cannot decode
    # set_verify_rule.
    bin_dir: str = DEFAULT_OVS_BIN_DIR
    # The switches pick a SELECT group's bucket per flow by Open vSwitch 3.1's hash
    # (cpc.selecthash): a report is judged against the one path that hash takes, so a flow
    # sent down another bucket is a fault. false: any bucket's path is allowed.
    select_hash: bool = option(True, restart=True)


@dataclass(slots=True)
class FuzzConfig:
    enabled: bool = option(False)
    rate: float = option(1000.0, lo=0.0, hi=1e6)  # probes/s
    # an area counts as covered while probed within this many seconds
    window: float = option(10.0, lo=0.1, hi=DAY)
    # Of the probes, into delivered space. None: 0.2 with marked reports (the switches
    # report each probe and drop it at the network's edge), else 0 (they would reach hosts).
    delivered_share: float | None = option(None, lo=0.0, hi=0.9, restart=True)
    pairs: list[tuple[tuple[int, int], tuple[int, int]]] | None = None
    inject: dict[tuple[int, int], str] = field(default_factory=dict)
    # The host's MAC behind each edge port: the probes' source MAC from there (else the
    # MACs the rules name, else a locally administered one per ingress).
    host_macs: dict[tuple[int, int], int] = field(default_factory=dict)


@dataclass(slots=True)
class TesterConfig:
    resolve_after: float = option(60.0, lo=0.1, hi=DAY)
    settle: float = option(2.0, lo=0.0, hi=HOUR)
    blackhole_k: float = option(10.0, lo=1.0, hi=1000.0)
    blackhole_grace: float = option(0.0, lo=0.0, hi=DAY)
    # A critical flow's silence that alarms at most, whatever its measured rate (None: only
    # the false-alarm bound decides, tester.timers), and that bound per flow-hour.
    blackhole_max_silence: float | None = option(None, lo=0.1, hi=DAY)
    blackhole_false_alarms: float = option(1e-6, lo=1e-12, hi=0.1)
    workers: int = option(1, lo=1, hi=64)
    # fault samples (or re-probes) needed before a fault opens, within the window
    corroborate: int = option(2, lo=1, hi=16)
    corroborate_window: float = option(60.0, lo=0.1, hi=DAY)
    # Judge the ingress samples taken where a link arrives against the beginnings of the
    # model's paths (per-hop samples), in the tester and in its workers.
    judge_hops: bool = option(True)
    # Blackholes from the delivered group's probes that no exit reports (tester.probeloss),
    # where the switches report every marked probe; in the tester of this process only.
    probe_loss: bool = option(True, restart=True)


@dataclass(slots=True)
class MetricsConfig:
    host: str = field(default="127.0.0.1", metadata=RESTART)
    port: int = field(default=9473, metadata=RESTART)


@dataclass(slots=True)
class UiConfig:
    """The read-only web view (pazzd/ui), on its own listener."""

    enabled: bool = option(False, restart=True)
    host: str = field(default="127.0.0.1", metadata=RESTART)
    port: int = field(default=9474, metadata=RESTART)


@dataclass(slots=True)
class ApiConfig:
    socket: str = field(default="/run/pazz/pazzd.sock", metadata=RESTART)
    # The API socket's group (mode 0660): its members may use pazzctl. None: the default,
    # "pazz" if that group exists, else the process's own group.
    group: str | None = None


@dataclass(slots=True)
class IntentsConfig:
    """Checks of the intended state (cpc.intents): NoForwardingLoops over everything unless
    intents.no_loops is false, and the configured policies."""

    policies: list[Policy] = field(default_factory=list)
    confirm: bool = option(True)  # probe each new finding's witness (with the fuzzer)
    packet_ins: bool = option(True)  # NICE's invariants over the PACKET_INs the proxy relays
    forgotten_after: float = option(5.0, lo=0.1, hi=HOUR)
    resolve_after: float = option(60.0, lo=0.1, hi=DAY)


@dataclass(slots=True)
class AgentsConfig:
    """Switch agents (pazzd.checks.entries): confirm each accepted entry in the data plane."""

    confirm: bool = option(True, restart=True)
    delay: float = option(1.0, lo=0.0, hi=HOUR)  # seconds after the commit and tester.settle
    probes_per_entry: int = option(3, lo=1, hi=16)
    # of each probe batch, at most, for confirmation probes
    share: float = option(0.25, lo=0.01, hi=1.0)
    max_pending: int = option(64, lo=1, hi=4096)  # entries being probed at once; the rest wait
    group_twice: str = "refuse"  # or "warn": the proxy's group_twice, set at start


@dataclass(slots=True)
class ScaleoutConfig:
    """Scale-out over NATS JetStream (pazzd/scaleout, docs/scaling.md): with `nats` set,
    pazzd journals its model and reads the workers' reports; `pazzd collector` and
    `pazzd worker` read the same section. None: single-host, no NATS."""

    nats: str | None = field(default=None, metadata=RESTART)
    shards: int = option(16, lo=1, hi=1024, restart=True)  # sample shards (by sFlow agent)
    snapshot_every: int = option(1000, lo=1, hi=10_000_000)  # model updates per snapshot


# The YAML sections, each a dataclass of its own: key -> (its type, the keys read by hand
# besides its option() fields). The controller section is the proxy's own ProxyConfig
# (its TLS contexts and database are filled in at start). Each is a field of Config.
SECTIONS: dict[str, tuple[type, set[str]]] = {
    "controller": (
        ProxyConfig,
        {"address", "listen", "tls", "upstream_tls", "name", "controllers"},
    ),
    "sflow": (SflowConfig, {"listen", "interfaces", "agents"}),
    "ovs": (OvsConfig, {"bin_dir"}),
    "fuzz": (FuzzConfig, {"pairs", "inject", "host_macs"}),
    "tester": (TesterConfig, set()),
    "metrics": (MetricsConfig, {"listen"}),
    "ui": (UiConfig, {"listen"}),
    "api": (ApiConfig, {"socket", "group"}),
    "intents": (IntentsConfig, {"no_loops", "no_blackholes", "policies"}),
    "agents": (AgentsConfig, {"group_twice"}),
    "scaleout": (ScaleoutConfig, {"nats"}),
}


@dataclass(slots=True)
class Config:
    path: str
    topology_path: str = field(metadata=RESTART)
    topology: Topology
    rules: str | None = field(default=None, metadata=RESTART)
    controller: ProxyConfig = field(default_factory=ProxyConfig)
    sflow: SflowConfig = field(default_factory=SflowConfig)
    ovs: OvsConfig = field(default_factory=OvsConfig)
    fuzz: FuzzConfig = field(default_factory=FuzzConfig)
    tester: TesterConfig = field(default_factory=TesterConfig)
    metrics: MetricsConfig = field(default_factory=MetricsConfig)
    ui: UiConfig = field(default_factory=UiConfig)
    api: ApiConfig = field(default_factory=ApiConfig)
    intents: IntentsConfig = field(default_factory=IntentsConfig)
    agents: AgentsConfig = field(default_factory=AgentsConfig)
    scaleout: ScaleoutConfig = field(default_factory=ScaleoutConfig)
    edge_ports: list[tuple[int, int]] = field(default_factory=list)
    switches: list[SwitchCfg] = field(default_factory=list)
    critical_flows: list[CriticalFlow] = field(default_factory=list)
    database: str = field(default="/var/lib/pazz/faults.db", metadata=RESTART)
    log_level: str = "info"
    # Controller applications by cookie range or controller connection (cpc.interference);
    # [] leaves the check off.
    apps: list[App] = field(default_factory=list)
    # (writer, owner) app pairs whose overwrites are allowed (apps[].may_overwrite)
    overwrite_allowed: set[tuple[str, str]] = field(default_factory=set)
    # check-config (deep): rule-file entries whose effect differs between OpenFlow agents.
    agent_warnings: list[str] = field(default_factory=list)

    def summary(self) -> dict:
        c = self.controller
        return {
            "config": self.path,
            "topology": self.topology_path,
            "rules": self.rules,
            "controller": f"{c.controller_host}:{c.controller_port}" if c.enabled else None,
            "switches": len(self.topology.switches),
            "edge_ports": len(self.edge_ports),
            "sflow": f"{self.sflow.host}:{self.sflow.port}",
            "metrics": f"{self.metrics.host}:{self.metrics.port}",
            "api_socket": self.api.socket,
            "database": self.database,
            "fuzz": self.fuzz.enabled,
            "critical_flows": len(self.critical_flows),
        }


def _options(sec: type) -> set[str]:
    return {f.name for f in fields(sec) if f.metadata.get("option")}


# The keys each section may have ("" the top level).
KNOWN = {
    "": {
        "topology",
        "rules",
        *SECTIONS,
        "edge_ports",
        "switches",
        "critical_flows",
        "apps",
        "database",
        "log_level",
    },
    "controller.tls": {"cert", "key", "ca"},
    "controller.upstream_tls": {"ca", "cert", "key", "server_hostname"},
} | {key: _options(sec) | extra for key, (sec, extra) in SECTIONS.items()}
LOG_LEVELS = {"debug", "info", "warning", "error"}


# Settings that take effect at the next restart: a reload warns when they change and keeps
# the running instance's (the fields marked RESTART).
def _restart_only() -> tuple[str, ...]:
    top = [f.name for f in fields(Config) if f.metadata.get("restart")]
    sections = [
        f"{key}.{f.name}"
        for key, (sec, _) in SECTIONS.items()
        for f in fields(sec)
        if f.metadata.get("restart")
    ]
    return (*top, *sections)


RESTART_ONLY = _restart_only()


def setting(cfg: Config, key: str) -> Any:
    """A setting by its dotted name ("sflow.port")."""
    obj = cfg
    for part in key.split("."):
        obj = getattr(obj, part)
    return obj


def set_setting(cfg: Config, key: str, value: Any) -> None:
    *sec, name = key.split(".")
    setattr(setting(cfg, ".".join(sec)) if sec else cfg, name, value)


def load_config(path: str | Path, deep: bool = False) -> Config:
    """Read and validate the whole file; raises ConfigError naming file, line and key.

    Every read checks what the start needs of the machine (pazzd.startchecks: the API
    socket's path and directory, the database's place, the TLS files). deep: also read
    the files the start reads (the rules, the database), as `pazzctl check-config` does;
    pazzd's start reads them itself.
    """
    path = str(path)
    try:
        doc = yamlpos.load(path)
    except yamlpos.YamlError as e:
        raise ConfigError(str(e)) from None
    r = Reader(path, KNOWN)
    if doc is None:
        doc = yamlpos.PosDict()
    if not isinstance(doc, dict):
        raise ConfigError(f"{path}:1: the configuration must be a mapping")
    unknown = sorted(str(k) for k in doc if k not in KNOWN[""])
    if unknown:
        r.fail(doc, unknown[0], unknown[0], "unknown key")
    base = Path(path).resolve().parent

    def rel(p: str) -> str:
        return str(p if Path(p).is_absolute() else base / p)

    if "topology" not in doc:
        raise ConfigError(f"{path}:{getattr(doc, 'line', 1)}: topology: required key missing")
    tpath = doc["topology"]
    if not isinstance(tpath, str):
        r.fail(doc, "topology", "topology", "must be a file path")
    tpath = rel(tpath)
    try:
        topo = load_topology(tpath)
    except (TopologyError, yamlpos.YamlError) as e:
        r.fail(doc, "topology", "topology", str(e))
    cfg = Config(path=path, topology_path=tpath, topology=topo)
    secs = {key: read_section(r, doc, key, getattr(cfg, key)) for key in SECTIONS}

    rules = doc.get("rules")
    if rules is not None:
        if not isinstance(rules, str):
            r.fail(doc, "rules", "rules", "must be a file path")
        cfg.rules = rel(rules)
        if not Path(cfg.rules).exists():
            r.fail(doc, "rules", "rules", f"{cfg.rules}: no such file")

    pc = cfg.controller
    c = secs["controller"]
    pc.controller_host, pc.controller_port = r.address(
        c, "address", "controller.address", (pc.controller_host, pc.controller_port)
    )
    pc.listen_host, pc.listen_port = r.address(
        c, "listen", "controller.listen", (pc.listen_host, pc.listen_port)
    )
    if pc.enabled:
        r.resolvable(c, "listen", "controller.listen", pc.listen_host)
    # The proxy's audit: 0 = no periodic audit; at most a day, so that it still detects.
    if 0 < pc.audit_interval < 0.1:
        r.fail(
            c,
            "audit_interval",
            "controller.audit_interval",
            "must be 0 (no periodic audit) or at least 0.1",
        )
    for key, need in (("tls", ("cert", "key")), ("upstream_tls", ("ca",))):
        if c.get(key) is None:
            continue
        tls = read_tls(r, c, key, "controller", need, rel)
        if key == "tls":
            pc.tls = tls
        else:
            pc.upstream_tls = tls
    read_controllers(r, c, pc, rel)

    if doc.get("edge_ports") is not None:
        eps = doc["edge_ports"]
        if not isinstance(eps, list):
            r.fail(doc, "edge_ports", "edge_ports", "must be a list of SWITCH:PORT")
        cfg.edge_ports = [
            r.port_ref(topo, eps, i, f"edge_ports[{i}]", p) for i, p in enumerate(eps)
        ]
        for i, p in enumerate(cfg.edge_ports):
            if p not in topo.edges:
                r.fail(eps, i, f"edge_ports[{i}]", f"{eps[i]} is not an edge port of the topology")
    else:
        cfg.edge_ports = list(topo.edge_ports())

    s = secs["sflow"]
    cfg.sflow.host, cfg.sflow.port = r.address(
        s, "listen", "sflow.listen", (cfg.sflow.host, cfg.sflow.port)
    )
    r.resolvable(s, "listen", "sflow.listen", cfg.sflow.host)
    if s.get("agents") is not None:
        ags = s["agents"]
        if not isinstance(ags, list):
            r.fail(s, "agents", "sflow.agents", "must be a list of IP addresses")
        norm = set()
        for i, a in enumerate(ags):
            try:
                norm.add(ipaddress.ip_address(str(a)).compressed)
            except ValueError:
                r.fail(ags, i, f"sflow.agents[{i}]", f"not an IP address: {a!r}")
        cfg.sflow.agents = frozenset(norm)
    ifs = r.items(s, "interfaces", "sflow.interfaces")
    for i, e in enumerate(ifs):
        d = f"sflow.interfaces[{i}]"
        if not isinstance(e, dict):
            r.fail(ifs, i, d, "must be a mapping {agent, ifindex, port}")
        for k in ("agent", "ifindex", "port"):
            if k not in e:
                r.fail(ifs, i, f"{d}.{k}", "required key missing")
        dpid, port = r.port_ref(topo, e, "port", f"{d}.port", e["port"])
        try:
            ifindex = as_int(e["ifindex"])
        except (TypeError, ValueError):
            r.fail(e, "ifindex", f"{d}.ifindex", f"must be an integer, not {e['ifindex']!r}")
        if not 0 <= ifindex <= U32:
            r.fail(e, "ifindex", f"{d}.ifindex", f"must be from 0 to {U32} (32 bits)")
        ent = {"agent": str(e["agent"]), "ifindex": ifindex, "dpid": dpid, "port": port}
        if "sub_agent" in e:
            ent["sub_agent"] = r.typed(e, "sub_agent", f"{d}.sub_agent", int, 0, lo=0, hi=U32)
        cfg.sflow.interfaces.append(ent)

    o = secs["ovs"]
    cfg.ovs.bin_dir = o.get("bin_dir") or cfg.ovs.bin_dir
    if not isinstance(cfg.ovs.bin_dir, str):
        r.fail(o, "bin_dir", "ovs.bin_dir", "must be a directory path")

    sws = r.items(doc, "switches", "switches")
    seen = set()
    for i, e in enumerate(sws):
        d = f"switches[{i}]"
        if not isinstance(e, dict) or "switch" not in e:
            r.fail(sws, i, f"{d}.switch", "each entry needs `switch: NAME-or-DPID`")
        bad = sorted(str(k) for k in e if k not in {"switch", "ofctl", "ovsdb", "agent"})
        if bad:
            r.fail(e, bad[0], f"{d}.{bad[0]}", "unknown key")
        try:
            dpid = topo.resolve_switch(str(e["switch"]))
        except TopologyError as ex:
            r.fail(e, "switch", f"{d}.switch", str(ex))
        if dpid in seen:
            r.fail(e, "switch", f"{d}.switch", f"switch {e['switch']} listed twice")
        seen.add(dpid)
        for k in ("ofctl", "ovsdb", "agent"):
            if k in e and not isinstance(e[k], str):
                r.fail(e, k, f"{d}.{k}", "must be a string")
        cfg.switches.append(SwitchCfg(dpid, e.get("ofctl"), e.get("ovsdb"), e.get("agent")))

    f = secs["fuzz"]
    pairs = f.get("pairs", "all")
    if pairs != "all" and pairs is not None:
        if not isinstance(pairs, list):
            r.fail(f, "pairs", "fuzz.pairs", "must be `all` or a list of [FROM, TO]")
        cfg.fuzz.pairs = []
        for i, pr in enumerate(pairs):
            d = f"fuzz.pairs[{i}]"
            if not isinstance(pr, list) or len(pr) != 2:
                r.fail(pairs, i, d, "must be [SWITCH:PORT, SWITCH:PORT]")
            a = r.port_ref(topo, pairs, i, d, pr[0])
            b = r.port_ref(topo, pairs, i, d, pr[1])
            cfg.fuzz.pairs.append((a, b))
    for p, m, k, v in r.port_map(topo, f, "inject", "fuzz.inject", "an interface"):
        if not isinstance(v, str):
            r.fail(m, k, f"fuzz.inject.{k}", "must be IFNAME or netns:NAMESPACE:IFNAME")
        cfg.fuzz.inject[p] = v
    for p, m, k, v in r.port_map(topo, f, "host_macs", "fuzz.host_macs", "a MAC address"):
        d = f"fuzz.host_macs.{k}"
        try:
            mac = parse_mac(str(v))
        except ValueError:
            r.fail(m, k, d, f"must be a MAC address (aa:bb:cc:dd:ee:ff), not {v!r}")
        if mac & MAC_GROUP_BIT:
            r.fail(m, k, d, f"{v} is a group (multicast) address, never a host's")
        cfg.fuzz.host_macs[p] = mac

    cfs = r.items(doc, "critical_flows", "critical_flows")
    names = set()
    for i, e in enumerate(cfs):
        d = f"critical_flows[{i}]"
        if not isinstance(e, dict):
            r.fail(cfs, i, d, "must be a mapping {name, from, to, header}")
        for k in ("name", "from", "to", "header"):
            if k not in e:
                r.fail(cfs, i, f"{d}.{k}", "required key missing")
        bad = sorted(
            str(k)
            for k in e
            if k
            not in {"name", "from", "to", "header", "timeout", "match", "grace", "expect_traffic"}
        )
        if bad:
            r.fail(e, bad[0], f"{d}.{bad[0]}", "unknown key")
        name = str(e["name"])
        if name in names:
            r.fail(e, "name", f"{d}.name", f"duplicate critical flow name {name!r}")
        names.add(name)
        src = r.port_ref(topo, e, "from", f"{d}.from", e["from"])
        dst = r.port_ref(topo, e, "to", f"{d}.to", e["to"])
        if dst not in topo.edges:
            what = "a link port" if dst in topo.links else "not an edge port of the topology"
            r.fail(
                e,
                "to",
                f"{d}.to",
                f"{e['to']} is {what}: sFlow reports a flow only where "
                "it leaves the network, at an edge port",
            )
        try:
            hdr = parse_header(str(e["header"]))
        except ValueError as ex:
            r.fail(e, "header", f"{d}.header", str(ex))
        keys = e.get("match") or ["ipv4_dst"]
        if not isinstance(keys, list) or any(k not in hdr for k in keys):
            r.fail(e, "match", f"{d}.match", "must list fields set in header")
        timeout = r.typed(e, "timeout", f"{d}.timeout", float, 30.0, lo=0.1, hi=DAY)
        grace = r.typed(e, "grace", f"{d}.grace", float, None, lo=0.0, hi=DAY)
        expect = r.typed(e, "expect_traffic", f"{d}.expect_traffic", bool, False)
        cfg.critical_flows.append(
            CriticalFlow(name, src, dst, {k: hdr[k] for k in keys}, timeout, hdr, grace, expect)
        )

    read_intents(r, secs["intents"], topo, cfg)
    read_agents(r, secs["agents"], cfg)
    read_apps(r, doc, cfg)

    m = secs["metrics"]
    cfg.metrics.host, cfg.metrics.port = r.address(
        m, "listen", "metrics.listen", (cfg.metrics.host, cfg.metrics.port)
    )
    r.resolvable(m, "listen", "metrics.listen", cfg.metrics.host)
    u = secs["ui"]
    cfg.ui.host, cfg.ui.port = r.address(u, "listen", "ui.listen", (cfg.ui.host, cfg.ui.port))
    r.resolvable(u, "listen", "ui.listen", cfg.ui.host)
    a = secs["api"]
    sock = a.get("socket", cfg.api.socket)
    if not isinstance(sock, str) or not sock:
        r.fail(a, "socket", "api.socket", "must be a file path")
    cfg.api.socket = rel(sock)  # relative to the config file, like every other path
    group = a.get("group")
    if group is not None:
        if not isinstance(group, str | int) or isinstance(group, bool) or group == "":
            r.fail(a, "group", "api.group", "must be a group name or number")
        try:
            grp.getgrgid(group) if isinstance(group, int) else grp.getgrnam(group)
        except KeyError:
            r.fail(a, "group", "api.group", f"no group {group!r} on this machine")
        cfg.api.group = str(group)
    _read_nats(r, secs["scaleout"], cfg)
    db = doc.get("database", cfg.database)
    if not isinstance(db, str) or not db:
        r.fail(doc, "database", "database", "must be a file path or :memory:")
    if db == ":memory:" and cfg.tester.workers > 1:
        r.fail(
            doc,
            "database",
            "database",
            "tester.workers > 1 needs a database file (the workers share it)",
        )
    cfg.database = db if db == ":memory:" else rel(db)
    lvl = doc.get("log_level", "info")
    if not isinstance(lvl, str) or lvl.lower() not in LOG_LEVELS:
        r.fail(doc, "log_level", "log_level", f"must be one of {sorted(LOG_LEVELS)}")
    cfg.log_level = lvl.lower()
    if not cfg.controller.enabled and cfg.rules is None:
        raise ConfigError(
            f"{path}:{getattr(doc, 'line', 1)}: rules: required when controller.enabled is "
            "false (the intended rules come from a file)"
        )
    check_start(r, doc, cfg)  # what the start needs of the machine: check-config's too
    if deep:
        check_rules(r, doc, cfg)
        check_database(r, doc, cfg)
    return cfg


def describe(cfg: Config) -> dict[str, Any]:
    return cfg.summary()


def _read_nats(r: Reader, sec, cfg: Config) -> None:
    url = sec.get("nats")
    if url is None:
        return
    if not isinstance(url, str) or not url.startswith(("nats://", "tls://")):
        r.fail(sec, "nats", "scaleout.nats", "must be a NATS URL, nats://HOST:PORT")
    cfg.scaleout.nats = url
