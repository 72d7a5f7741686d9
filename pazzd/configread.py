"""The YAML reader of pazzd's config: typed values with ranges, addresses, lists of ports
and matches, TLS files; every error names the file, the line and the key (cpc.yamlpos)."""

from __future__ import annotations

import math
import socket
from dataclasses import fields

from cpc import yamlpos
from cpc.ofctl import parse_flow
from cpc.rules import FlowMod, ModelError
from cpc.topology import Topology, TopologyError

__all__ = ["ConfigError", "Reader", "as_int", "read_match", "read_section", "read_ports"]


class ConfigError(ValueError):
    pass


class Reader:
    """path: the config file; known: the keys each section may have ("" the top level)."""

    def __init__(self, path: str, known: dict[str, set[str]]) -> None:
        self.path = path
        self.known = known

    def fail(self, container, key, dotted: str, msg: str):
        line = yamlpos.line_of(container, key) if container is not None else 0
        where = f"{self.path}:{line}" if line else self.path
        raise ConfigError(f"{where}: {dotted}: {msg}")

    def items(self, doc, key: str, dotted: str) -> list:
        """The list under key ([] when absent)."""
        v = doc.get(key) or []
        if not isinstance(v, list):
            self.fail(doc, key, dotted, "must be a list")
        return v

    def section(self, doc, key: str, dotted: str):
        v = doc.get(key)
        if v is None:
            return yamlpos.PosDict()
        if not isinstance(v, dict):
            self.fail(doc, key, dotted, "must be a mapping")
        unknown = sorted(str(k) for k in v if k not in self.known.get(dotted, set()))
        if unknown:
            self.fail(v, unknown[0], f"{dotted}.{unknown[0]}", "unknown key")
        return v

    def typed(self, d, key, dotted, kind, default, lo=None, hi=None):
        if key not in d or d[key] is None:
            return default
        v = d[key]
        if kind is float and isinstance(v, int) and not isinstance(v, bool):
            v = float(v)
        if kind is bool and not isinstance(v, bool):
            self.fail(d, key, dotted, f"must be true or false, not {v!r}")
        if kind is not bool and (isinstance(v, bool) or not isinstance(v, kind)):
            self.fail(d, key, dotted, f"must be a {kind.__name__}, not {v!r}")
        if kind is float and not math.isfinite(v):  # NaN passes every range check
            self.fail(d, key, dotted, f"must be a finite number, not {v!r}")
        if lo is not None and v < lo:
            self.fail(d, key, dotted, f"must be at least {lo}")
        if hi is not None and v > hi:
            self.fail(d, key, dotted, f"must be at most {hi}")
        return v

    def address(self, d, key, dotted, default: tuple[str, int]) -> tuple[str, int]:
        if key not in d or d[key] is None:
            return default
        v = d[key]
        if isinstance(v, int) and not isinstance(v, bool):
            return default[0], self._port(d, key, dotted, v)
        if not isinstance(v, str) or ":" not in v:
            self.fail(d, key, dotted, f"must be HOST:PORT, not {v!r}")
        host, _, port = v.rpartition(":")
        host = host.strip("[]") or default[0]
        try:
            p = int(port)
        except ValueError:
            self.fail(d, key, dotted, f"bad port {port!r}")
        return host, self._port(d, key, dotted, p)

    def _port(self, d, key, dotted, p: int) -> int:
        if not 0 <= p <= 65535:
            self.fail(d, key, dotted, f"port {p} out of range 0..65535")
        return p

    def port_ref(self, topo: Topology, container, key, dotted, text) -> tuple[int, int]:
        """SWITCH:PORT of a port that the topology has on that switch."""
        try:
            p = topo.resolve_port(str(text))
        except TopologyError as e:
            self.fail(container, key, dotted, str(e))
        sw = topo.switches[p[0]]
        if p[1] not in sw.ports:
            have = ", ".join(str(n) for n in sorted(sw.ports)) or "none"
            self.fail(
                container,
                key,
                dotted,
                f"switch {sw.name} has no port {p[1]} in the topology (ports: {have})",
            )
        return p

    def port_map(self, topo: Topology, d, key, dotted, what: str) -> list[tuple]:
        """The mapping SWITCH:PORT -> value under key ({} when absent), as (port, mapping,
        its key, value): the key checked as a port of the topology."""
        m = d.get(key) or {}
        if not isinstance(m, dict):
            self.fail(d, key, dotted, f"must map SWITCH:PORT to {what}")
        return [(self.port_ref(topo, m, k, f"{dotted}.{k}", k), m, k, v) for k, v in m.items()]

    def resolvable(self, d, key, dotted, host: str) -> None:
        """A listen address that the resolver cannot turn into an address fails now, not at
        the bind."""
        try:
            socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
        except (OSError, UnicodeError) as e:
            self.fail(
                d, key, dotted, f"cannot resolve host {host!r}: {getattr(e, 'strerror', e) or e}"
            )


_KINDS = {"bool": bool, "int": int, "float": float, "str": str, "float | None": float}


def read_section(r: Reader, doc, key: str, obj):
    """The section `key` of doc (a mapping of known keys only): every field of its
    dataclass obj declared with pazzd.options.option() is read from the key of its name
    (its default when absent), within its bounds. Returns the section for the rest."""
    sec = r.section(doc, key, key)
    for f in fields(obj):
        m = f.metadata
        if m.get("option"):
            kind, default = _KINDS[f.type], getattr(obj, f.name)
            v = r.typed(sec, f.name, f"{key}.{f.name}", kind, default, lo=m["lo"], hi=m["hi"])
            setattr(obj, f.name, v)
    return sec


def read_match(r: Reader, d, key, dotted: str) -> tuple:
    """A policy's header set in ovs-ofctl match syntax ("tcp,nw_dst=10.0.2.0/24")."""
    text = d.get(key)
    if text is None or text == "any":
        return ()
    if not isinstance(text, str):
        r.fail(
            d,
            key,
            dotted,
            f"must be an ovs-ofctl match such as 'ip,nw_dst=10.0.0.0/8', not {text!r}",
        )
    try:
        fm = parse_flow(text, 0, "delete")
        fm.match.check_prerequisites()
    except ModelError as e:
        r.fail(d, key, dotted, str(e))
    if fm.match.in_port is not None or fm.table or fm.priority != FlowMod("delete", 0).priority:
        r.fail(d, key, dotted, "a header set: header fields only (no in_port, table or priority)")
    return fm.match.fields


def read_ports(r: Reader, topo: Topology, d, key, dotted: str) -> tuple:
    v = d.get(key)
    items = v if isinstance(v, list) else [v]
    out = []
    for i, text in enumerate(items):
        where = f"{dotted}[{i}]" if isinstance(v, list) else dotted
        p = r.port_ref(
            topo, v if isinstance(v, list) else d, i if isinstance(v, list) else key, where, text
        )
        if p not in topo.edges:
            r.fail(d, key, where, f"{text} is not an edge port of the topology")
        out.append(p)
    return tuple(out)


def as_int(v) -> int:
    if isinstance(v, bool):
        raise ValueError(v)
    if isinstance(v, int):
        return v
    return int(str(v), 0)
