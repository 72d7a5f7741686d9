"""pazzctl: the operator's command line.

    pazzctl trace --topology T.yaml --rules R --in DPID:PORT --header 'ipv4_dst=10.0.1.5,tcp_dst=80'
    pazzctl reach --topology T.yaml --rules R --from DPID:PORT --to DPID:PORT

Every subcommand takes --json. Errors go to stderr with the file and line at fault,
and the exit status is 2.
"""

from __future__ import annotations

import argparse
import json
import sys

from cpc.fields import FIELD_NAMES, format_value, parse_header
from cpc.model import Model
from cpc.rules import PORT_NAMES, ModelError
from cpc.topology import Topology, TopologyError, load_topology


class CliError(Exception):
    pass


def _load(args) -> tuple[Topology, Model]:
    topo = load_topology(args.topology)
    model = Model(topo)
    model.load_rules(args.rules)
    return topo, model


def _port(topo: Topology, text: str, what: str) -> tuple[int, int]:
    try:
        return topo.resolve_port(text)
    except TopologyError as e:
        raise CliError(f"{what}: {e}") from None


def _port_text(p: int | None) -> str:
    return "-" if p is None else PORT_NAMES.get(p, str(p))


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


def cmd_trace(args) -> int:
    topo, model = _load(args)
    ingress = _port(topo, args.ingress, "--in")
    try:
        header = parse_header(args.header)
    except ValueError as e:
        raise CliError(f"--header: {e}") from None
    deliveries = model.trace(ingress, header)
    if args.json:
        print(
            json.dumps(
                {"header": args.header, "outcomes": [delivery_json(topo, d) for d in deliveries]},
                indent=2,
            )
        )
        return 0
    for n, d in enumerate(deliveries, 1):
        title = f"outcome {n}: {d.kind}"
        if d.egress:
            title += f" at {topo.port_name(d.egress)} ({topo.edges.get(d.egress, '')})"
        if d.reason:
            title += f" - {d.reason}"
        if d.alternative:
            title += " [one of several SELECT choices]"
        print(title)
        rows = [("switch", "in_port", "table", "priority", "cookie", "rule_id", "out_port")]
        for h in d.hops:
            for i, r in enumerate(h.rules or [None]):
                last = i == max(0, len(h.rules) - 1)
                rows.append((
                    topo.switches[h.dpid].name if i == 0 else "",
                    str(h.in_port) if i == 0 else "",
                    "-" if r is None else str(r.table),
                    "-" if r is None else str(r.priority),
                    "-" if r is None else f"0x{r.cookie:x}",
                    "-" if r is None else str(r.rule_id),
                    _port_text(h.out_port) if last else "",
                ))  # fmt: skip
        _table(rows)
        print(f"  expected Verify_Port 0x{d.verify_port:08x}  Verify_Rule 0x{d.verify_rule:04x}\n")
    if not deliveries:
        print("no outcome (ingress port is down)")
    return 0


def cube_text(cube: dict[str, tuple[int, int]]) -> str:
    parts = [f"{f}={format_value(f, *cube[f])}" for f in FIELD_NAMES if f in cube]
    return ",".join(parts) or "any"


def cmd_reach(args) -> int:
    topo, model = _load(args)
    src = _port(topo, args.src, "--from")
    dst = _port(topo, args.dst, "--to")
    u = model.reach(src, dst)
    count = model.space.count(u)
    cubes = [cube_text(c) for c in model.space.cubes(u, limit=args.limit + 1)]
    more = len(cubes) > args.limit
    cubes = cubes[: args.limit]
    if args.json:
        print(json.dumps({"from": topo.port_name(src), "to": topo.port_name(dst), "headers": count,
                          "cubes": cubes, "truncated": more}, indent=2))  # fmt: skip
        return 0
    print(f"{topo.port_name(src)} -> {topo.port_name(dst)}: {count} headers ({count:.3e})")
    for c in cubes:
        print(f"  {c}")
    if more:
        print(f"  ... more cubes (raise --limit above {args.limit})")
    return 0


def _table(rows) -> None:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        print("  " + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="pazzctl", description="PAZZ operator tool")
    sub = p.add_subparsers(dest="command", required=True)

    def model_args(sp):
        sp.add_argument("--topology", required=True, help="topology YAML file")
        sp.add_argument(
            "--rules", required=True, help="rules: JSON lines or ovs-ofctl dump-flows text"
        )
        sp.add_argument("--json", action="store_true", help="JSON output")

    t = sub.add_parser("trace", help="follow one header through the modelled network")
    model_args(t)
    t.add_argument("--in", dest="ingress", required=True, metavar="SWITCH:PORT")
    t.add_argument("--header", required=True, help="e.g. 'ipv4_dst=10.0.1.5,ip_proto=6,tcp_dst=80'")
    t.set_defaults(func=cmd_trace)

    r = sub.add_parser("reach", help="the header space delivered from one edge port to another")
    model_args(r)
    r.add_argument("--from", dest="src", required=True, metavar="SWITCH:PORT")
    r.add_argument("--to", dest="dst", required=True, metavar="SWITCH:PORT")
    r.add_argument("--limit", type=int, default=20, help="cubes to list (default 20)")
    r.set_defaults(func=cmd_reach)
    return p


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (CliError, ModelError, TopologyError) as e:
        print(f"pazzctl: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
