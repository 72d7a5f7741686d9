"""An emulated PAZZ network, built with Mininet: patched userspace OVS bridges, veth links,
hosts in network namespaces, sFlow to a collector on 127.0.0.1. Used by `python -m
pazzlab.demo` and by the daemon's integration test.

    lab = Lab(ovs_prefix, workdir, kind="grid", size=2)
    lab.start()                      # bridges, links, hosts, sFlow (empty flow tables)
    lab.install_rules()              # the generator's rules with ovs-ofctl, or instead:
    lab.set_controller("tcp:127.0.0.1:6653")   # a controller (pazzd's proxy) installs them
    lab.snapshot()                   # what is on the switches now is what restore() puts back
    lab.write_config("pazzd.yaml", sflow_port=..., api_socket=...)
    lab.ofctl(1, "add-flow", "priority=100,ip,nw_dst=10.0.1.7,actions=output:2")
    lab.restore()                    # put the intended entries back on every bridge
    lab.stop()                       # Mininet network, namespace names, OVS processes

The topology (a 2x2 or 4x4 grid, a k=4 fat-tree: pazzdata.workloads) becomes a Mininet network
(`lab.net`, pazzlab.labnet): Mininet hosts (a shell in a new network namespace each), veth
links and one OVSSwitch per switch whose bridge lives in the lab's own ovs-vswitchd
(OvsInstance: private ovsdb-server and ovs-vswitchd, netdev datapath, run directory under
the work directory; the system's OVS is never used, Mininet's ovs-vsctl calls go to the
private database). Bridge pz<tag>s<dpid> has dpid N for switch N, the topology's port
numbers as OpenFlow ports (interfaces pz<tag>s<dpid>-<port>), `verify-tagging` on, and
`verify-edge` and `verify-probe=trust` (the fuzzer's marked probes keep their mark) on the
host ports; the tag is unique on the machine, so names never clash
with another lab's. Links get MTU 1508 (host MTU + the 8-byte Verify shim). Host k
(h1, h2, ...) has eth0 with address 10.0.(k-1).1/8 and MAC 02:00:00:00:HH:LL; the workload
routes /24 prefixes 10.0.i.0/24 to host i mod hosts (pazzdata.workloads). Each host's namespace
is named pz<tag>-<host name> (`ip netns attach`), so that `ip netns exec` (tcpreplay) and pazzd's
fuzzer (`netns:NAME:eth0`) reach it. stop() removes exactly what start() made, also after
a failed start: Mininet's own `mn -c` would remove every Mininet network on the machine.
The single-bridge OVS tests use the lower-level OvsInstance, Netns and VethPair
(pazzlab.ovs) directly.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import ipaddress
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import yaml

from cpc import yamlpos
from cpc.ofctl import format_flow, format_group, read_rules
from cpc.rules import FlowEntry, ModelError
from cpc.topology import TopologyError, load_topology
from pazzdata import workloads

from .ovs import (
    AGENT,
    LINK_MTU,
    Cleanup,
    Netns,
    OvsInstance,
    free_udp_port,
    run,
)

__all__ = ["HostAddr", "Lab", "LabError", "load_network"]


def dotted(ip: int) -> str:
    return socket.inet_ntoa(ip.to_bytes(4, "big"))


def _fresh_tag() -> str:
    """4 hex digits that no other lab's interfaces or namespaces (pz<tag>...) carry now."""
    while True:
        tag = secrets.token_hex(2)
        taken = [*os.listdir("/sys/class/net")]
        with contextlib.suppress(OSError):
            taken += os.listdir("/run/netns")
        if not any(n.startswith(f"pz{tag}") for n in taken):
            return tag


class LabError(ValueError):
    """A topology or rule file the lab cannot build; the message names file, line, field."""


@dataclasses.dataclass(frozen=True)
class HostAddr:
    ip: str  # 10.0.1.2
    prefixlen: int
    mac: str

    @property
    def cidr(self) -> str:
        return f"{self.ip}/{self.prefixlen}"


def default_addr(k: int) -> HostAddr:
    """Host k (1, 2, ...) of a lab: 10.0.(k-1).1/8, MAC 02:00:00:00:HH:LL."""
    ip = f"10.{(k - 1) >> 8 & 0xFF}.{(k - 1) & 0xFF}.1"
    return HostAddr(ip, 8, f"02:00:00:00:{k >> 8 & 0xFF:02x}:{k & 0xFF:02x}")


