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

from .configread import ConfigError, Reader, as_int
from .configsections import (
    ControllerCfg,
    check_database,
    check_rules,
    controller_names,
    read_agents,
    read_apps,
    read_controllers,
    read_intents,
    read_tls,
)

__all__ = [
    "RESTART_ONLY",
    "Config",
    "ConfigError",
    "ControllerCfg",
    "SwitchCfg",
    "controller_names",
    "load_config",
]


DEFAULT_OVS_BIN_DIR = "/opt/pazz/ovs/bin"


@dataclass(frozen=True)
class SwitchCfg:
    dpid: int
    ofctl: str | None = None  # ovs-ofctl target (bridge name or unix:/.../BR.mgmt)
    ovsdb: str | None = None  # OVSDB for the sFlow ifIndex map
    agent: str | None = None  # sFlow agent address of this switch


RESTART = {"restart": True}  # a setting that takes effect at the next restart


@dataclass
class Config:
    path: str
    topology_path: str = field(metadata=RESTART)
    topology: Topology
    rules: str | None = field(default=None, metadata=RESTART)
    controller_enabled: bool = field(default=False, metadata=RESTART)
    controller_host: str = field(default="127.0.0.1", metadata=RESTART)
    controller_port: int = field(default=6633, metadata=RESTART)
    controller_name: str = field(
        default="", metadata=RESTART
    )  # the default controller's name; "" = HOST:PORT
    # More controllers for every switch (controller.controllers; the default one first).
    controllers: list[ControllerCfg] = field(default_factory=list, metadata=RESTART)
    listen_host: str = field(default="0.0.0.0", metadata=RESTART)
    listen_port: int = field(default=6653, metadata=RESTART)
    audit_interval: float = 30.0
    audit_delay: float = 2.0
    handshake_timeout: float = 10.0
    idle_timeout: float = 60.0
    stall_timeout: float = 30.0
    max_connections: int = 4096
    # TLS: {"cert", "key", "ca"} towards the switches (ca: require switch certificates
    # signed by it); {"ca", "cert", "key", "server_hostname"} towards the controller.
    switch_tls: dict | None = None
    controller_tls: dict | None = None
    edge_ports: list[tuple[int, int]] = field(default_factory=list)
    sflow_host: str = field(default="0.0.0.0", metadata=RESTART)
    sflow_port: int = field(default=6343, metadata=RESTART)
    sampling_rate: int = field(default=64, metadata=RESTART)
    # The switches report every marked probe (patched OVS: packet-outs keep the mark, a
    # fuzz.inject interface needs other_config:verify-probe): a few copies of a probe
    # show, instead of 3N at sampling 1/N.
    marked_reports: bool = field(default=True, metadata=RESTART)
    sflow_interfaces: list[dict] = field(default_factory=list)
    sflow_agents: frozenset[str] | None = None  # None: datagrams of every agent accepted
    switches: list[SwitchCfg] = field(default_factory=list)
    # The patched build (docs/operations.md, "Install"); stock ovs-ofctl cannot decode
    # set_verify_rule.
    ovs_bin_dir: str = DEFAULT_OVS_BIN_DIR
    fuzz_enabled: bool = False
    fuzz_rate: float = 1000.0
    fuzz_window: float = 10.0  # an area counts as covered while probed within this many seconds
    fuzz_delivered_share: float = field(
        default=0.0, metadata=RESTART
    )  # of the probes, into delivered space (they reach hosts)
    fuzz_pairs: list[tuple[tuple[int, int], tuple[int, int]]] | None = None
    fuzz_inject: dict[tuple[int, int], str] = field(default_factory=dict)
    # The host's MAC behind each edge port: the probes' source MAC from there (else the
    # MACs the rules name, else a locally administered one per ingress).
    fuzz_host_macs: dict[tuple[int, int], int] = field(default_factory=dict)
    critical_flows: list[CriticalFlow] = field(default_factory=list)
    resolve_after: float = 60.0
    settle: float = 2.0
    blackhole_k: float = 10.0
    blackhole_grace: float = 0.0
    # A critical flow's silence that alarms at most, whatever its measured rate (None: only
    # the false-alarm bound decides, tester.timers), and that bound per flow-hour.
    blackhole_max_silence: float | None = None
    blackhole_false_alarms: float = 1e-6
    tester_workers: int = 1
    corroborate: int = 2  # fault samples (or re-probes) needed before a fault opens
    corroborate_window: float = 60.0
    metrics_host: str = field(default="127.0.0.1", metadata=RESTART)
    metrics_port: int = field(default=9473, metadata=RESTART)
    ui_enabled: bool = field(
        default=False, metadata=RESTART
    )  # the read-only web view (pazzd/ui), on its own listener
    ui_host: str = field(default="127.0.0.1", metadata=RESTART)
    ui_port: int = field(default=9474, metadata=RESTART)
    api_socket: str = field(default="/run/pazz/pazzd.sock", metadata=RESTART)
    # The API socket's group (mode 0660): its members may use pazzctl. None: the default,
    # "pazz" if that group exists, else the process's own group.
    api_group: str | None = None
    database: str = field(default="/var/lib/pazz/faults.db", metadata=RESTART)
    log_level: str = "info"
    # Checks of the intended state (cpc.intents): NoForwardingLoops over everything unless
    # intents.no_loops is false, and the configured policies.
    intent_policies: list[Policy] = field(default_factory=list)
    intents_confirm: bool = True  # probe each new finding's witness (with the fuzzer)
    # NICE's invariants over the PACKET_INs the proxy relays (pazzd.packetins)
    intents_packet_ins: bool = True
    intents_forgotten_after: float = 5.0
    intents_resolve_after: float = 60.0
    # Controller applications by cookie range or controller connection (cpc.interference);
    # [] leaves the check off.
    apps: list[App] = field(default_factory=list)
    # (writer, owner) app pairs whose overwrites are allowed (apps[].may_overwrite)
    overwrite_allowed: set[tuple[str, str]] = field(default_factory=set)
    # Switch agents (pazzd.entries): confirm each accepted entry in the data plane.
    agents_confirm: bool = field(default=True, metadata=RESTART)
    agents_delay: float = 1.0  # seconds after the commit and tester.settle
    agents_probes_per_entry: int = 3
    agents_share: float = 0.25  # of each probe batch, at most, for confirmation probes
    agents_max_pending: int = 64  # entries being probed at once; the rest wait
    agents_group_twice: str = "refuse"  # or "warn" (pazzd.proxy)
    # check-config (deep): rule-file entries whose effect differs between OpenFlow agents.
    agent_warnings: list[str] = field(default_factory=list)

    def summary(self) -> dict:
        return {
            "config": self.path,
            "topology": self.topology_path,
            "rules": self.rules,
            "controller": f"{self.controller_host}:{self.controller_port}"
            if self.controller_enabled
            else None,
            "switches": len(self.topology.switches),
            "edge_ports": len(self.edge_ports),
            "sflow": f"{self.sflow_host}:{self.sflow_port}",
            "metrics": f"{self.metrics_host}:{self.metrics_port}",
            "api_socket": self.api_socket,
            "database": self.database,
            "fuzz": self.fuzz_enabled,
            "critical_flows": len(self.critical_flows),
        }


