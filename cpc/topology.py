"""Network topology: switches with their ports, links between switches, and edge ports.

YAML format (see examples/ for complete files):

    switches:
      - {name: s1, dpid: 1, ports: [1, 2, 3]}
      - {name: s2, dpid: 0x2, ports: {1: uplink, 2: host-a}}
    links:
      - [s1:1, s2:1]            # bidirectional
    edge:
      - s1:3                    # faces a host or the outside
      - {port: s2:2, name: host-a}

A port is named `SWITCH:PORT` where SWITCH is a switch name or dpid, and an edge port
also by the name it is given (`host-a`: a host). Every error names the file, the line and
the field.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import yaml

from . import yamlpos
from .results import Port


class TopologyError(ValueError):
    pass


@dataclass
class Switch:
    dpid: int
    name: str
    ports: dict[int, str] = field(default_factory=dict)  # OpenFlow port -> interface name


@dataclass
class Topology:
    switches: dict[int, Switch] = field(default_factory=dict)
    links: dict[Port, Port] = field(default_factory=dict)  # both directions
    edges: dict[Port, str] = field(default_factory=dict)  # edge port -> name of what it faces
    down: set[Port] = field(default_factory=set)  # ports reported down (PortStatus)

    # --- building -----------------------------------------------------------------------------
    def add_switch(self, dpid: int, name: str | None = None, ports=()) -> Switch:
        if dpid in self.switches:
            raise TopologyError(f"switch dpid {dpid} is defined twice")
        sw = Switch(dpid, name or f"s{dpid}", {p: f"{name or dpid}-{p}" for p in ports})
        self.switches[dpid] = sw
        return sw

    def add_link(self, a: Port, b: Port) -> None:
        for p in (a, b):
            self._check_port(p)
            if p in self.links or p in self.edges:
                raise TopologyError(f"port {self.port_name(p)} is used twice")
        self.links[a] = b
        self.links[b] = a

    def add_edge(self, p: Port, name: str = "") -> None:
        self._check_port(p)
        if p in self.links or p in self.edges:
            raise TopologyError(f"port {self.port_name(p)} is used twice")
        self.edges[p] = name or self.port_name(p)

    def _check_port(self, p: Port) -> None:
        sw = self.switches.get(p[0])
        if sw is None:
            raise TopologyError(f"unknown switch dpid {p[0]}")
        if p[1] not in sw.ports:
            sw.ports[p[1]] = f"{sw.name}-{p[1]}"

    # --- queries ------------------------------------------------------------------------------
    def ports_of(self, dpid: int) -> list[int]:
        return sorted(self.switches[dpid].ports)

    def port_name(self, p: Port) -> str:
        sw = self.switches.get(p[0])
        return f"{sw.name if sw else p[0]}:{p[1]}"

    def edge_ports(self) -> list[Port]:
        return sorted(self.edges)

    def hosts(self) -> dict[str, Port]:
        """Host name -> edge port: the names the topology gives its edge ports (`edge:
        - {port: s1:5, name: h1}`); a name given to two ports names neither."""
        seen: dict[str, list[Port]] = {}
        for p, name in self.edges.items():
            if name != self.port_name(p):
                seen.setdefault(name, []).append(p)
        return {n: ps[0] for n, ps in seen.items() if len(ps) == 1}

    def host_of(self, p: Port) -> str | None:
        """The name of the host on edge port p, if the topology names one."""
        name = self.edges.get(p)
        return name if name and name != self.port_name(p) else None

    def resolve_port(self, text: str) -> Port:
        """'s1:3', '1:3' or '0x1:3' -> (dpid, port); a host's name ('h1') -> its edge port."""
        text = str(text).strip()
        sw_text, sep, port_text = text.rpartition(":")
        error = None
        if sep:
            try:
                return self._switch_port(text, sw_text, port_text)
            except TopologyError as e:
                error = e
        named = [p for p, n in self.edges.items() if n == text and n != self.port_name(p)]
        if len(named) > 1:
            ports = ", ".join(self.port_name(p) for p in sorted(named))
            raise TopologyError(
                f"host {text!r} is on several edge ports ({ports}): give SWITCH:PORT"
            )
        if named:
            return named[0]
        if error is not None:
            raise error
        hosts = sorted(self.hosts())
        known = f"; hosts: {', '.join(hosts[:12])}{', ...' if len(hosts) > 12 else ''}"
        raise TopologyError(
            f"port {text!r} is neither a host nor SWITCH:PORT" + (known if hosts else "")
        )

    def _switch_port(self, text: str, sw_text: str, port_text: str) -> Port:
        dpid = self.resolve_switch(sw_text)
        try:
            port = int(port_text, 0)
        except ValueError:
            raise TopologyError(f"port number {port_text!r} in {text!r} is not a number") from None
        return dpid, port

    def resolve_switch(self, text: str) -> int:
        for sw in self.switches.values():
            if sw.name == text:
                return sw.dpid
        try:
            dpid = int(text, 0)
        except ValueError:
            raise TopologyError(f"unknown switch {text!r}") from None
        if dpid not in self.switches:
            raise TopologyError(f"unknown switch {text!r}")
        return dpid

    # --- files --------------------------------------------------------------------------------
    def to_yaml(self) -> str:
        data = {
            "switches": [
                {"name": s.name, "dpid": s.dpid, "ports": sorted(s.ports)}
                for s in sorted(self.switches.values(), key=lambda s: s.dpid)
            ],
            "links": [
                [self.port_name(a), self.port_name(b)]
                for a, b in sorted(self.links.items())
                if a < b
            ],
            "edge": [
                {"port": self.port_name(p), "name": n}
                if n != self.port_name(p)
                else self.port_name(p)
                for p, n in sorted(self.edges.items())
            ],
        }
        return yaml.safe_dump(data, sort_keys=False, default_flow_style=None)