def load_network(topology, rules) -> tuple[workloads.Workload, dict[str, HostAddr]]:
    """A lab network from the daemon's files: the topology YAML (cpc.topology) and a rule
    file (JSON lines or dump-flows text, cpc.ofctl.read_rules). Every edge port gets a host,
    named after the edge's `name` (else h<k>), with the address of its optional `host:`
    key, `{ip: 10.0.1.2/24, mac: 02:..}`; without one, host k (edge ports in order of dpid
    and port) gets default_addr(k). Errors name the file, the line and the field."""
    try:
        topo = load_topology(topology)
        doc = yamlpos.load(topology)
    except (TopologyError, yamlpos.YamlError) as e:
        raise LabError(str(e)) from None
    items = {}  # edge port -> its item in the file (for `host:` and line numbers)
    edge_list = doc.get("edge") or []
    for i, item in enumerate(edge_list):
        port = item.get("port") if isinstance(item, dict) else item
        items[topo.resolve_port(port)] = (edge_list, i, item)
    hosts: dict[str, tuple[int, int]] = {}
    addrs: dict[str, HostAddr] = {}
    seen_ip: dict[str, str] = {}
    seen_mac: dict[str, str] = {}
    for k, port in enumerate(topo.edge_ports(), 1):
        lst, i, item = items[port]
        where = f"{topology}:{yamlpos.line_of(lst, i)}"
        name = topo.edges[port]
        if name == topo.port_name(port):
            name = f"h{k}"
        if name in hosts:
            raise LabError(f"{where}: edge.name: host name {name!r} is used twice")
        addr = default_addr(k)
        spec = item.get("host") if isinstance(item, dict) else None
        if isinstance(item, dict) and "host" in item:
            where = f"{topology}:{yamlpos.line_of(item, 'host')}"
            if not isinstance(spec, dict) or not set(spec) <= {"ip", "mac"} or "ip" not in spec:
                raise LabError(
                    f"{where}: edge.host: a mapping {{ip: A.B.C.D/LEN, mac: "
                    f"XX:XX:XX:XX:XX:XX}} (mac optional), not {spec!r}"
                )
            try:
                iface = ipaddress.IPv4Interface(str(spec["ip"]))
            except ValueError:
                raise LabError(
                    f"{where}: edge.host.ip: {spec['ip']!r} is not an IPv4 "
                    "address with a prefix length (A.B.C.D/LEN)"
                ) from None
            net = iface.network
            edge_addr = iface.ip in (net.network_address, net.broadcast_address)
            if "/" not in str(spec["ip"]) or edge_addr and net.prefixlen < 31:
                raise LabError(
                    f"{where}: edge.host.ip: {spec['ip']!r} is not a host "
                    "address with a prefix length (A.B.C.D/LEN)"
                )
            mac = str(spec.get("mac", addr.mac)).lower()
            if not re.fullmatch(r"([0-9a-f]{2}:){5}[0-9a-f]{2}", mac) or int(mac[:2], 16) & 1:
                raise LabError(
                    f"{where}: edge.host.mac: {spec['mac']!r} is not a unicast "
                    "MAC address (XX:XX:XX:XX:XX:XX)"
                )
            addr = HostAddr(str(iface.ip), iface.network.prefixlen, mac)
        for val, seen, what in ((addr.ip, seen_ip, "ip"), (addr.mac, seen_mac, "mac")):
            if val in seen:
                raise LabError(f"{where}: edge.host.{what}: {val} is also host {seen[val]}'s")
            seen[val] = name
        hosts[name] = port
        addrs[name] = addr
    wl = workloads.Workload(topo, hosts)
    try:
        for item in read_rules(rules):
            (wl.entries if isinstance(item, FlowEntry) else wl.groups).append(item)
    except ModelError as e:
        raise LabError(str(e)) from None
    _check_rules(wl, topology)
    return wl, addrs


def _check_rules(wl: workloads.Workload, topology) -> None:
    """Every rule on a switch of the topology, outputs to its ports, groups defined."""
    topo = wl.topo
    groups = {(g.dpid, g.group_id) for g in wl.groups}
    for item in [*wl.groups, *wl.entries]:
        sw = topo.switches.get(item.dpid)
        if sw is None:
            raise LabError(f"{item.source}: dpid: switch {item.dpid} is not in {topology}")
        if isinstance(item, FlowEntry):
            ins = item.instructions
            acts = [*ins.apply, *ins.write]
            if item.match.in_port is not None and item.match.in_port not in sw.ports:
                raise LabError(
                    f"{item.source}: in_port: {sw.name} has no port "
                    f"{item.match.in_port} in {topology}"
                )
        else:
            acts = [a for b in item.buckets for a in b]
        for a in acts:
            if a[0] == "output" and a[1] < 0xFFFFFF00 and a[1] not in sw.ports:
                raise LabError(f"{item.source}: output: {sw.name} has no port {a[1]} in {topology}")
            if a[0] == "group" and (item.dpid, a[1]) not in groups:
                raise LabError(
                    f"{item.source}: group: {sw.name} has no group {a[1]} in the rule file"
                )