KNOWN = {
    "": {
        "topology",
        "rules",
        "controller",
        "edge_ports",
        "sflow",
        "switches",
        "ovs",
        "fuzz",
        "critical_flows",
        "intents",
        "agents",
        "apps",
        "tester",
        "metrics",
        "ui",
        "api",
        "database",
        "log_level",
    },
    "controller": {
        "enabled",
        "address",
        "listen",
        "audit_interval",
        "audit_delay",
        "handshake_timeout",
        "idle_timeout",
        "stall_timeout",
        "max_connections",
        "tls",
        "upstream_tls",
        "name",
        "controllers",
    },
    "controller.tls": {"cert", "key", "ca"},
    "controller.upstream_tls": {"ca", "cert", "key", "server_hostname"},
    "sflow": {"listen", "sampling_rate", "interfaces", "agents", "marked_reports"},
    "ovs": {"bin_dir"},
    "fuzz": {"enabled", "rate", "window", "delivered_share", "pairs", "inject", "host_macs"},
    "tester": {
        "resolve_after",
        "settle",
        "blackhole_k",
        "blackhole_grace",
        "blackhole_max_silence",
        "blackhole_false_alarms",
        "workers",
        "corroborate",
        "corroborate_window",
    },
    "metrics": {"listen"},
    "ui": {"enabled", "listen"},
    "api": {"socket", "group"},
    "intents": {
        "no_loops",
        "no_blackholes",
        "confirm",
        "policies",
        "packet_ins",
        "forgotten_after",
        "resolve_after",
    },
    "agents": {"confirm", "delay", "probes_per_entry", "share", "max_pending", "group_twice"},
}
LOG_LEVELS = {"debug", "info", "warning", "error"}


