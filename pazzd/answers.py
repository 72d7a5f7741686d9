"""The answers of `trace` and `reach` as JSON objects: one builder for the daemon's API
(the live model) and for pazzctl's offline mode (a model loaded from files), so that both
give the same answer to the same question.

A bad argument raises QueryError with the argument's name (`arg`: "ingress", "header",
"src" or "dst", as in the API request) and the reason; each front end names the argument
its own way (the API by the request's argument, pazzctl by its option).
"""

from __future__ import annotations

from cpc.fields import FIELD_NAMES, format_value, parse_header
from cpc.model import Model
from cpc.results import Port
from cpc.topology import Topology, TopologyError


class QueryError(ValueError):
    """An argument of a trace or reach request is not a port or a header."""

    def __init__(self, arg: str, reason: str) -> None:
        super().__init__(f"{arg}: {reason}")
        self.arg = arg
        self.reason = reason


def port_arg(topo: Topology, text: str, arg: str) -> Port:
    try:
        return topo.resolve_port(str(text))
    except TopologyError as e:
        raise QueryError(arg, str(e)) from None


def header_arg(text: str, arg: str = "header") -> dict[str, int]:
    try:
        return parse_header(text)
    except ValueError as e:
        raise QueryError(arg, str(e)) from None


def delivery_json(topo: Topology, d) -> dict:
    return {
        "ingress": topo.port_name(d.ingress),
        "kind": d.kind,
        "egress": topo.port_name(d.egress) if d.egress else None,
        "reason": d.reason,
        "alternative": d.alternative,
        "verify_port": f"0x{d.verify_port:08x}",
        "verify_rule": f"0x{d.verify_rule:04x}",
        "hops": [
            {
                "dpid": h.dpid,
                "switch": topo.switches[h.dpid].name,
                "in_port": h.in_port,
                "rules": [r._asdict() for r in h.rules],
                "out_port": h.out_port,
            }
            for h in d.hops
        ],
    }


def cube_text(cube: dict[str, tuple[int, int]]) -> str:
    parts = [f"{f}={format_value(f, *cube[f])}" for f in FIELD_NAMES if f in cube]
    return ",".join(parts) or "any"


def trace(topo: Topology, model: Model, ingress: str, header: str) -> dict:
    """{"header", "outcomes": [delivery_json, ...]} of one header sent in at ingress."""
    port = port_arg(topo, ingress, "ingress")
    deliveries = model.trace(port, header_arg(header))
    return {"header": header, "outcomes": [delivery_json(topo, d) for d in deliveries]}


def reach(topo: Topology, model: Model, src: str, dst: str, limit: int) -> dict:
    """The header set the model delivers from src to dst: its size and up to `limit` cubes."""
    s, d = port_arg(topo, src, "src"), port_arg(topo, dst, "dst")
    u = model.reach(s, d)
    cubes = [cube_text(c) for c in model.space.cubes(u, limit=limit + 1)]
    return {
        "from": topo.port_name(s),
        "to": topo.port_name(d),
        "headers": model.space.count(u),
        "cubes": cubes[:limit],
        "truncated": len(cubes) > limit,
    }