class Lab:
    def __init__(
        self,
        prefix,
        workdir,
        *,
        kind: str = "grid",
        size: int = 2,
        rules: int = 100,
        acls: int = 2,
        sampling: int = 1,
        polling: int = 1,
        seed: int = 1,
        network: tuple[workloads.Workload, dict[str, HostAddr]] | None = None,
    ) -> None:
        self.prefix = str(prefix)
        self.workdir = Path(workdir)
        self.kind, self.size = kind, size
        self.sources: tuple[Path, Path] | None = None  # (topology, rules) of from_files()
        if network is None:
            self.wl = workloads.generate(kind, size, rules, seed=seed, rule_ids=True, acls=acls)
            self.addrs = {h: default_addr(int(h[1:])) for h in self.wl.hosts}
        else:
            self.wl, self.addrs = network
            self.kind = "file"
        self.topo = self.wl.topo
        # Host k in the order of edge ports (its default address; see host_node).
        order = sorted(self.wl.hosts, key=lambda h: self.wl.hosts[h])
        self._host_no = (
            {h: int(h[1:]) for h in order}
            if network is None
            else {h: k for k, h in enumerate(order, 1)}
        )
        # Switch numbers in interface names: the dpid when short (the generated networks),
        # else the switch's position in dpid order (real dpids are 64-bit numbers).
        dpids = sorted(self.topo.switches)
        small = dpids[-1] < 1000
        self._sw_no = {d: d if small else i for i, d in enumerate(dpids, 1)}
        self.sampling, self.polling = sampling, polling
        self.cleanup = Cleanup()
        self.tag = _fresh_tag()
        self.ovs: OvsInstance | None = None
        self.net = None  # the Mininet network (pazzlab.labnet.LabNet), after start()
        self._host_ns: list[Netns] = []
        self.hosts: dict[str, dict] = {}  # name -> {ns, port, ip, mac}
        self.ports: dict[tuple[int, int], str] = {}  # (dpid, port) -> interface
        self.flow_files: dict[int, Path] = {}
        self.installed_ids: dict[tuple, int] = {}  # (dpid, table, priority, match) -> ID
        self.sflow_port = 0
        self.topology_file = self.workdir / "topology.yaml"
        self.rules_file = self.workdir / "rules.jsonl"

    @classmethod
    def from_files(cls, prefix, workdir, topology, rules, **kw) -> Lab:
        """A lab of any network: the daemon's topology YAML and rule file (load_network)."""
        lab = cls(prefix, workdir, network=load_network(topology, rules), **kw)
        lab.sources = (Path(topology), Path(rules))
        return lab

    # --- naming -------------------------------------------------------------------------------
    def br(self, dpid: int) -> str:
        """Bridge names are unique per lab: the netdev datapath makes a tap device per
        bridge in the root namespace, where another lab's `br1` may already exist."""
        return f"pz{self.tag}s{self._sw_no[dpid]}"

    def port_ifname(self, dpid: int, port: int) -> str:
        """The root-namespace interface on (dpid, port): pz<tag>s<dpid>-<port>, or
        pz<tag>s<dpid>i<index> when the port number is too long for 15 characters."""
        name = f"{self.br(dpid)}-{port}"
        return (
            name if len(name) <= 15 else f"{self.br(dpid)}i{self.topo.ports_of(dpid).index(port)}"
        )

    def host_node(self, name: str) -> str:
        """The Mininet host, and the name of its network namespace: pz<tag>-<host name>
        (pz<tag>-h<k> for a name that is not a plain word: k in the order of edge ports)."""
        if not re.fullmatch(r"[A-Za-z0-9_.]{1,32}", name):
            name = f"h{self._host_no[name]}"
        return f"pz{self.tag}-{name}"

    def host_index(self, name: str) -> int:
        return self._host_no[name]

    def host_ip(self, name: str) -> str:
        return self.addrs[name].ip

    def host_mac(self, name: str) -> str:
        return self.addrs[name].mac

    def mgmt(self, dpid: int) -> str:
        return f"unix:{self.ovs.rundir / (self.br(dpid) + '.mgmt')}"

    def owner(self, net: int) -> str:
        return self.wl.prefixes[net & 0xFFFFFF00]

    # --- lifecycle ------------------------------------------------------------------------------
    def start(self, say: Callable[[str], None] = lambda s: None) -> Lab:
        for tool in ("mnexec", "ifconfig"):
            if shutil.which(tool) is None:
                raise RuntimeError(
                    f"{tool} is missing: the lab needs Mininet (apt-get install "
                    "mininet, see deploy/apt-packages.txt)"
                )
        from .labnet import LabNet, OvsBridge, Topo  # Mininet only where a lab is built

        c = self.cleanup
        self.workdir.mkdir(parents=True, exist_ok=True)
        if self.sources is None:
            self.wl.write(self.topology_file, self.rules_file)
        else:  # the operator's own files, as they are (comments, `host:` keys)
            shutil.copyfile(self.sources[0], self.topology_file)
            shutil.copyfile(self.sources[1], self.rules_file)
        c.push(self._remove_leftovers)  # runs last
        self.ovs = OvsInstance(self.prefix, self.workdir / "ovs")
        c.push(self.ovs.stop)
        self.ovs.start(say=say)  # waits its turn for the userspace datapath
        topo, mn = self.topo, Topo()
        # fail_mode=secure: the flow tables hold what the controller (or install_rules)
        # put there and nothing else. In standalone mode OVS would turn a bridge into a
        # learning switch (a hidden NORMAL flow) whenever it has no controller connection,
        # e.g. before pazzd's proxy is up or while it restarts: traffic would then be
        # forwarded by rules no controller intended, which is exactly what pazzd reports.
        for d in sorted(topo.switches):
            mn.addSwitch(
                self.br(d),
                cls=OvsBridge,
                ovs=self.ovs,
                dpid=f"{d:016x}",
                failMode="secure",
                protocols="OpenFlow10,OpenFlow13",
            )
        for (a, pa), (b, pb) in sorted(topo.links.items()):
            if (a, pa) < (b, pb):
                mn.addLink(
                    self.br(a),
                    self.br(b),
                    pa,
                    pb,
                    intfName1=self.port_ifname(a, pa),
                    intfName2=self.port_ifname(b, pb),
                    mtu=LINK_MTU,
                )
        hosts = sorted(self.wl.hosts.items(), key=lambda h: self.host_index(h[0]))
        for name, (dpid, port) in hosts:
            node = self.host_node(name)
            mn.addHost(node, ip=self.addrs[name].cidr, mac=self.host_mac(name))
            mn.addLink(
                node,
                self.br(dpid),
                0,
                port,
                intfName1="eth0",
                intfName2=self.port_ifname(dpid, port),
                addr1=self.host_mac(name),
            )
        self.net = net = LabNet(mn)
        c.push(self._delete_host_names)
        c.push(net.stop)  # runs first: links, bridges, host shells
        net.build()  # hosts (shells in new namespaces), veth links
        for name, (dpid, port) in hosts:
            ns = Netns(self.host_node(name), pid=net[self.host_node(name)].pid)
            self._host_ns.append(ns)
            self.hosts[name] = {
                "ns": ns,
                "port": (dpid, port),
                "ip": self.host_ip(name),
                "mac": self.host_mac(name),
            }
        net.start()  # the bridges and their ports, one ovs-vsctl transaction
        self.ports = {
            (d, p): self.port_ifname(d, p) for d, p in [*topo.links, *self.wl.hosts.values()]
        }
        self._check_ports()
        self._static_arp()
        say(
            f"Mininet: {len(topo.switches)} patched OVS bridges (netdev, verify-tagging), "
            f"{len(topo.links) // 2} links (veth, MTU {LINK_MTU}), {len(self.hosts)} hosts"
        )
        self.sflow_port = free_udp_port()
        cmd = [
            "--",
            "--id=@s",
            "create",
            "sflow",
            "agent=lo",
            f'target="{AGENT}:{self.sflow_port}"',
        ]
        cmd += [f"sampling={self.sampling}", "header=128", f"polling={self.polling}"]
        for d in sorted(topo.switches):
            cmd += ["--", "set", "bridge", self.br(d), "sflow=@s"]
        self.ovs.vsctl(*cmd)
        return self

    def _check_ports(self, wait: float = 20.0) -> None:
        """Every port on its OpenFlow number, without error (ovs-vsctl accepts an
        ofport_request it cannot honour). A busy ovs-vswitchd may not have numbered the
        ports when ovs-vsctl returns: wait for it, up to `wait` seconds."""
        deadline = time.monotonic() + wait
        while True:
            out = self.ovs.vsctl(
                "--format=csv",
                "--data=bare",
                "--no-headings",
                "--columns=name,ofport,error",
                "list",
                "interface",
            )
            have = {}
            for line in out.splitlines():
                name, ofport, err = (line.split(",", 2) + ["", ""])[:3]
                have[name] = (ofport, err.strip())
            bad = [
                f"{ifname}: ofport {have.get(ifname, ('missing', ''))[0]} (want {p}) "
                f"{have.get(ifname, ('', ''))[1]}".strip()
                for (_, p), ifname in sorted(self.ports.items())
                if have.get(ifname) != (str(p), "")
            ]
            numbered = all(have.get(i, ("", ""))[0] not in ("", "[]") for i in self.ports.values())
            if not bad or (numbered and bad) or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        if bad:
            raise RuntimeError("bridge ports not as intended: " + "; ".join(bad))

    def _static_arp(self) -> None:
        """Every host reaches every other host's address on eth0 (a /32 route, so hosts in
        different subnets need no gateway) with a permanent ARP entry: ping works without
        ARP requests, which the flow tables (IP rules) would drop or flood."""
        for name, h in self.hosts.items():
            lines = []
            for other, o in sorted(self.hosts.items()):
                if other != name:
                    lines += [
                        f"route replace {o['ip']}/32 dev eth0",
                        f"neigh replace {o['ip']} lladdr {o['mac']} dev eth0 nud permanent",
                    ]
            if lines:
                path = self.workdir / f"arp-{self.host_index(name)}.batch"
                path.write_text("\n".join(lines) + "\n")
                h["ns"].run("ip", "-batch", str(path))

    def _delete_host_names(self) -> None:
        """The hosts' namespace names, and whatever still runs in them."""
        while self._host_ns:
            self._host_ns.pop().delete()

    def _remove_leftovers(self) -> None:
        """What is left once the Mininet network and OVS stopped, e.g. after a failed start or
        an interrupted stop: the lab's interfaces in the root namespace and the shells of its
        Mininet nodes, found by name (every name carries the lab's tag)."""
        names = [self.port_ifname(d, p) for d, p in [*self.topo.links, *self.wl.hosts.values()]]
        for ifname in [*names, *map(self.br, self.topo.switches)]:
            if Path("/sys/class/net", ifname).exists():
                run("ip", "link", "del", ifname, check=False)
        nodes = {
            f"mininet:{n}"
            for n in [*map(self.br, self.topo.switches), *map(self.host_node, self.wl.hosts)]
        }
        for d in Path("/proc").iterdir():
            if d.name.isdigit():
                with contextlib.suppress(OSError):
                    argv = (d / "cmdline").read_bytes().split(b"\0")
                    if any(a.decode(errors="replace") in nodes for a in argv):
                        os.kill(int(d.name), signal.SIGKILL)

    def install_rules(self) -> int:
        """The intended rules onto the bridges with ovs-ofctl (same entries as rules.jsonl)."""
        for g in self.wl.groups:
            self._ofctl_named(g, "add-group", self.br(g.dpid), format_group(g))
        for d in sorted(self.topo.switches):
            entries = [e for e in self.wl.entries if e.dpid == d]
            path = self.workdir / f"flows-{d}.txt"
            path.write_text("".join(format_flow(e) + "\n" for e in entries))
            self.flow_files[d] = path
            try:
                self.ovs.ofctl("add-flows", self.br(d), str(path))
            except subprocess.CalledProcessError as err:
                m = re.search(rf"{re.escape(path.name)}:(\d+)", err.stderr or "")
                e = entries[int(m.group(1)) - 1] if m and int(m.group(1)) <= len(entries) else None
                if e is not None:  # the entry alone, for its line in the rule file
                    self._ofctl_named(e, "add-flow", self.br(d), format_flow(e))
                raise LabError(
                    f"ovs-ofctl add-flows on {self.topo.switches[d].name}: "
                    f"{(err.stderr or '').strip()}"
                ) from None
        return len(self.wl.entries)

    def _ofctl_named(self, item, *args) -> None:
        """ovs-ofctl; a rejected entry or group is reported with its rule file line."""
        try:
            self.ovs.ofctl(*args)
        except subprocess.CalledProcessError as err:
            where = item.source or self.topo.switches[item.dpid].name
            raise LabError(
                f"{where}: ovs-ofctl rejects {args[-1]!r}: {(err.stderr or '').strip()}"
            ) from None

    def set_controller(self, target: str) -> None:
        """Point every bridge at an OpenFlow controller (pazzd's proxy), out of band: no
        hidden in-band flows for the controller's own traffic, and a quick first retry."""
        for d in sorted(self.topo.switches):
            self.ovs.vsctl(
                "set-controller",
                self.br(d),
                target,
                "--",
                "set",
                "controller",
                self.br(d),
                "connection-mode=out-of-band",
                "max_backoff=1000",
                "inactivity_probe=0",
            )

    def controllers_connected(self) -> dict[int, bool]:
        """Per dpid: does OVSDB say the bridge's controller connection is up?"""
        out = {}
        for d in sorted(self.topo.switches):
            v = self.ovs.vsctl("--if-exists", "get", "controller", self.br(d), "is_connected")
            out[d] = v.strip() == "true"
        return out

    def dump_flows(self, dpid: int) -> list[str]:
        """The bridge's flow table in ovs-ofctl syntax (no counters)."""
        text = self.ovs.ofctl("dump-flows", "--no-stats", self.br(dpid))
        return [
            ln.strip()
            for ln in text.splitlines()
            if ln.strip() and not ln.lstrip().startswith(("OFPST_", "NXST_"))
        ]

    def snapshot(self) -> int:
        """Take the bridges' current flow tables as what restore() puts back, and note
        the rule ID each intended entry carries on its switch (pazzd's proxy gives its
        own IDs to what the controller sends). Returns the number of entries."""
        from cpc.ofctl import parse_flow

        self.installed_ids = {}
        n = 0
        for d in sorted(self.topo.switches):
            lines = self.dump_flows(d)
            path = self.workdir / f"flows-{d}.txt"
            path.write_text("".join(ln + "\n" for ln in lines))
            self.flow_files[d] = path
            for ln in lines:
                e = parse_flow(ln, d).entry()
                self.installed_ids[(d, e.table, e.priority, e.match)] = e.rule_id
            n += len(lines)
        return n

    def intended_entries(self) -> list:
        """The generator's entries, with the rule IDs the switches carry (after snapshot())."""
        if not self.installed_ids:
            return list(self.wl.entries)
        return [
            dataclasses.replace(
                e,
                rule_id=self.installed_ids.get((e.dpid, e.table, e.priority, e.match), e.rule_id),
            )
            for e in self.wl.entries
        ]

    def restore(self) -> None:
        for dpid, path in self.flow_files.items():
            self.ovs.ofctl("replace-flows", self.br(dpid), str(path))
        self.ovs.appctl("revalidator/purge")

    def ofctl(self, dpid: int, cmd: str, *args) -> str:
        out = self.ovs.ofctl(cmd, self.br(dpid), *args)
        if cmd in ("add-flow", "mod-flows", "del-flows", "add-flows", "replace-flows"):
            self.ovs.appctl("revalidator/purge")
        return out

    def ofctl_many(self, calls) -> None:
        """(dpid, cmd, *args) ovs-ofctl calls, run together (a change over many switches
        lands within one call's time, not their sum), then one revalidator purge."""
        calls = list(calls)
        with ThreadPoolExecutor(max_workers=min(8, len(calls) or 1)) as ex:
            list(ex.map(lambda c: self.ovs.ofctl(c[1], self.br(c[0]), *c[2:]), calls))
        self.ovs.appctl("revalidator/purge")

    def stop(self) -> None:
        self.cleanup.run()

    def __enter__(self) -> Lab:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    # --- pazzd configuration ------------------------------------------------------------------------
    def config(
        self,
        *,
        sflow_port: int | None = None,
        api_socket: str,
        database: str,
        metrics_port: int = 0,
        critical_flows=(),
        fuzz_rate: float = 0.0,
        resolve_after: float = 30.0,
        settle: float = 2.0,
        proxy_listen: str | None = None,
        controller: str | None = None,
        ui_listen: str | None = None,
        fuzz_inject: bool = True,
        extra: dict | None = None,
        controllers: dict | None = None,
    ) -> dict:
        """pazzd's config for this lab. With proxy_listen (HOST:PORT) the OpenFlow proxy is
        on, relays to `controller` (HOST:PORT) and its FlowMods feed the model; without it
        the model is loaded from the rule file. With ui_listen (HOST:PORT) the web view is on.
        fuzz_inject=False: no host interface for the fuzzer (with the proxy on, its probes go
        in as PACKET_OUTs). controllers: more keys of the controller section (name,
        controllers)."""
        cfg = {
            "topology": str(self.topology_file),
            **({} if proxy_listen else {"rules": str(self.rules_file)}),
            "controller": {"enabled": True, "listen": proxy_listen, "address": controller}
            if proxy_listen
            else {"enabled": False},
            "sflow": {
                "listen": f"{AGENT}:{sflow_port or self.sflow_port}",
                "sampling_rate": self.sampling,
            },
            "ovs": {"bin_dir": str(Path(self.ovs.bin["ovs-ofctl"]).parent)},
            "switches": [
                {
                    "switch": self.topo.switches[d].name,
                    "ofctl": self.mgmt(d),
                    "ovsdb": f"unix:{self.ovs.db_sock}",
                    "agent": AGENT,
                }
                for d in sorted(self.topo.switches)
            ],
            "fuzz": {
                "enabled": fuzz_rate > 0,
                "rate": fuzz_rate,
                "inject": {
                    self.topo.port_name(h["port"]): f"netns:{h['ns'].name}:eth0"
                    for h in self.hosts.values()
                }
                if fuzz_inject
                else {},
            },
            "critical_flows": list(critical_flows),
            "tester": {"resolve_after": resolve_after, "settle": settle, "blackhole_k": 5},
            "metrics": {"listen": f"127.0.0.1:{metrics_port}"},
            **({"ui": {"enabled": True, "listen": ui_listen}} if ui_listen else {}),
            "api": {"socket": api_socket},
            "database": database,
        }
        if proxy_listen and controllers:
            cfg["controller"].update(controllers)
        cfg.update(extra or {})  # more top-level sections (intents, apps, ...)
        return cfg

    def write_config(self, path, **kw) -> Path:
        path = Path(path)
        path.write_text(yaml.safe_dump(self.config(**kw), sort_keys=False))
        return path

    def describe(self) -> dict:
        return {
            "switches": len(self.topo.switches),
            "hosts": len(self.hosts),
            "rules": len(self.wl.entries),
            "groups": len(self.wl.groups),
            "ports": {self.topo.port_name(p): n for p, n in self.ports.items()},
        }


