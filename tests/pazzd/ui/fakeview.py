"""The web view's server (pazzd.ui.server.UiServer) over a generated network without OVS
or a daemon: the API's answers are built by the same code pazzd uses (topology_json,
answers.trace on a Model, actual_path_json, entry_difference), and one misroute is made by
changing a route's output on one switch; the reference data plane (cpc.refdp) sends the
header through the changed tables and gives the report's tags and the packet's real path,
the oracle the page's drawing is checked against."""

from __future__ import annotations

import dataclasses
import secrets
import time
from dataclasses import dataclass

from cpc.fields import format_header, parse_header
from cpc.model import Model
from cpc.ofctl import format_flow
from cpc.refdp import RefDataPlane
from cpc.rules import Instructions
from pazzd import answers
from pazzd.ui.data import topology_json
from pazzd.ui.entrydiff import entry_difference
from pazzd.ui.paths import PathFinder, actual_path_json
from pazzd.ui.server import UiServer
from pazzdata import workloads
from tester.engine import _tags


@dataclass
class Misroute:
    fault: dict  # the API's fault answer
    real_hops: tuple  # ((dpid, in_port, out_port), ...) the packet really took
    changed_dpid: int
    got_port: int  # the output the switch now has
    want_port: int  # the intended one


def _dotted(v: int) -> str:
    return ".".join(str(v >> s & 255) for s in (24, 16, 8, 0))


def make_misroute(wl, model: Model, skip: int = 0) -> Misroute:
    """The first (after `skip`) route change on a switch of a path between two hosts that
    still brings the header to an edge port by a path that Verify_Port gives unambiguously
    (a fault the page draws as one path)."""
    dp = RefDataPlane(wl.topo, wl.entries, wl.groups)
    finder = PathFinder(wl.topo)
    hosts = sorted(wl.hosts, key=lambda h: int(h[1:]))
    nets = sorted(wl.prefixes)
    seen = 0
    for dst_net in nets:
        owner = wl.prefixes[dst_net]
        for src in hosts:
            if src == owner:
                continue
            text = f"ipv4_src=10.200.0.1,ipv4_dst={_dotted(dst_net + 9)},tcp_dst=80"
            hdr = parse_header(text)
            ingress = wl.hosts[src]
            (good,) = [d for d in dp.send(ingress, hdr) if d.kind == "egress"][:1] or [None]
            if good is None or len(good.hops) < 3:
                continue
            hop = good.hops[1]  # change the second switch's route
            entry = next(
                e
                for e in wl.entries
                if e.dpid == hop.dpid
                and e.priority == workloads.ROUTE_PRIORITY
                and e.match.contains(hdr, hop.in_port)
            )
            allowed = set(entry.instructions.outputs())
            for g in wl.groups:
                if g.dpid == hop.dpid and g.group_id in entry.instructions.groups():
                    allowed |= {a[1] for b in g.buckets for a in b if a[0] == "output"}
            for q in sorted(wl.topo.switches[hop.dpid].ports):
                if (hop.dpid, q) not in wl.topo.links or q in allowed or q == hop.in_port:
                    continue
                bad = dataclasses.replace(entry, instructions=Instructions((("output", q),)))
                changed = [bad if e is entry else e for e in wl.entries]
                outs = [
                    d
                    for d in RefDataPlane(wl.topo, changed, wl.groups).send(ingress, hdr)
                    if d.kind == "egress"
                ]
                # the copy that took the changed output (a SELECT group upstream may send
                # others down paths the change does not touch)
                outs = [
                    d for d in outs if any(h.dpid == hop.dpid and h.out_port == q for h in d.hops)
                ]
                # (a SELECT group sends a packet down one bucket: any one of these is real)
                outs = [d for d in outs if _unique(finder, d)]
                if not outs:
                    continue
                d = outs[0]
                if seen < skip:
                    seen += 1
                    continue
                fault = _fault(wl, model, finder, d, hdr, bad, entry)
                want = next(iter(entry.instructions.outputs()), None)
                if want is None:  # a group: the bucket the packet took
                    want = hop.out_port
                real = tuple((h.dpid, h.in_port, h.out_port) for h in d.hops)
                return Misroute(fault, real, hop.dpid, q, want)
    raise AssertionError("no misroute found")


