"""sFlow (agent, sub-agent, ifIndex) to OpenFlow (dpid, port).

Sources, in order: each switch's OVSDB where reachable (`ovs-vsctl --db=DB
--format=json list ...`: Interface ofport and ifindex, Port to Interface,
Bridge datapath_id and ports), then a config mapping. A lookup that finds
nothing returns None; the caller counts it.
"""

from __future__ import annotations

import json
import logging
import subprocess
from collections.abc import Callable, Iterable

from cpc.results import Port

__all__ = ["IfMap", "OvsdbError", "parse_ovsdb", "probe_settings", "read_ovsdb"]

log = logging.getLogger(__name__)
ANY_SUB = -1  # matches every sub-agent id


def _cell(v):
    """Decode one OVSDB JSON cell: ["uuid", x], ["set", [...]], ["map", [...]] or an atom."""
    if isinstance(v, list) and len(v) == 2 and isinstance(v[0], str):
        kind, val = v
        if kind == "uuid":
            return val
        if kind == "set":
            return [_cell(x) for x in val]
        if kind == "map":
            return {_cell(k): _cell(x) for k, x in val}
    return v


def _table(text: str) -> list[dict]:
    doc = json.loads(text)
    heads = doc["headings"]
    return [{h: _cell(c) for h, c in zip(heads, row, strict=False)} for row in doc["data"]]


def _one(v):
    if isinstance(v, list):
        return v[0] if v else None
    return v


def _interfaces(bridges: str, ports: str, interfaces: str):
    """(dpid, ofport, Interface row) of every interface of a bridge with a datapath id,
    from `ovs-vsctl --format=json list Bridge/Port/Interface`."""
    iface_by_uuid = {r["_uuid"]: r for r in _table(interfaces)}
    port_by_uuid = {r["_uuid"]: r for r in _table(ports)}
    for br in _table(bridges):
        dpid_text = _one(br.get("datapath_id"))
        if not dpid_text:
            continue
        dpid = int(dpid_text, 16)
        bports = br.get("ports")
        bports = bports if isinstance(bports, list) else [bports]
        for pu in bports:
            port = port_by_uuid.get(pu)
            if port is None:
                continue
            ifs = port.get("interfaces")
            for iu in ifs if isinstance(ifs, list) else [ifs]:
                iface = iface_by_uuid.get(iu)
                ofport = _one(iface.get("ofport")) if iface is not None else None
                if isinstance(ofport, int) and ofport > 0:
                    yield dpid, ofport, iface


def parse_ovsdb(bridges: str, ports: str, interfaces: str) -> dict[int, Port]:
    """ifindex -> (dpid, ofport) from `ovs-vsctl --format=json list Bridge/Port/Interface`."""
    out: dict[int, Port] = {}
    for dpid, ofport, iface in _interfaces(bridges, ports, interfaces):
        ifindex = _one(iface.get("ifindex"))
        if isinstance(ifindex, int) and ifindex > 0:
            out[ifindex] = (dpid, ofport)
    return out


def probe_settings(bridges: str, ports: str, interfaces: str) -> dict[Port, str]:
    """(dpid, ofport) -> the interface's other_config:verify-probe ("" when unset): what the
    patched switch does with a probe mark arriving there (docs/verify-header.md)."""
    out: dict[Port, str] = {}
    for dpid, ofport, iface in _interfaces(bridges, ports, interfaces):
        oc = iface.get("other_config")
        out[(dpid, ofport)] = str(oc.get("verify-probe", "")) if isinstance(oc, dict) else ""
    return out


class IfMap:
    def __init__(self) -> None:
        self._map: dict[tuple[str, int, int], Port] = {}
        # other_config:verify-probe of the ports whose OVSDB was read ("" when unset)
        self.verify_probe: dict[Port, str] = {}

    def add(self, agent: str, if_index: int, port: Port, sub_agent: int = ANY_SUB) -> None:
        self._map[(agent, sub_agent, if_index)] = (int(port[0]), int(port[1]))

    def lookup(self, agent: str, sub_agent: int, if_index: int) -> Port | None:
        m = self._map
        return m.get((agent, sub_agent, if_index)) or m.get((agent, ANY_SUB, if_index))

    def ports(self) -> list[Port]:
        return sorted(set(self._map.values()))

    def entries(self) -> list[tuple[tuple[str, int, int], Port]]:
        """((agent, sub-agent, ifIndex), port) pairs, for handing the map to a worker."""
        return list(self._map.items())

    def merge(self, other: IfMap) -> None:
        """Add other's entries and probe settings (other's win where both have one)."""
        self._map.update(other._map)
        self.verify_probe.update(other.verify_probe)

    def __len__(self) -> int:
        return len(self._map)

    @classmethod
    def from_config(cls, entries: Iterable[dict]) -> IfMap:
        """Entries {agent, ifindex, dpid, port[, sub_agent]}; dpid may be int or hex text."""
        m = cls()
        for e in entries:
            dpid = e["dpid"]
            dpid = int(dpid, 16) if isinstance(dpid, str) else int(dpid)
            m.add(
                str(e["agent"]),
                int(e["ifindex"]),
                (dpid, int(e["port"])),
                int(e.get("sub_agent", ANY_SUB)),
            )
        return m

    def add_ovsdb(
        self, agent: str, mapping: dict[int, Port], probe: dict[Port, str], sub_agent: int = ANY_SUB
    ) -> None:
        """Add what read_ovsdb() read for one switch."""
        self.verify_probe.update(probe)
        for ifindex, port in mapping.items():
            self.add(agent, ifindex, port, sub_agent)

    def load_ovsdb(
        self,
        agent: str,
        db: str,
        sub_agent: int = ANY_SUB,
        run: Callable[..., subprocess.CompletedProcess] = subprocess.run,
        timeout: float = 5.0,
    ) -> int:
        """Add one switch's mapping from its OVSDB; returns the entries added, 0 if unreachable."""
        try:
            mapping, probe = read_ovsdb(db, run, timeout)
        except OvsdbError as e:
            log.warning("OVSDB %s for agent %s: %s", db, agent, e)
            return 0
        self.add_ovsdb(agent, mapping, probe, sub_agent)
        return len(mapping)


class OvsdbError(Exception):
    """An OVSDB that could not be read; the message says why."""


def read_ovsdb(
    db: str,
    run: Callable[..., subprocess.CompletedProcess] = subprocess.run,
    timeout: float = 5.0,
) -> tuple[dict[int, Port], dict[Port, str]]:
    """One switch's (ifindex -> port, port -> verify-probe) from its OVSDB, by ovs-vsctl
    (each call with `timeout`). Raises OvsdbError when it cannot be read."""
    texts = []
    for table, cols in (
        ("Bridge", "_uuid,datapath_id,ports"),
        ("Port", "_uuid,interfaces"),
        ("Interface", "_uuid,name,ofport,ifindex,other_config"),
    ):
        argv = ["ovs-vsctl", f"--db={db}", "--format=json", f"--columns={cols}", "list", table]
        try:
            res = run(argv, capture_output=True, text=True, timeout=timeout, check=False)
        except (OSError, subprocess.SubprocessError) as e:
            raise OvsdbError(f"unreachable: {e}") from None
        if res.returncode != 0:
            why = res.stderr.strip() or f"ovs-vsctl exited {res.returncode}"
            raise OvsdbError(why)
        texts.append(res.stdout)
    try:
        return parse_ovsdb(*texts), probe_settings(*texts)
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise OvsdbError(f"unreadable answer: {e}") from None