def load_topology(path: str | Path) -> Topology:
    try:
        doc = yamlpos.load(path)
    except yamlpos.YamlError as e:
        raise TopologyError(str(e)) from None
    return topology_from_doc(doc, str(path))


def topology_from_doc(doc, where: str) -> Topology:
    def err(container, key, msg):
        return TopologyError(f"{where}:{yamlpos.line_of(container, key)}: {msg}")

    if not isinstance(doc, dict):
        raise TopologyError(f"{where}: a topology is a mapping with 'switches', 'links' and 'edge'")
    unknown = set(doc) - {"switches", "links", "edge"}
    if unknown:
        key = sorted(unknown)[0]
        raise err(doc, key, f"unknown key {key!r} (expected switches, links, edge)")
    topo = Topology()
    switches = doc.get("switches")
    if not isinstance(switches, list) or not switches:
        raise err(doc, "switches", "'switches' must be a non-empty list")
    for i, item in enumerate(switches):
        if not isinstance(item, dict):
            raise err(switches, i, "a switch is a mapping with name, dpid and ports")
        if "dpid" not in item:
            raise err(item, None, "switch needs a 'dpid'")
        dpid = item["dpid"]
        if isinstance(dpid, str):
            try:
                dpid = int(dpid, 0)
            except ValueError:
                raise err(item, "dpid", f"dpid {item['dpid']!r} is not a number") from None
        if not isinstance(dpid, int) or not 0 <= dpid < 1 << 64:
            raise err(item, "dpid", f"dpid {item['dpid']!r} is not a 64-bit number")
        name = str(item.get("name", f"s{dpid}"))
        ports = item.get("ports", [])
        try:
            sw = topo.add_switch(dpid, name)
        except TopologyError as e:
            raise err(item, "dpid", str(e)) from None
        if any(s.name == name for s in topo.switches.values() if s.dpid != dpid):
            raise err(item, "name", f"switch name {name!r} is used twice")
        if isinstance(ports, dict):
            pairs = list(ports.items())
        elif isinstance(ports, list):
            pairs = [(p, None) for p in ports]
        else:
            raise err(item, "ports", "'ports' is a list of port numbers or a mapping port: name")
        for p, pname in pairs:
            if not isinstance(p, int) or not 0 < p < 0xFFFFFF00:
                raise err(item, "ports", f"port {p!r} is not a valid OpenFlow port number")
            sw.ports[p] = str(pname) if pname else f"{name}-{p}"
    for i, link in enumerate(doc.get("links") or []):
        ends = [link.get("a"), link.get("b")] if isinstance(link, dict) else link
        if not isinstance(ends, list | tuple) or len(ends) != 2 or None in ends:
            raise err(doc["links"], i, "a link is [SWITCH:PORT, SWITCH:PORT]")
        try:
            topo.add_link(topo.resolve_port(ends[0]), topo.resolve_port(ends[1]))
        except TopologyError as e:
            raise err(doc["links"], i, str(e)) from None
    for i, item in enumerate(doc.get("edge") or []):
        name = ""
        if isinstance(item, dict):
            name = str(item.get("name", ""))
            item = item.get("port")
        try:
            topo.add_edge(topo.resolve_port(item), name)
        except TopologyError as e:
            raise err(doc["edge"], i, str(e)) from None
    return topo