def _unique(finder: PathFinder, d) -> bool:
    res = finder.chains(d.verify_port, d.egress)
    return res.complete and len(res.chains) == 1


def _fault(wl, model, finder, d, hdr, bad, entry) -> dict:
    now = time.time()
    polled = {
        "dpid": bad.dpid,
        "switch": wl.topo.switches[bad.dpid].name,
        "finding": "changed",
        "cause": format_flow(bad),
        "entry": format_flow(bad),
        "intended": format_flow(entry),
        "header": format_header(hdr),
    }
    f = {
        "id": 1,
        "kind": "type_p_action",
        "location": f"dpid:{bad.dpid}",
        "header_class": "c1",
        "state": "open",
        "first_seen": now - 5,
        "last_seen": now,
        "count": 3,
        "reopened": 0,
        "header": format_header(hdr),
        "egress": list(d.egress),
        "expected": [_tags(e) for e in model.expected(d.egress, hdr)],
        "actual": {"verify_port": d.verify_port, "verify_rule": d.verify_rule},
        "localization": {"candidates": [bad.dpid], "culprit": None},
        "polled": polled,
        "audit": None,
        "difference": entry_difference(polled["entry"], polled["intended"]),
        "resolved_at": None,
    }
    f["path"] = actual_path_json(finder, f)
    return f


def network(kind: str, size: int):
    wl = workloads.generate(kind, size, 10 * size * size, rule_ids=True, acls=1)
    model = Model(wl.topo)
    model.add_entries(wl.entries, wl.groups)
    model.build()
    return wl, model


class FakeApi:
    """answer(request) -> (HTTP status, reply) as pazzd's API gives them."""

    def __init__(self, wl, model, faults: list[dict]) -> None:
        self.wl, self.model, self.faults = wl, model, faults

    def __call__(self, req: dict):
        try:
            return 200, {"ok": True, "result": self._result(req)}
        except (KeyError, ValueError) as e:
            return 400, {"ok": False, "error": str(e)}

    def _result(self, req: dict):
        cmd = req["cmd"]
        if cmd == "status":
            return {
                "model": {"switches": len(self.wl.topo.switches), "rules": len(self.wl.entries)}
                | {"version": 1},
                "controller": "off (rules from file)",
                "faults_open": {"type_p_action": sum(f["state"] == "open" for f in self.faults)},
                "tester": {"reports": 10},
            }
        if cmd == "faults":
            st = req.get("state")
            return [
                {k: v for k, v in f.items() if k != "path"}
                for f in self.faults
                if st is None or f["state"] == st
            ]
        if cmd == "fault":
            for f in self.faults:
                if f["id"] == int(req["id"]):
                    return f
            raise ValueError(f"no fault with id {req['id']}")
        if cmd == "trace":
            return answers.trace(self.wl.topo, self.model, req["ingress"], req["header"])
        if cmd == "topology":
            return topology_json(self.wl.topo)
        if cmd == "coverage":
            return {"enabled": False, "window_s": None, "age_bounds_s": [], "ingresses": []}
        raise ValueError(f"no read-only command {cmd!r}")


def serve(wl, faults: list[dict], model) -> UiServer:
    """The view over a stand-in API; ui.url is the page's address with its token."""
    token = secrets.token_urlsafe(16)
    ui = UiServer(wl.topo, FakeApi(wl, model, faults), "127.0.0.1", 0, token)
    ui.port = ui.start()
    ui.url = f"http://127.0.0.1:{ui.port}/ui/?token={token}"
    return ui
