"""OpenFlow 1.3 flow entries, groups and FlowMods as the model sees them.

Everything here is plain data. Parsing of the ovs-ofctl text syntax lives in
`cpc.ofctl`; the semantics (priorities, tables, groups) live in `cpc.model`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from .fields import FIELD_NAMES, IP_FIELDS, TP_FIELDS, WIDTH, format_value

_L3_FIELDS = IP_FIELDS | TP_FIELDS

# Reserved OpenFlow 1.3 port numbers.
OFPP_MAX = 0xFFFFFF00
OFPP_IN_PORT = 0xFFFFFFF8
OFPP_TABLE = 0xFFFFFFF9
OFPP_NORMAL = 0xFFFFFFFA
OFPP_FLOOD = 0xFFFFFFFB
OFPP_ALL = 0xFFFFFFFC
OFPP_CONTROLLER = 0xFFFFFFFD
OFPP_LOCAL = 0xFFFFFFFE
OFPP_ANY = 0xFFFFFFFF
OFPG_ANY = 0xFFFFFFFF
OFPTT_ALL = 0xFF
# ofp_flow_mod_flags (cpc.flowmod applies them).
OFPFF_SEND_FLOW_REM = 1
OFPFF_CHECK_OVERLAP = 2
OFPFF_RESET_COUNTS = 4
OFPFF_NO_PKT_COUNTS = 8
OFPFF_NO_BYT_COUNTS = 16
PORT_NAMES = {
    OFPP_IN_PORT: "IN_PORT",
    OFPP_TABLE: "TABLE",
    OFPP_NORMAL: "NORMAL",
    OFPP_FLOOD: "FLOOD",
    OFPP_ALL: "ALL",
    OFPP_CONTROLLER: "CONTROLLER",
    OFPP_LOCAL: "LOCAL",
    OFPP_ANY: "ANY",
}
GROUP_TYPES = ("all", "select", "indirect")


class ModelError(ValueError):
    """Input the model cannot represent exactly. The message says what and where."""


@dataclass(frozen=True, slots=True)
class Match:
    """A ternary match: ((field, value, mask), ...) in model field order, plus in_port."""

    fields: tuple[tuple[str, int, int], ...] = ()
    in_port: int | None = None

    @staticmethod
    def build(values: dict[str, tuple[int, int]], in_port: int | None = None) -> Match:
        items = []
        for f in FIELD_NAMES:
            if f in values:
                value, mask = values[f]
                if mask:
                    items.append((f, value & mask, mask))
        m = Match(tuple(items), in_port)
        m.check_prerequisites()
        return m

    def get(self, name: str) -> tuple[int, int] | None:
        for f, v, m in self.fields:
            if f == name:
                return v, m
        return None

    def check_prerequisites(self) -> None:
        names = {f for f, _, _ in self.fields}
        if names & TP_FIELDS and self.get("ip_proto") not in ((6, 0xFF), (17, 0xFF)):
            raise ModelError("transport ports need ip_proto=6 or 17 ('tcp' or 'udp')")
        if names & _L3_FIELDS and self.get("eth_type") != (0x0800, 0xFFFF):
            raise ModelError("IPv4 fields need eth_type=0x0800 ('ip') in the same match")

    def overlaps(self, other: Match) -> bool:
        if self.in_port is not None and other.in_port is not None and self.in_port != other.in_port:
            return False
        theirs = {f: (v, m) for f, v, m in other.fields}
        for f, v, m in self.fields:
            o = theirs.get(f)
            if o is not None and (v ^ o[0]) & m & o[1]:
                return False
        return True

    def within(self, other: Match) -> bool:
        """Every header of self is in other (OpenFlow's non-strict 'matches' relation)."""
        if other.in_port is not None and self.in_port != other.in_port:
            return False
        mine = {f: (v, m) for f, v, m in self.fields}
        for f, v, m in other.fields:
            s = mine.get(f)
            if s is None or (s[1] & m) != m or (s[0] ^ v) & m:
                return False
        return True

    def contains(self, header: dict[str, int], in_port: int) -> bool:
        if self.in_port is not None and self.in_port != in_port:
            return False
        return all((header.get(f, 0) & m) == v for f, v, m in self.fields)

    def __str__(self) -> str:
        parts = [] if self.in_port is None else [f"in_port={self.in_port}"]
        parts += [f"{f}={format_value(f, v, m)}" for f, v, m in self.fields]
        return ",".join(parts) or "any"


# One OpenFlow action, a small tuple: ("output", port), ("group", gid),
# ("set_field", field, value), ("push_vlan",), ("pop_vlan",). Not cpc.tables.Forwarding,
# which is what a whole entry does with the headers it owns.
OfpAction = tuple


@dataclass(frozen=True, slots=True)
class Instructions:
    apply: tuple[OfpAction, ...] = ()
    write: tuple[OfpAction, ...] = ()
    clear: bool = False
    goto: int | None = None

    def outputs(self) -> set[int]:
        return {a[1] for a in self.apply + self.write if a[0] == "output"}

    def drops(self) -> bool:
        """No actions, no action set, no next table: the packet is dropped."""
        return not self.apply and not self.write and not self.clear and self.goto is None

    def groups(self) -> set[int]:
        return {a[1] for a in self.apply + self.write if a[0] == "group"}

    def __str__(self) -> str:
        from .ofctl import format_actions  # ofctl imports this module

        return format_actions(self)


@dataclass(eq=False, slots=True)
class FlowEntry:
    """One flow entry of one switch. rule_id is the argument of set_verify_rule:ID (0 if none)."""

    dpid: int
    table: int
    priority: int
    match: Match
    instructions: Instructions
    cookie: int = 0
    rule_id: int = 0
    idle_timeout: int = 0
    hard_timeout: int = 0
    flags: int = 0
    source: str = ""  # where it came from ("rules.jsonl:12"), for error messages

    def identity(self) -> tuple[int, int, int, int, int]:
        """(dpid, table, priority, cookie, rule_id): what the Verify_Rule chain can tell apart."""
        return (self.dpid, self.table, self.priority, self.cookie, self.rule_id)

    def __str__(self) -> str:
        text = f"table={self.table},priority={self.priority}"
        if self.cookie:
            text += f",cookie=0x{self.cookie:x}"
        text += f",{self.match} actions="
        if self.rule_id:
            text += f"set_verify_rule:{self.rule_id},"
        return text + str(self.instructions)


@dataclass(eq=False, slots=True)
class Group:
    dpid: int
    group_id: int
    type: str
    buckets: tuple[tuple[OfpAction, ...], ...]
    source: str = ""
    weights: tuple[int, ...] = ()  # the buckets' OpenFlow weights; () = 1 each


def select_weights(gtype: str, weights) -> tuple[int, ...]:
    """A group's bucket weights as Group keeps them: only a SELECT group's, divided by
    their greatest common divisor (scaling them all changes no pick), () when all equal."""
    ws = tuple(weights)
    g = math.gcd(*ws) if ws else 0
    if gtype != "select" or g == 0 or all(w == g for w in ws):
        return ()
    return tuple(w // g for w in ws)


@dataclass(slots=True)
class FlowMod:
    """An OpenFlow 1.3 FlowMod as the model applies it."""

    command: str  # add | modify | modify_strict | delete | delete_strict
    dpid: int
    table: int = 0
    priority: int = 0x8000
    match: Match = field(default_factory=Match)
    instructions: Instructions = field(default_factory=Instructions)
    cookie: int = 0
    cookie_mask: int = 0
    out_port: int = OFPP_ANY
    out_group: int = OFPG_ANY
    rule_id: int = 0
    idle_timeout: int = 0
    hard_timeout: int = 0
    flags: int = 0
    source: str = ""

    COMMANDS = ("add", "modify", "modify_strict", "delete", "delete_strict")

    def entry(self) -> FlowEntry:
        return FlowEntry(
            dpid=self.dpid,
            table=self.table,
            priority=self.priority,
            match=self.match,
            instructions=self.instructions,
            cookie=self.cookie,
            rule_id=self.rule_id,
            idle_timeout=self.idle_timeout,
            hard_timeout=self.hard_timeout,
            flags=self.flags,
            source=self.source,
        )


def check_field_value(field_name: str, value: int) -> None:
    if not 0 <= value < (1 << WIDTH[field_name]):
        raise ModelError(
            f"value {value} does not fit the {WIDTH[field_name]}-bit field {field_name}"
        )