def dump_json(obj) -> str:
    return json.dumps(obj, indent=2, default=str)


# --- python -m pazzlab.lab --------------------------------------------------------------------
BUILTIN = {  # name -> kind, size, rules, acls (as in the demo)
    "grid4": ("grid", 2, 100, 2),
    "grid16": ("grid", 4, 400, 1),
    "fattree": ("fattree", 4, 400, 1),
}


def ovs_prefix(prog: str = "lab") -> str:
    """The patched OVS: $PAZZ_OVS_PREFIX, else the .ovs-prefix that `make ovs` writes."""
    p = os.environ.get("PAZZ_OVS_PREFIX")
    if p:
        return p
    for cand in (
        Path.cwd() / ".ovs-prefix",
        Path(__file__).resolve().parent.parent / ".ovs-prefix",
    ):
        if cand.exists():
            return cand.read_text().strip()
    raise SystemExit(f"{prog}: no patched OVS: run `make ovs` or set PAZZ_OVS_PREFIX")


class _Stop(Exception):
    pass


def lab_info(lab: Lab, config: Path | None = None) -> dict:
    """What an operator (or a test) needs to reach the lab: bridges, hosts, sockets."""
    return {
        "tag": lab.tag,
        "pid": os.getpid(),
        "run_dir": str(lab.workdir),
        "ovs_rundir": str(lab.ovs.rundir),
        "ovs_bin": str(Path(lab.ovs.bin["ovs-ofctl"]).parent),
        "ovsdb": f"unix:{lab.ovs.db_sock}",
        "appctl": str(lab.ovs.rundir / "ovs-vswitchd.ctl"),
        "sflow": f"{AGENT}:{lab.sflow_port}",
        "config": str(config) if config else None,
        "rules": len(lab.wl.entries),
        "groups": len(lab.wl.groups),
        "switches": {
            lab.topo.switches[d].name: {"dpid": d, "bridge": lab.br(d), "mgmt": lab.mgmt(d)}
            for d in sorted(lab.topo.switches)
        },
        "hosts": {
            name: {
                "netns": h["ns"].name,
                "port": lab.topo.port_name(h["port"]),
                "ip": h["ip"],
                "cidr": lab.addrs[name].cidr,
                "mac": h["mac"],
            }
            for name, h in lab.hosts.items()
        },
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m pazzlab.lab",
        description="Build an emulated network of patched OVS bridges and hosts (as root) "
        "from the daemon's topology and rule files, or a built-in one, and keep it up "
        "until Ctrl-C or SIGTERM; then remove everything it made. docs/operations.md.",
    )
    ap.add_argument(
        "--topology",
        required=True,
        metavar="FILE|" + "|".join(BUILTIN),
        help="topology YAML (pazzd's format, optional `host:` per edge port)",
    )
    ap.add_argument(
        "--rules",
        metavar="FILE",
        help="rule file (JSON lines or dump-flows text), installed with ovs-ofctl",
    )
    ap.add_argument(
        "--controller",
        metavar="TARGET",
        help="point the bridges at this OpenFlow controller (e.g. "
        "tcp:127.0.0.1:6653, pazzd's proxy) instead of installing --rules",
    )
    ap.add_argument(
        "--dir",
        metavar="DIR",
        help="where the run directory is made (default: "
        "the system's temporary directory); removed on exit",
    )
    ap.add_argument(
        "--upstream",
        metavar="HOST:PORT",
        default="127.0.0.1:6633",
        help="with --controller: where the pazzd.yaml written for the lab has its proxy "
        "relay to, your controller (default 127.0.0.1:6633); the proxy listens at "
        "--controller's address",
    )
    ap.add_argument("--sampling", type=int, default=1, help="sFlow sampling rate (1/N)")
    ap.add_argument("--keep", action="store_true", help="keep the run directory on exit")
    ap.add_argument(
        "--ready-file",
        metavar="PATH",
        help="once the lab is up, write lab.json there (atomically; removed on exit)",
    )
    args = ap.parse_args(argv)
    proxy_listen = None
    if args.controller:
        m = re.fullmatch(r"tcp:([^:]+):(\d+)", args.controller)
        if m is None:
            ap.error(f"--controller {args.controller!r}: give tcp:HOST:PORT")
        proxy_listen = f"{m[1]}:{m[2]}"
        if not re.fullmatch(r"[^:]+:\d+", args.upstream):
            ap.error(f"--upstream {args.upstream!r}: give HOST:PORT")
        if args.upstream == proxy_listen:
            ap.error("--upstream is where the controller listens, not the proxy (--controller)")

    def say(msg: str) -> None:
        print(f"lab: {msg}", flush=True)

    try:
        if args.topology in BUILTIN:
            network, sources = None, None
        else:
            if not args.rules:
                ap.error("--rules FILE is needed with a topology file")
            network, sources = load_network(args.topology, args.rules), (args.topology, args.rules)
    except LabError as e:
        print(f"lab: error: {e}", file=sys.stderr)
        return 2
    if os.geteuid() != 0:
        print("lab: run as root (network namespaces, OVS)", file=sys.stderr)
        return 2
    prefix = ovs_prefix()

    def on_signal(signum, frame):
        raise _Stop(signal.Signals(signum).name)

    sigs = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)
    before = {sig: signal.getsignal(sig) for sig in sigs}
    for sig in sigs:
        signal.signal(sig, on_signal)
    run_dir = Path(tempfile.mkdtemp(prefix="pazz-lab-", dir=args.dir))
    lab = None
    rc = 1
    try:
        if network is None:
            kind, size, n, acls = BUILTIN[args.topology]
            lab = Lab(
                prefix, run_dir, kind=kind, size=size, rules=n, acls=acls, sampling=args.sampling
            )
        else:
            lab = Lab(prefix, run_dir, network=network, sampling=args.sampling)
            lab.sources = tuple(map(Path, sources))
        say(f"run directory {run_dir}" + (" (kept)" if args.keep else " (removed on exit)"))
        lab.start(say=say)
        if args.controller:
            lab.set_controller(args.controller)
            say(f"bridges use the controller {args.controller} (out of band, fail_mode=secure)")
        else:
            n = lab.install_rules()
            say(f"{n} flow entries and {len(lab.wl.groups)} groups installed with ovs-ofctl")
        config = lab.write_config(
            run_dir / "pazzd.yaml",
            api_socket=str(run_dir / "pazzd.sock"),
            database=str(run_dir / "faults.db"),
            proxy_listen=proxy_listen,
            controller=args.upstream if proxy_listen else None,
        )
        info = lab_info(lab, config)
        (run_dir / "lab.json").write_text(json.dumps(info, indent=2))
        ofctl = f"{info['ovs_bin']}/ovs-ofctl -O OpenFlow13"
        for name, sw in info["switches"].items():
            say(
                f"switch {name} (dpid {sw['dpid']}): bridge {sw['bridge']}; "
                f"{ofctl} dump-flows {sw['mgmt']}"
            )
        for name, h in info["hosts"].items():
            say(
                f"host {name} at {h['port']}: {h['cidr']} {h['mac']}; "
                f"ip netns exec {h['netns']} ..."
            )
        say(
            f"ofproto/trace: {info['ovs_bin']}/ovs-appctl -t {lab.ovs.rundir}/ovs-vswitchd.ctl "
            f"ofproto/trace BRIDGE FLOW"
        )
        say(
            f"sFlow to {info['sflow']}; pazzd for this lab: {sys.executable} -m pazzd "
            f"--config {config}"
            + (
                f" (its proxy listens on {proxy_listen}, where the bridges connect, and "
                f"relays to your controller at {args.upstream})"
                if proxy_listen
                else ""
            )
        )
        if args.ready_file:
            ready = Path(args.ready_file)
            tmp = ready.with_name(f".{ready.name}.{os.getpid()}")
            tmp.write_text(json.dumps(info, indent=2))
            tmp.replace(ready)
        say("ready; Ctrl-C or SIGTERM removes the lab")
        while True:
            signal.pause()
    except _Stop as e:
        say(f"{e}: removing the lab")
        rc = 0
    except (LabError, RuntimeError, OSError, subprocess.SubprocessError) as e:
        detail = getattr(e, "stderr", None)
        print(f"lab: failed: {e}" + (f"\n{detail.strip()}" if detail else ""), file=sys.stderr)
        rc = 1
    finally:
        for sig in sigs:
            signal.signal(sig, signal.SIG_IGN)  # no second interruption mid-cleanup
        if args.ready_file:
            with contextlib.suppress(OSError):
                Path(args.ready_file).unlink()
        if lab is not None:
            lab.stop()
        if not args.keep:
            shutil.rmtree(run_dir, ignore_errors=True)
        for sig in sigs:
            signal.signal(sig, before[sig])
    say(
        "removed: bridges, links, host namespaces, OVS processes"
        + ("" if args.keep else ", run directory")
    )
    return rc


if __name__ == "__main__":
    sys.exit(main())
