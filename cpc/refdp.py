"""A brute-force reference data plane: one concrete packet at a time, tables scanned linearly.

This is the oracle the model is tested against, and the data plane of large
simulations (fuzzer effect, tester replay). It shares only the rule records and
the Verify tag functions with the model; lookups, groups, rewrites and tagging
are written again here, as plainly as possible.
"""

from __future__ import annotations

from collections.abc import Callable

from .fields import OFPVID_PRESENT
from .results import Delivery, Hop, RuleRef
from .rules import (
    OFPP_ALL,
    OFPP_CONTROLLER,
    OFPP_FLOOD,
    OFPP_IN_PORT,
    OFPP_LOCAL,
    FlowEntry,
    Group,
)
from .tags import VERIFY_PORT_INIT, VERIFY_RULE_INIT, set_verify_port, set_verify_rule
from .topology import Topology

# Picks the bucket a SELECT group sends a packet down: (dpid, group, header) -> bucket index.
SelectFn = Callable[[int, Group, dict[str, int]], int]


class RefDataPlane:
    def __init__(
        self,
        topo: Topology,
        entries: list[FlowEntry],
        groups: list[Group] = (),
        select: SelectFn | None = None,
    ) -> None:
        """Without `select`, a SELECT group sends a packet down every bucket, each outcome
        marked as an alternative; with it, down the one bucket it picks, as a switch does."""
        self.topo = topo
        self.select = select
        self.tables: dict[tuple[int, int], list[FlowEntry]] = {}
        for e in entries:
            self.tables.setdefault((e.dpid, e.table), []).append(e)
        for lst in self.tables.values():
            # Highest priority first; among equal priorities, in_port-specific entries first.
            lst.sort(key=lambda e: (-e.priority, e.match.in_port is None))
        self.groups = {(g.dpid, g.group_id): g for g in groups}
        self._arrived: list | None = None  # arrivals() collects here

    def arrivals(self, ingress, header) -> list[tuple]:
        """Every arrival of the packet at a switch over a link, as an ingress sample there
        sees it: ((dpid, in_port), header, Verify_Port, Verify_Rule, hops before)."""
        self._arrived = got = []
        try:
            self.send(ingress, header)
        finally:
            self._arrived = None
        return got

    def walk(self, ingress, header) -> tuple[list[tuple[Delivery, dict[str, int]]], list]:
        """send_with_headers and arrivals of one packet, in one walk."""
        self._arrived = got = []
        try:
            outs = self.send_with_headers(ingress, header)
        finally:
            self._arrived = None
        return outs, got

    def send(self, ingress: tuple[int, int], header: dict[str, int]) -> list[Delivery]:
        """Every outcome of sending header in at the edge port ingress."""
        return [d for d, _ in self.send_with_headers(ingress, header)]

    def send_with_headers(self, ingress, header) -> list[tuple[Delivery, dict[str, int]]]:
        """Like send, with the header as it is at the end of each outcome."""
        out: list[tuple[Delivery, dict[str, int]]] = []
        pkt = {
            "h": dict(header),
            "vport": VERIFY_PORT_INIT,
            "vrule": VERIFY_RULE_INIT,
            "alt": False,
            "rw": False,
        }
        self._switch(out, ingress, ingress[0], ingress[1], pkt, (), frozenset())
        return out

    def _switch(self, out, ingress, dpid, in_port, pkt, hops, visited) -> None:
        if self._arrived is not None and hops:
            self._arrived.append(
                ((dpid, in_port), dict(pkt["h"]), pkt["vport"], pkt["vrule"], hops)
            )
        state = (dpid, in_port, tuple(sorted(pkt["h"].items())))
        if state in visited:
            why = f"loop back to {self.topo.port_name((dpid, in_port))}"
            self._end(out, ingress, "loop", None, pkt, hops, Hop(dpid, in_port, (), None), why)
            return
        visited = visited | {state}
        n0 = len(out)
        last = self._table(out, ingress, dpid, in_port, 0, pkt, hops, visited, (), {})
        if len(out) == n0:  # matched, but the actions send it nowhere
            pkt, rules = last
            why = "dropped by the entry's actions"
            self._end(out, ingress, "drop", None, pkt, hops, Hop(dpid, in_port, rules, None), why)

    def _table(self, out, ingress, dpid, in_port, table, pkt, hops, visited, rules, aset) -> None:
        entry = next(
            (e for e in self.tables.get((dpid, table), []) if e.match.contains(pkt["h"], in_port)),
            None,
        )
        if entry is None:
            if not aset:
                why = f"table-miss in table {table}"
                hop = Hop(dpid, in_port, rules, None)
                self._end(out, ingress, "drop", None, pkt, hops, hop, why)
                return pkt, rules
            return self._action_set(out, ingress, dpid, in_port, pkt, hops, visited, rules, aset)
        pkt = dict(pkt)
        pkt["vport"] = set_verify_port(pkt["vport"], dpid, in_port)
        pkt["vrule"] = set_verify_rule(
            pkt["vrule"], dpid, table, entry.priority, entry.cookie, entry.rule_id
        )
        rules = rules + (RuleRef(table, entry.priority, entry.cookie, entry.rule_id),)
        ins = entry.instructions
        pkt = self._actions(out, ingress, dpid, in_port, ins.apply, pkt, hops, visited, rules)
        aset = {} if ins.clear else dict(aset)
        for a in ins.write:
            aset[("set_field", a[1]) if a[0] == "set_field" else (a[0],)] = a
        if ins.goto is not None:
            return self._table(
                out, ingress, dpid, in_port, ins.goto, pkt, hops, visited, rules, aset
            )
        return self._action_set(out, ingress, dpid, in_port, pkt, hops, visited, rules, aset)

    def _action_set(self, out, ingress, dpid, in_port, pkt, hops, visited, rules, aset):
        """Run the action set, at the end of the pipeline or on a table-miss after a
        goto_table (Open vSwitch's behaviour; OpenFlow 1.3.5 drops the packet there)."""
        order = {"pop_vlan": 0, "push_vlan": 1, "set_field": 2, "group": 3, "output": 4}
        acts = sorted(aset.values(), key=lambda a: order[a[0]])
        if any(a[0] == "group" for a in acts):
            acts = [a for a in acts if a[0] != "output"]
        pkt = self._actions(out, ingress, dpid, in_port, acts, pkt, hops, visited, rules)
        return pkt, rules

    def _actions(self, out, ingress, dpid, in_port, actions, pkt, hops, visited, rules):
        for a in actions:
            if a[0] == "output":
                self._output(out, ingress, dpid, in_port, a[1], pkt, hops, visited, rules)
            elif a[0] == "group":
                g = self.groups.get((dpid, a[1]))
                if g is None:
                    why = f"group {a[1]} does not exist"
                    hop = Hop(dpid, in_port, rules, None)
                    self._end(out, ingress, "drop", None, pkt, hops, hop, why)
                    continue
                buckets, alt = g.buckets, g.type == "select" and len(g.buckets) > 1
                if alt and self.select is not None:
                    buckets, alt = (g.buckets[self.select(dpid, g, pkt["h"])],), False
                for bucket in buckets:
                    clone = dict(pkt)
                    clone["alt"] = pkt["alt"] or alt
                    self._actions(out, ingress, dpid, in_port, bucket, clone, hops, visited, rules)
            else:
                pkt = dict(pkt)
                h = dict(pkt["h"])
                if a[0] == "set_field":
                    h[a[1]] = a[2]
                elif a[0] == "pop_vlan":
                    h["vlan_vid"] = 0
                elif a[0] == "push_vlan":  # VID 0, as Open vSwitch (docs/agents.md)
                    h["vlan_vid"] = OFPVID_PRESENT
                pkt["h"] = h
                pkt["rw"] = True
        return pkt

    def _output(self, out, ingress, dpid, in_port, port, pkt, hops, visited, rules) -> None:
        if port == OFPP_CONTROLLER:
            hop = Hop(dpid, in_port, rules, None)
            self._end(out, ingress, "controller", None, pkt, hops, hop, "sent to the controller")
            return
        if port == OFPP_LOCAL:
            hop = Hop(dpid, in_port, rules, None)
            why = "sent to the bridge's local port"
            self._end(out, ingress, "local", None, pkt, hops, hop, why)
            return
        if port in (OFPP_FLOOD, OFPP_ALL):
            ports = [p for p in sorted(self.topo.switches[dpid].ports) if p != in_port]
        elif port == OFPP_IN_PORT:
            ports = [in_port]
        elif port == in_port:
            why = "output to the input port"
            self._end(out, ingress, "drop", None, pkt, hops, Hop(dpid, in_port, rules, None), why)
            return
        else:
            ports = [port]
        for p in ports:
            hop = Hop(dpid, in_port, rules, p)
            loc = (dpid, p)
            if loc in self.topo.down:
                why = f"port {self.topo.port_name(loc)} is down"
                self._end(out, ingress, "drop", None, pkt, hops, hop, why)
            elif loc in self.topo.edges:
                self._end(out, ingress, "egress", loc, pkt, hops, hop)
            elif loc in self.topo.links:
                nd, np_ = self.topo.links[loc]
                self._switch(out, ingress, nd, np_, pkt, hops + (hop,), visited)
            else:
                why = f"port {self.topo.port_name(loc)} leads nowhere"
                self._end(out, ingress, "drop", None, pkt, hops, hop, why)

    @staticmethod
    def _end(out, ingress, kind, egress, pkt, hops, hop, reason: str = "") -> None:
        d = Delivery(
            ingress,
            kind,
            egress,
            hops + (hop,),
            pkt["vport"],
            pkt["vrule"],
            reason=reason,
            alternative=pkt["alt"],
            rewritten=pkt["rw"],
        )
        out.append((d, pkt["h"]))
