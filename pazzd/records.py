"""Typed findings: one record class per kind, as the checks make them, the findings store
keeps them, the API serves them and pazzctl shows them.

Every record has the findings table's columns (id, kind, key, name, severity, summary,
first and last seen, state, resolved_at, confirmation) and its kind's own fields, stored
as the row's `detail` JSON. `to_json()` is the API's answer, `record_from_json()` reads one
back (the class from its kind and detail), `text()` is `pazzctl KIND show`, and `row()`
one line of `pazzctl KIND`'s table.

| class | kind | made by |
|---|---|---|
| IntentFinding | intent | pazzd.findings (cpc.intents) |
| PacketInFinding | intent (check direct_paths, ...) | pazzd.packetins |
| InterferenceFinding | interference | pazzd.interference (cpc.interference) |
| OverwriteFinding | interference (relation overwrite) | pazzd.interference |
| AgentFinding | agent | pazzd.entries |
| AuditFault | audit (a fault, not a finding) | pazzd.audit |
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field, fields
from typing import ClassVar

from cpc.fields import parse_header
from cpc.ofctl import format_header as ofctl_header

from .portnames import PortNames

__all__ = [
    "AgentFinding",
    "AuditFault",
    "Finding",
    "IntentFinding",
    "InterferenceFinding",
    "OverwriteFinding",
    "PacketInFinding",
    "outcomes_text",
    "record_from_json",
    "table_text",
]

ROW = (
    "id",
    "kind",
    "key",
    "name",
    "severity",
    "summary",
    "first_seen",
    "last_seen",
    "state",
    "resolved_at",
    "confirmation",
)
PACKET_IN_CHECKS = ("direct_paths", "strict_direct_paths", "no_forgotten_packets")
OPTIONAL = {"optional": True}  # a detail key left out when None


def when(t) -> str:
    """A time as an ISO date with the time zone: `2026-11-28 05:13:07 UTC`."""
    return time.strftime("%Y-%m-%d %H:%M:%S %Z", time.localtime(t)) if t else "-"


def header_ofctl(text: str | None) -> str:
    """A header written 'ipv4_dst=10.0.1.5,ip_proto=6,...' (as pazzd stores it) in
    ovs-ofctl match syntax ('tcp,nw_dst=10.0.1.5,...'); as given if it is not one."""
    if not text:
        return "(none)"
    try:
        return ofctl_header(parse_header(text))
    except ValueError:
        return text


def table_text(rows, empty: str | None = None) -> str:
    """Rows under their header row; `empty` instead when there are none."""
    if empty is not None and len(rows) == 1:
        return empty
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "  " + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows
    )


def outcomes_text(outcomes: list[dict], names: PortNames | None = None) -> str:
    """Trace outcomes (the API's JSON) as `ovs-appctl ofproto/trace` shows a bridge: per
    switch the port the packet entered by, each entry it matched (table, match, priority,
    cookie; then its actions) and the port it left by."""
    names = names or PortNames()
    out = []
    for n, d in enumerate(outcomes, 1):
        title = f"outcome {n}: {d['kind']}"
        if d["egress"]:
            title += f" at {names.named(d['egress'])}"
        if d["reason"]:
            title += f" - {d['reason']}"
        if d["alternative"]:
            title += " [one of several SELECT choices]"
        out.append(title)
        for h in d["hops"]:
            dpid = h["dpid"]
            out.append(f"  {h['switch']}: {names.in_port(dpid, h['in_port'])}")
            for r in h["rules"]:
                out += _rule_lines(r)
            if not h["rules"]:
                out.append("    no entry matched (table-miss): drop")
            if h["out_port"] is not None:
                out.append(f"    -> {names.out_port(dpid, h['out_port'])}")
        out.append(f"  expected Verify_Port {d['verify_port']}  Verify_Rule {d['verify_rule']}\n")
    if not outcomes:
        out.append("no outcome (ingress port is down)")
    return "\n".join(out)


def _rule_lines(r: dict) -> list[str]:
    """One matched entry, as ofproto/trace: `0. MATCH, priority P, cookie C` and its
    actions below; an answer without them (a finding's paths) names the entry's RuleRef."""
    head = f"{r['match']}, " if r.get("match") else ""
    head += f"priority {r['priority']}, cookie 0x{r['cookie']:x}"
    if r.get("actions") is not None:
        return [f"    {r['table']}. {head}", f"       {r['actions']}"]
    missing = " (entry not found in the model)" if "actions" in r else ""
    return [f"    {r['table']}. {head}, rule_id {r['rule_id']}{missing}"]


@dataclass(kw_only=True)
class Finding:
    """The findings table's columns; a kind adds its detail fields."""

    KIND: ClassVar[str] = ""
    id: int = 0
    kind: str = ""
    key: str = ""
    name: str = ""
    severity: str = "warning"
    summary: str = ""
    first_seen: float = 0.0
    last_seen: float = 0.0
    state: str = "open"
    resolved_at: float | None = None
    confirmation: dict | None = None
    extra: dict = field(default_factory=dict)  # detail keys this class does not name

    def __post_init__(self) -> None:
        self.kind = self.kind or self.KIND

    def detail(self) -> dict:
        """The kind's own fields, as the row's detail JSON."""
        out = {}
        for f in fields(self):
            if f.name in ROW or f.name == "extra":
                continue
            v = getattr(self, f.name)
            if v is None and f.metadata.get("optional"):
                continue
            out[f.name] = v
        out.update(self.extra)
        return out

    def to_json(self) -> dict:
        return {**{k: getattr(self, k) for k in ROW}, "detail": self.detail()}

    @classmethod
    def from_json(cls, d: dict) -> Finding:
        own = {f.name for f in fields(cls)} - set(ROW) - {"extra"}
        detail = d.get("detail") or {}
        return cls(
            **{k: d.get(k) for k in ROW if k in d},
            **{k: v for k, v in detail.items() if k in own},
            extra={k: v for k, v in detail.items() if k not in own},
        )

    def head(self) -> list[str]:
        return [
            f"{'id':12} {self.id}",
            f"{'state':12} {self.state}   severity {self.severity}",
        ]

    def seen(self) -> str:
        return f"{'first seen':12} {when(self.first_seen)}   last seen {when(self.last_seen)}"

    def verdict(self) -> str:
        return (self.confirmation or {}).get("verdict", "-")

    def row(self) -> tuple[str, ...]:
        return (str(self.id), self.state, self.name, when(self.first_seen), self.verdict())

    def text(self, names: PortNames | None = None) -> str:
        """`pazzctl KIND show`; names: the ports' host names (pazzd.portnames)."""
        return "\n".join([*self.head(), f"{'finding':12} {self.summary}", self.seen()])


def _entry_line(e: dict) -> str:
    """An entry a change named: {change, table, priority, cookie, match}."""
    head = f"table={e['table']},priority={e['priority']},cookie={e['cookie']}"
    return f"{'':12}   {e['change']} {head}" + (f",{e['match']}" if e["match"] else "")


def _confirmation_lines(conf: dict | None) -> list[str]:
    if not conf:
        return []
    out = [f"{'data plane':12} {conf.get('verdict')}"]
    for p in conf.get("probes") or []:
        seen = sorted({r["egress"] for r in p.get("reports") or ()})
        out.append(
            f"{'':12}   {p['probe']} from {p['ingress']}: {p.get('fate', '-')}; expected at "
            f"{', '.join(p['expected_exits']) or 'no exit'}, reported at "
            f"{', '.join(seen) or 'no exit'}"
        )
    return out


@dataclass(kw_only=True)
class IntentFinding(Finding):
    """The intended state breaks a policy (cpc.intents), with a witness header."""

    KIND: ClassVar[str] = "intent"
    policy: str = ""
    check: str = ""
    detail_text: str = ""  # the detail key "detail": what the check says (a loop's switches)
    ingress: str | None = None
    egress: str | None = None
    via: list = field(default_factory=list)
    enforce: bool = False
    classes: int = 0
    witness: str = ""
    witness_header: dict = field(default_factory=dict)
    paths: list = field(default_factory=list)
    cause: dict | None = None
    reply: str | None = field(default=None, metadata=OPTIONAL)
    reply_header: dict | None = field(default=None, metadata=OPTIONAL)
    reply_paths: list | None = field(default=None, metadata=OPTIONAL)

    def detail(self) -> dict:
        d = super().detail()
        d["detail"] = d.pop("detail_text")
        return d

    @classmethod
    def from_json(cls, d: dict) -> Finding:
        det = dict(d.get("detail") or {})
        if "detail" in det:
            det["detail_text"] = det.pop("detail")
        return super().from_json({**d, "detail": det})

    def cause_lines(self) -> list[str]:
        cause = self.cause or {}
        text = cause.get("source", "-")
        if cause.get("switch"):
            text += f" at {cause['switch']}"
        if cause.get("xids"):
            text += f", xids {', '.join(str(x) for x in cause['xids'])}"
        if cause.get("flow"):
            text += f": {cause['flow']}"
        out = [f"{'cause':12} {text}"]
        for e in cause.get("entries") or []:
            if e["change"] == "group":
                out.append(f"{'':12}   group {e['group_id']}")
            else:
                out.append(_entry_line(e))
        return out

    def text(self, names: PortNames | None = None) -> str:
        names = names or PortNames()
        out = [
            *self.head(),
            f"{'policy':12} {self.policy} ({self.check}{', enforced' if self.enforce else ''})",
            f"{'finding':12} {self.summary}",
            self.seen(),
            f"{'witness':12} {header_ofctl(self.witness)}  (from {names.named(self.ingress)})",
        ]
        if self.reply:
            out.append(
                f"{'reply':12} {header_ofctl(self.reply)}  (from {names.named(self.egress)})"
            )
        out += self.cause_lines()
        out += _confirmation_lines(self.confirmation)
        out += ["\nthe model's paths for the witness:", outcomes_text(self.paths, names)]
        if self.reply_paths is not None and self.reply:
            out += ["the model's paths for the reply:", outcomes_text(self.reply_paths, names)]
        return "\n".join(out)


@dataclass(kw_only=True)
class PacketInFinding(IntentFinding):
    """A NICE invariant over the PACKET_INs the proxy relays (pazzd.packetins): stored as
    an intent finding named by its check."""


@dataclass(kw_only=True)
class InterferenceFinding(Finding):
    """Entries of two controller applications that meet (cpc.interference)."""

    KIND: ClassVar[str] = "interference"
    relation: str = ""
    dpid: int = 0
    apps: str = ""
    a: dict = field(default_factory=dict)
    b: dict = field(default_factory=dict)
    witness: dict = field(default_factory=dict)
    in_port: int | None = None
    winner: str = ""
    switch: str = ""
    witness_text: str = ""

    def obeyed(self) -> str:
        return (self.confirmation or {}).get("obeyed", "-")

    def row(self) -> tuple[str, ...]:
        a, b = (self.b, self.a) if self.winner == "b" else (self.a, self.b)
        return (
            str(self.id),
            self.state,
            self.relation,
            self.switch,
            f"{a['owner']} t{a['table']} p{a['priority']} {a['match']}",
            f"{b['owner']} t{b['table']} p{b['priority']} {b['match']}",
            self.witness_text + (f" in_port={self.in_port}" if self.in_port else ""),
            self.obeyed(),
        )

    def text(self, names: PortNames | None = None) -> str:
        out = [*self.head(), f"{'finding':12} {self.summary}", self.seen()]
        for side in ("a", "b"):
            s = getattr(self, side)
            won = " (wins)" if self.winner == side else ""
            match = f"{s['match']}," if s["match"] else ""
            out.append(
                f"{side:12} {s['owner']}{won} table={s['table']},priority={s['priority']},"
                f"cookie={s['cookie']},{match}actions={s['actions']}"
            )
        witness = header_ofctl(self.witness_text)
        out.append(
            f"{'witness':12} {witness}" + (f" in_port={self.in_port}" if self.in_port else "")
        )
        out += _confirmation_lines(self.confirmation)
        if self.confirmation:
            out.append(f"{'obeyed':12} {self.obeyed()}")
        return "\n".join(out)


@dataclass(kw_only=True)
class OverwriteFinding(Finding):
    """One application's FlowMod removed or changed entries another owns."""

    KIND: ClassVar[str] = "interference"
    relation: str = "overwrite"
    writer: str = ""
    owner: str = ""
    switch: str = ""
    switch_dpid: str = ""
    flowmod: dict = field(default_factory=dict)
    entries: list = field(default_factory=list)
    count: int = 0

    def row(self) -> tuple[str, ...]:
        fm = self.flowmod
        return (
            str(self.id),
            self.state,
            self.relation,
            self.switch,
            f"{self.writer} {fm.get('command')} {fm.get('match')}",
            f"{self.owner}: {self.count} entr{'y' if self.count == 1 else 'ies'}",
            "-",
            "-",
        )

    def text(self, names: PortNames | None = None) -> str:
        fm = self.flowmod
        out = [
            *self.head(),
            f"{'finding':12} {self.summary}",
            self.seen(),
            f"{'flowmod':12} {fm.get('command')} from {self.writer} (controller "
            f"{fm.get('controller') or '-'}, xid {fm.get('xid')}) table={fm.get('table')} "
            f"priority={fm.get('priority')} cookie={fm.get('cookie')}/{fm.get('cookie_mask')} "
            f"{fm.get('match')}",
            f"{'owner':12} {self.owner}",
        ]
        out += [_entry_line(e) for e in self.entries]
        if self.count > len(self.entries):
            out.append(f"{'':12}   ... {self.count - len(self.entries)} more")
        return "\n".join(out)


@dataclass(kw_only=True)
class AgentFinding(Finding):
    """A switch accepted an entry and forwards otherwise (pazzd.entries)."""

    KIND: ClassVar[str] = "agent"
    reason: str = ""
    switch: str = ""
    dpid: str = ""
    table: int = 0
    priority: int = 0
    match: str = ""
    cookie: str = ""
    rule_id: int = 0
    committed_at: float = 0.0
    probes: list = field(default_factory=list)

    def row(self) -> tuple[str, ...]:
        return (str(self.id), self.state, self.name, when(self.first_seen), self.reason or "-")

    def text(self, names: PortNames | None = None) -> str:
        names = names or PortNames()
        match = f",{self.match}" if self.match else ""
        out = [
            *self.head(),
            f"{'finding':12} {self.summary}",
            f"{'entry':12} {self.switch}: table={self.table},priority={self.priority},"
            f"cookie={self.cookie}{match} (rule_id {self.rule_id})",
            f"{'committed':12} {when(self.committed_at)}",
            self.seen(),
        ]
        for p in self.probes:
            what = p["kind"] + (f" ({p['field']})" if p["field"] else "")
            seen = sorted(
                {f"{r['egress']}{'' if r['allowed'] else ' other tags'}" for r in p["reports"]}
            )
            out += [
                f"\n{what} from {names.named(p['ingress'])}: {p['verdict']}",
                f"  header    {header_ofctl(p['header'])}",
                f"  expected  {', '.join(p['expected_exits']) or 'no exit'}",
                f"  reported  {', '.join(seen) or 'nothing'}",
            ]
        return "\n".join(out)


@dataclass(kw_only=True)
class AuditFault:
    """What the proxy's audit sees of a fault's entry: the `audit` column of a fault (of
    kind audit, or a tester fault the audit merged into; pazzd.audit)."""

    KIND: ClassVar[str] = "audit"
    finding: str
    switch: str
    last_seen: float | None = None
    entry: str | None = None
    intended: str | None = None
    merged_into: int | None = None
    extra: dict = field(default_factory=dict)

    @classmethod
    def from_json(cls, audit: dict) -> AuditFault:
        own = {f.name for f in fields(cls)} - {"extra"}
        return cls(
            **{k: v for k, v in audit.items() if k in own},
            extra={k: v for k, v in audit.items() if k not in own},
        )

    def to_json(self) -> dict:
        d = dataclasses.asdict(self)
        extra = d.pop("extra")
        return {**{k: v for k, v in d.items() if v is not None}, **extra}

    def lines(self) -> list[str]:
        out = [
            f"{'audit':12} {self.finding} entry on {self.switch}, last seen {when(self.last_seen)}"
        ]
        if self.entry:
            out.append(f"{'  entry':12} {self.entry}")
        if self.intended:
            out.append(f"{'  intended':12} {self.intended}")
        if self.merged_into:
            out.append(f"{'  merged':12} into fault {self.merged_into}")
        return out

    def text(self) -> str:
        return "\n".join(self.lines())


def record_class(kind: str, detail: dict) -> type[Finding]:
    if kind == "intent":
        return PacketInFinding if detail.get("check") in PACKET_IN_CHECKS else IntentFinding
    if kind == "interference":
        return OverwriteFinding if detail.get("relation") == "overwrite" else InterferenceFinding
    if kind == "agent":
        return AgentFinding
    return Finding


def record_from_json(d: dict) -> Finding:
    """A finding as the API serves it (to_json), typed by its kind and detail."""
    return record_class(d.get("kind", ""), d.get("detail") or {}).from_json(d)
