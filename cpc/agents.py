"""Where OpenFlow leaves a behaviour to the switch, which one the model assumes (Open
vSwitch 3.1's), and a lint for entries whose effect depends on it.

DIVERGENCES lists each behaviour with its source; docs/agents.md says the same at
length, with what the differential test (pazzlab.agents) measured. lint() finds, in one
switch's entries and groups, those that depend on such a behaviour: an entry that
behaves the same on every agent draws no warning.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from .flowmod import missing_prerequisite
from .rules import OFPP_ALL, OFPP_FLOOD, FlowEntry, Group


@dataclass(frozen=True)
class Divergence:
    kind: str
    what: str
    source: str  # the OpenFlow 1.3.5 section, or the Open vSwitch code
    model: str  # the behaviour the model assumes


DIVERGENCES = {
    d.kind: d
    for d in (
        Divergence(
            "equal-priority-overlap",
            "two entries of one table with the same priority match one packet",
            "OpenFlow 1.3.5 section 5.3 (the entry selected is explicitly undefined); "
            "OVS lib/classifier.c (the first subtable of the highest priority wins)",
            "the entry added first wins",
        ),
        Divergence(
            "set-field-prerequisite",
            "set_field on a field whose prerequisite the match does not establish",
            "OpenFlow 1.3.5 section 7.2.5 and A.4.6 (OFPBAC_MATCH_INCONSISTENT); "
            "OVS lib/ofp-actions.c check_SET_FIELD refuses the FlowMod",
            "refused, as Open vSwitch does (other agents apply it, or skip it per packet)",
        ),
        Divergence(
            "push-vlan-vid",
            "the VID of a tag pushed over an existing tag",
            "OpenFlow 1.3.5 section 5.12.1 (copied from the outer tag); OVS "
            "ofproto/ofproto-dpif-xlate.c OFPACT_PUSH_VLAN (VID 0)",
            "VID 0, as Open vSwitch",
        ),
        Divergence(
            "vlan-stack",
            "a second VLAN tag (push_vlan on a tagged packet, then pop_vlan)",
            "OVS keeps two tags (FLOW_MAX_VLAN_HEADERS) and refuses a third "
            "(OFPBAC_BAD_TAG); the model's vlan_vid is one tag",
            "one tag: pop_vlan leaves the packet untagged",
        ),
        Divergence(
            "flood-local",
            "output to ALL or FLOOD",
            "OpenFlow 1.3.5 section 4.5 (ALL: all standard ports); OVS "
            "ofproto-dpif-xlate.c flood_packets also sends to the bridge's LOCAL port",
            "the topology's ports other than the ingress",
        ),
        Divergence(
            "action-set-order",
            "an action set holding pop_vlan, push_vlan and set_field",
            "OpenFlow 1.3.5 section 5.10 (pop, push, set, group, output, whatever the "
            "written order); OVS lib/ofp-actions.c ofpacts_execute_action_set agrees",
            "OpenFlow's order, as Open vSwitch",
        ),
        Divergence(
            "empty-group",
            "a group with no (live) bucket",
            "OpenFlow 1.3.5 section 5.6.1 leaves it open; OVS drops the packet",
            "the packet is dropped",
        ),
        Divergence(
            "group-command",
            "GroupMod ADD of an existing group, MODIFY or DELETE of a missing one",
            "OpenFlow 1.3.5 section 6.5 (GROUP_EXISTS, UNKNOWN_GROUP); OVS follows it",
            "Model.set_group is ADD and MODIFY alike; pazzd feeds it only what the switch accepted",
        ),
        Divergence(
            "not-modelled",
            "fast-failover groups",
            "OpenFlow 1.3.5 section 5.6.1; OVS supports them",
            "refused (ModelError); the proxy leaves their entries out of the model",
        ),
    )
}


@dataclass(frozen=True)
class AgentWarning:
    kind: str
    source: str
    message: str

    def __str__(self) -> str:
        return f"{self.source}: {self.message} [{self.kind}]"


def _where(e: FlowEntry) -> str:
    return e.source or f"dpid {e.dpid:#x} table {e.table} priority {e.priority} {e.match}"


def lint(entries: Iterable[FlowEntry], groups: Iterable[Group] = ()) -> list[AgentWarning]:
    """Warnings for the entries and groups whose effect differs between agents."""
    entries = list(entries)
    out = [w for e in entries for w in lint_entry(e)]
    for g in groups:
        if g.type in ("all", "select") and not g.buckets:
            out.append(
                AgentWarning(
                    "empty-group",
                    g.source or f"dpid {g.dpid:#x} group {g.group_id}",
                    f"{g.type} group {g.group_id} has no bucket: Open vSwitch drops its "
                    "packets, the behaviour is the switch's choice",
                )
            )
    out += [
        AgentWarning(
            "equal-priority-overlap",
            _where(b),
            f"overlaps {_where(a)} at the same priority with other instructions: which "
            "one a packet matches is the switch's choice (the model: the earlier one)",
        )
        for a, b in equal_priority_overlaps(entries)
    ]
    return out


def lint_entry(e: FlowEntry) -> list[AgentWarning]:
    """Warnings that one entry draws on its own."""
    out = []
    tagged = (v := e.match.get("vlan_vid")) is not None and bool(v[0] & v[1] & 0x1000)
    for a in e.instructions.apply + e.instructions.write:
        if a[0] == "push_vlan":
            tagged = True
        elif a[0] == "pop_vlan":
            tagged = False
        elif a[0] == "set_field" and (missing := missing_prerequisite(e.match, a[1], tagged)):
            out.append(
                AgentWarning(
                    "set-field-prerequisite",
                    _where(e),
                    f"set_field {a[1]} without {missing} in the match: Open vSwitch refuses "
                    "it, other agents apply or skip it",
                )
            )
    kinds = [a[0] for a in e.instructions.write]
    order = {"pop_vlan": 0, "push_vlan": 1, "set_field": 2, "group": 3, "output": 4}
    ranks = [order[k] for k in kinds if k in ("pop_vlan", "push_vlan", "set_field")]
    if ranks != sorted(ranks):
        out.append(
            AgentWarning(
                "action-set-order",
                _where(e),
                "write_actions lists " + ", ".join(kinds) + ": the action set runs pop_vlan, "
                "push_vlan, set_field in that order, not as written",
            )
        )
    return out


def equal_priority_overlaps(entries: Iterable[FlowEntry]) -> list[tuple[FlowEntry, FlowEntry]]:
    """Pairs (earlier, later) of one table with the same priority that one packet can
    match, with other instructions. Entries of one shape (the same fields and masks)
    overlap only when equal, so only pairs of shapes are compared, through an index of
    the values under the masks both have."""
    by_table: dict[tuple, dict[tuple, list]] = defaultdict(lambda: defaultdict(list))
    for i, e in enumerate(entries):
        shape = (e.match.in_port is not None,) + tuple((f, m) for f, _, m in e.match.fields)
        by_table[(e.dpid, e.table, e.priority)][shape].append((i, e))
    out = []
    for shapes in by_table.values():
        keys = list(shapes)
        for x, sa in enumerate(keys):
            for sb in keys[x + 1 :]:
                out += _shape_pairs(shapes[sa], shapes[sb])
    out.sort(key=lambda p: (p[0][0], p[1][0]))
    return [(a, b) for (_, a), (_, b) in out]


def _shape_pairs(xs: list, ys: list) -> list:
    mx = dict((f, m) for f, _, m in xs[0][1].match.fields)
    my = dict((f, m) for f, _, m in ys[0][1].match.fields)
    common = {f: mx[f] & my[f] for f in mx.keys() & my.keys()}
    ports = xs[0][1].match.in_port is not None and ys[0][1].match.in_port is not None

    def key(e: FlowEntry) -> tuple:
        vals = {f: v for f, v, _ in e.match.fields}
        return (e.match.in_port if ports else None,) + tuple(
            vals[f] & m for f, m in sorted(common.items())
        )

    index = defaultdict(list)
    for y in ys:
        index[key(y[1])].append(y)
    out = []
    for x in xs:
        for y in index.get(key(x[1]), ()):
            if x[1].instructions != y[1].instructions:
                out.append((x, y) if x[0] < y[0] else (y, x))
    return out


def floods(entries: Iterable[FlowEntry], groups: Iterable[Group] = ()) -> bool:
    acts = [a for e in entries for a in e.instructions.apply + e.instructions.write]
    acts += [a for g in groups for b in g.buckets for a in b]
    return any(a[0] == "output" and a[1] in (OFPP_ALL, OFPP_FLOOD) for a in acts)


def pushes_vlan(entries: Iterable[FlowEntry], groups: Iterable[Group] = ()) -> int:
    """How many push_vlan actions the entries and groups hold."""
    acts = [a for e in entries for a in e.instructions.apply + e.instructions.write]
    acts += [a for g in groups for b in g.buckets for a in b]
    return sum(a[0] == "push_vlan" for a in acts)


def explain_forwarding(entries, groups, in_port: int, header: dict, want: list, got: list) -> str:
    """The known divergence that explains why a switch's outputs `want` differ from the
    model's `got` for one packet ([(port, header items)]), or "unexplained"."""
    entries = list(entries)
    if any(
        a.match.contains(h, in_port) and b.match.contains(h, in_port)
        for a, b in equal_priority_overlaps(entries)
        for h in [header] + [dict(x) for _, x in want + got]
    ):
        return "equal-priority-overlap"
    kinds = []
    if floods(entries, groups) and any(w[0] == "LOCAL" for w in want):
        want = [w for w in want if w[0] != "LOCAL"]
        kinds.append("flood-local")
    two_tags = header.get("vlan_vid", 0) & 0x1000 or pushes_vlan(entries, groups) > 1
    if want != got and two_tags and _strip(want, "vlan_vid") == _strip(got, "vlan_vid"):
        kinds.append("vlan-stack")
        want = got
    # Both can apply to one packet: "flood-local+vlan-stack".
    return "+".join(kinds) if want == got and kinds else "unexplained"


def _strip(outs: list, field: str) -> list:
    return sorted(((p, tuple(kv for kv in h if kv[0] != field)) for p, h in outs), key=repr)