# Settings that take effect at the next restart: a reload warns when they change and keeps
# the running instance's (the fields marked RESTART).
RESTART_ONLY = tuple(f.name for f in fields(Config) if f.metadata.get("restart"))


def load_config(path: str | Path, deep: bool = False) -> Config:
    """Read and validate the whole file; raises ConfigError naming file, line and key.

    deep: also read the files the start reads (the rules, the database), as
    `pazzctl check-config` does; pazzd's start reads them itself.
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

    rules = doc.get("rules")
    if rules is not None:
        if not isinstance(rules, str):
            r.fail(doc, "rules", "rules", "must be a file path")
        cfg.rules = rel(rules)
        if not Path(cfg.rules).exists():
            r.fail(doc, "rules", "rules", f"{cfg.rules}: no such file")

    c = r.section(doc, "controller", "controller")
    cfg.controller_enabled = r.typed(c, "enabled", "controller.enabled", bool, False)
    cfg.controller_host, cfg.controller_port = r.address(
        c, "address", "controller.address", ("127.0.0.1", 6633)
    )
    cfg.listen_host, cfg.listen_port = r.address(
        c, "listen", "controller.listen", ("0.0.0.0", 6653)
    )
    if cfg.controller_enabled:
        r.resolvable(c, "listen", "controller.listen", cfg.listen_host)
    # The proxy's audit: 0 = no periodic audit; at most a day, so that it still detects.
    cfg.audit_interval = r.typed(
        c, "audit_interval", "controller.audit_interval", float, 30.0, lo=0.0, hi=86400.0
    )
    if 0 < cfg.audit_interval < 0.1:
        r.fail(
            c,
            "audit_interval",
            "controller.audit_interval",
            "must be 0 (no periodic audit) or at least 0.1",
        )
    cfg.audit_delay = r.typed(
        c, "audit_delay", "controller.audit_delay", float, 2.0, lo=0.0, hi=3600.0
    )
    # Hostile or broken peers (docs/reliability.md): idle_timeout 0 = no idle check.
    cfg.handshake_timeout = r.typed(
        c, "handshake_timeout", "controller.handshake_timeout", float, 10.0, lo=0.1, hi=3600.0
    )
    cfg.idle_timeout = r.typed(
        c, "idle_timeout", "controller.idle_timeout", float, 60.0, lo=0.0, hi=86400.0
    )
    cfg.stall_timeout = r.typed(
        c, "stall_timeout", "controller.stall_timeout", float, 30.0, lo=0.1, hi=86400.0
    )
    cfg.max_connections = r.typed(
        c, "max_connections", "controller.max_connections", int, 4096, lo=1, hi=1 << 20
    )
    for key, need in (("tls", ("cert", "key")), ("upstream_tls", ("ca",))):
        if c.get(key) is None:
            continue
        tls = read_tls(r, c, key, "controller", need, rel)
        if key == "tls":
            cfg.switch_tls = tls
        else:
            cfg.controller_tls = tls
    read_controllers(r, c, cfg, rel)

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

    s = r.section(doc, "sflow", "sflow")
    cfg.sflow_host, cfg.sflow_port = r.address(s, "listen", "sflow.listen", ("0.0.0.0", 6343))
    r.resolvable(s, "listen", "sflow.listen", cfg.sflow_host)
    cfg.sampling_rate = r.typed(s, "sampling_rate", "sflow.sampling_rate", int, 64, lo=1)
    cfg.marked_reports = r.typed(s, "marked_reports", "sflow.marked_reports", bool, True)
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
        cfg.sflow_agents = frozenset(norm)
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
        ent = {"agent": str(e["agent"]), "ifindex": ifindex, "dpid": dpid, "port": port}
        if "sub_agent" in e:
            ent["sub_agent"] = r.typed(e, "sub_agent", f"{d}.sub_agent", int, 0, lo=0)
        cfg.sflow_interfaces.append(ent)

    o = r.section(doc, "ovs", "ovs")
    cfg.ovs_bin_dir = o.get("bin_dir") or cfg.ovs_bin_dir
    if not isinstance(cfg.ovs_bin_dir, str):
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

    f = r.section(doc, "fuzz", "fuzz")
    cfg.fuzz_enabled = r.typed(f, "enabled", "fuzz.enabled", bool, False)
    cfg.fuzz_rate = r.typed(f, "rate", "fuzz.rate", float, 1000.0, lo=0.0)
    cfg.fuzz_window = r.typed(f, "window", "fuzz.window", float, 10.0, lo=0.1)
    cfg.fuzz_delivered_share = r.typed(
        f, "delivered_share", "fuzz.delivered_share", float, 0.0, lo=0.0, hi=0.9
    )
    pairs = f.get("pairs", "all")
    if pairs != "all" and pairs is not None:
        if not isinstance(pairs, list):
            r.fail(f, "pairs", "fuzz.pairs", "must be `all` or a list of [FROM, TO]")
        cfg.fuzz_pairs = []
        for i, pr in enumerate(pairs):
            d = f"fuzz.pairs[{i}]"
            if not isinstance(pr, list) or len(pr) != 2:
                r.fail(pairs, i, d, "must be [SWITCH:PORT, SWITCH:PORT]")
            a = r.port_ref(topo, pairs, i, d, pr[0])
            b = r.port_ref(topo, pairs, i, d, pr[1])
            cfg.fuzz_pairs.append((a, b))
    inj = f.get("inject") or {}
    if not isinstance(inj, dict):
        r.fail(f, "inject", "fuzz.inject", "must map SWITCH:PORT to an interface")
    for k, v in inj.items():
        d = f"fuzz.inject.{k}"
        p = r.port_ref(topo, inj, k, d, k)
        if not isinstance(v, str):
            r.fail(inj, k, d, "must be IFNAME or netns:NAMESPACE:IFNAME")
        cfg.fuzz_inject[p] = v
    macs = f.get("host_macs") or {}
    if not isinstance(macs, dict):
        r.fail(f, "host_macs", "fuzz.host_macs", "must map SWITCH:PORT to a MAC address")
    for k, v in macs.items():
        d = f"fuzz.host_macs.{k}"
        p = r.port_ref(topo, macs, k, d, k)
        try:
            mac = parse_mac(str(v))
        except ValueError:
            r.fail(macs, k, d, f"must be a MAC address (aa:bb:cc:dd:ee:ff), not {v!r}")
        if mac & MAC_GROUP_BIT:
            r.fail(macs, k, d, f"{v} is a group (multicast) address, never a host's")
        cfg.fuzz_host_macs[p] = mac

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
        timeout = r.typed(e, "timeout", f"{d}.timeout", float, 30.0, lo=0.1)
        grace = r.typed(e, "grace", f"{d}.grace", float, None, lo=0.0)
        expect = r.typed(e, "expect_traffic", f"{d}.expect_traffic", bool, False)
        cfg.critical_flows.append(
            CriticalFlow(name, src, dst, {k: hdr[k] for k in keys}, timeout, hdr, grace, expect)
        )

    read_intents(r, doc, topo, cfg)
    read_agents(r, doc, cfg)
    read_apps(r, doc, cfg)

    t = r.section(doc, "tester", "tester")
    cfg.resolve_after = r.typed(t, "resolve_after", "tester.resolve_after", float, 60.0, lo=0.1)
    cfg.settle = r.typed(t, "settle", "tester.settle", float, 2.0, lo=0.0)
    cfg.blackhole_k = r.typed(t, "blackhole_k", "tester.blackhole_k", float, 10.0, lo=1.0)
    cfg.blackhole_grace = r.typed(
        t, "blackhole_grace", "tester.blackhole_grace", float, 0.0, lo=0.0
    )
    cfg.blackhole_max_silence = r.typed(
        t, "blackhole_max_silence", "tester.blackhole_max_silence", float, None, lo=0.1
    )
    cfg.blackhole_false_alarms = r.typed(
        t, "blackhole_false_alarms", "tester.blackhole_false_alarms", float, 1e-6, lo=1e-12, hi=0.1
    )
    cfg.tester_workers = r.typed(t, "workers", "tester.workers", int, 1, lo=1, hi=64)
    cfg.corroborate = r.typed(t, "corroborate", "tester.corroborate", int, 2, lo=1, hi=16)
    cfg.corroborate_window = r.typed(
        t, "corroborate_window", "tester.corroborate_window", float, 60.0, lo=0.1, hi=86400.0
    )

    m = r.section(doc, "metrics", "metrics")
    cfg.metrics_host, cfg.metrics_port = r.address(
        m, "listen", "metrics.listen", ("127.0.0.1", 9473)
    )
    r.resolvable(m, "listen", "metrics.listen", cfg.metrics_host)
    u = r.section(doc, "ui", "ui")
    cfg.ui_enabled = r.typed(u, "enabled", "ui.enabled", bool, False)
    cfg.ui_host, cfg.ui_port = r.address(u, "listen", "ui.listen", ("127.0.0.1", 9474))
    r.resolvable(u, "listen", "ui.listen", cfg.ui_host)
    a = r.section(doc, "api", "api")
    sock = a.get("socket", cfg.api_socket)
    if not isinstance(sock, str) or not sock:
        r.fail(a, "socket", "api.socket", "must be a file path")
    cfg.api_socket = rel(sock)  # relative to the config file, like every other path
    group = a.get("group")
    if group is not None:
        if not isinstance(group, str | int) or isinstance(group, bool) or group == "":
            r.fail(a, "group", "api.group", "must be a group name or number")
        try:
            grp.getgrgid(group) if isinstance(group, int) else grp.getgrnam(group)
        except KeyError:
            r.fail(a, "group", "api.group", f"no group {group!r} on this machine")
        cfg.api_group = str(group)
    db = doc.get("database", cfg.database)
    if not isinstance(db, str) or not db:
        r.fail(doc, "database", "database", "must be a file path or :memory:")
    if db == ":memory:" and cfg.tester_workers > 1:
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
    if not cfg.controller_enabled and cfg.rules is None:
        raise ConfigError(
            f"{path}:{getattr(doc, 'line', 1)}: rules: required when controller.enabled is "
            "false (the intended rules come from a file)"
        )
    if deep:
        check_rules(r, doc, cfg)
        check_database(r, doc, cfg)
    return cfg


def describe(cfg: Config) -> dict[str, Any]:
    return cfg.summary()
