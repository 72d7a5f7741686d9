"""Ports, paths and fault locations as pazzctl prints them: `s1:5`, with the host's name
where the port is a host's (`s1:5 (h1)`), and a link port with the port it faces.

Built from the API's `topology` answer (pazzd.ui.data.topology_json), which pazzctl asks
pazzd for, or makes itself from a topology file; without one, ports are dpid:port.
"""

from __future__ import annotations

from cpc.rules import PORT_NAMES

__all__ = ["PortNames"]


class PortNames:
    def __init__(self, topology: dict | None = None) -> None:
        self.switch_names: dict[int, str] = {}
        self.hosts: dict[tuple[int, int], str] = {}
        self.peers: dict[tuple[int, int], str] = {}
        self.dpids: dict[str, int] = {}
        for sw in (topology or {}).get("switches", ()):
            self.switch_names[sw["dpid"]] = sw["name"]
            self.dpids[sw["name"]] = sw["dpid"]
            for p in sw["ports"]:
                key = (sw["dpid"], p["port"])
                if p.get("peer"):
                    self.peers[key] = p["peer"]
                edge = p.get("edge")
                if edge and edge != f"{sw['name']}:{p['port']}":
                    self.hosts[key] = edge

    @classmethod
    def of(cls, topo) -> PortNames:
        """From a cpc.topology.Topology."""
        from .ui.data import topology_json

        return cls(topology_json(topo))

    def switch(self, dpid: int) -> str:
        return self.switch_names.get(dpid, str(dpid))

    def port(self, dpid: int, port: int) -> str:
        """`s1:5`, or `s1:5 (h1)` for a host's port."""
        text = f"{self.switch(dpid)}:{port}"
        host = self.hosts.get((dpid, port))
        return f"{text} ({host})" if host else text

    def named(self, text: str | None) -> str:
        """A port given as `s1:5` (as pazzd's answers name ports), with its host's name."""
        if not text:
            return "-"
        sw, _, port = text.rpartition(":")
        dpid = self.dpids.get(sw)
        return self.port(dpid, int(port)) if dpid is not None and port.isdigit() else text

    def pair(self, p) -> str:
        """A port given as [dpid, port] (or as text: `s1:5`)."""
        if isinstance(p, str):
            return self.named(p)
        return "-" if not p else self.port(int(p[0]), int(p[1]))

    def in_port(self, dpid: int, port: int) -> str:
        """Where a packet enters a switch: `in_port=5 (h1)`, `in_port=4 (from s1:2)`."""
        return f"in_port={port}{self._beyond(dpid, port, 'from')}"

    def out_port(self, dpid: int, port: int | None) -> str:
        """Where it leaves: `output:5 (h2)`, `output:2 (to s2:4)`, `CONTROLLER`."""
        if port is None:
            return "-"
        if port in PORT_NAMES:
            return PORT_NAMES[port]
        return f"output:{port}{self._beyond(dpid, port, 'to')}"

    def _beyond(self, dpid: int, port: int, word: str) -> str:
        host = self.hosts.get((dpid, port))
        if host:
            return f" ({host})"
        peer = self.peers.get((dpid, port))
        return f" ({word} {peer})" if peer else ""

    def path(self, hops) -> str:
        """A path given as [[dpid, in_port, out_port], ...]: the port it enters by, the
        port it reaches each next switch by, and the port it leaves by:
        `s3:5 (h3) -> s1:3 -> s1:5 (h1)`."""
        if not hops:
            return "(no hop)"
        ports = [self.port(d, i) for d, i, _ in hops]
        d, _, out = hops[-1]
        if out is not None:
            ports.append(PORT_NAMES.get(out) or self.port(d, out))
        return " -> ".join(ports)

    def switches(self, dpids) -> str:
        return ", ".join(self.switch(int(d)) for d in dpids) or "-"

    def location(self, loc: str) -> str:
        """A fault's location key in words: `dpid:2` -> `s2`, `egress:2:5` -> `egress
        s2:5 (h2)`, `flow:1:5->2:5` -> `flow s1:5 (h1) -> s2:5 (h2)`, `candidates:1,2` ->
        `candidates s1, s2`."""
        kind, _, rest = loc.partition(":")
        try:
            if kind == "dpid":
                return self.switch(int(rest))
            if kind in ("egress", "hop", "ingress"):
                d, p = rest.split(":")
                return f"{kind} {self.port(int(d), int(p))}"
            if kind == "flow":
                a, b = rest.split("->")
                (ad, ap), (bd, bp) = a.split(":"), b.split(":")
                return f"flow {self.port(int(ad), int(ap))} -> {self.port(int(bd), int(bp))}"
            if kind in ("candidates", "path", "detour"):
                return f"{kind} {self.switches(x for x in rest.split(',') if x)}"
        except ValueError:
            pass
        return loc
