"""Importer of the Stanford backbone dataset (routers, ACLs, update trace) into the model.

    net = load("/work/shared/datasets/stanford")
    model = Model(net.topo)
    model.add_entries([], net.groups)          # the VLAN groups, then one (empty) build
    for upd in net.updates:
        for change in net.changes(upd):        # FlowMods and GroupMods; a line may be several
            apply_change(model, change)
    net.write("stanford.yaml", "stanford.jsonl", "stanford-ports.json")

The dataset format is described in the dataset directory's README.md; docs/stanford.md says how each
part of it becomes OpenFlow. In short:

* Every router and every ACL element of topo.txt is a switch. Elements are the devices
  whose ports are `inport`/`permit`; an element `<acl>_<port>_<in|out>` applies the ACL
  of the updates that, with an interface of its router as <port>, spells its name
  (`element_acls`; names may contain `_`). Routers get dpids 1..n in sorted name order,
  ACL elements the following ones.
* Links in topo.txt are directed and a router interface may lead to several devices (a
  shared segment). OpenFlow links are point-to-point and bidirectional, so an interface
  gets one OpenFlow port per device it is linked with, named `IFACE|DEV:PORT`; an
  interface linked with exactly one device (in both directions, or in one and not an
  edge) keeps its plain name. Output to an interface outputs to every port of it that
  leads somewhere in topo.txt (several output actions).
* Edge ports (the exits and entries of the network): `self` on every router; a router
  interface with no outgoing link (its traffic leaves the network) or no incoming link
  (traffic from outside enters there) gets an edge port named after the interface; an
  ACL element's `inport` that nothing feeds, and its `permit` that leads nowhere, are
  edge ports too (they are the host-facing ends of ACL chains).
* OpenFlow port numbers: per device, 1..n in sorted order of the port names.
* `vlanN` outputs use an ALL group with group id N on that router, one bucket per port
  (`vlanN` without a vlan.txt line is the interface of that name, if topo.txt has it).
* The trace must be consistent: priority = prefix length, no second install of an
  installed route (the same prefix, priority and port; host bits do not count, in a
  delete neither) or ACL line, no delete of one that is not installed.
* ECMP: routes to the same prefix at the same priority on one router are one FIB entry
  with several next hops, so they become one flow entry whose action is a SELECT group
  (group id ECMP_GROUP_BASE + n, a bucket per route, in the order they came). The second
  route of a prefix adds the group and points the entry at it; a further one or the
  delete of one of three modifies the group; deleting the second-last points the entry
  back at the remaining route's output and deletes the group. A `vlanN` next hop's
  bucket outputs to every port of the VLAN.
* Forwarding rules: eth_type=ip, ipv4_dst=prefix, priority = the dataset's priority
  (the prefix length).
* ACL rules: inverse masks become OpenFlow masks, `any`/`null` no constraint, protocol
  and port ranges are expanded into the minimal set of value/mask entries (same
  priority, same actions, same rule id). Permit outputs to `permit`, deny drops, and a
  table-miss drops. Priority: see `acl_priorities`.
* Every distinct rule of the trace gets a rule id (set_verify_rule:ID), in order of its
  first appearance, as pazzd's proxy would give; `rule_ids=False` leaves them out.

Errors name the file and the line: StanfordError("topo.txt:12: ...").
"""

from __future__ import annotations

import ipaddress
import json
import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from cpc.fields import PREFIX_MASKS
from cpc.rules import FlowEntry, FlowMod, Group, Instructions, Match, ModelError
from cpc.topology import Topology

ETH_IP = (0x0800, 0xFFFF)
ECMP_GROUP_BASE = 0x10000  # above every VLAN group id (1..4094)
IFACE_PORTS = ("inport", "permit")  # the two ports of an ACL element
VLAN_RE = re.compile(r"vlan(\d+)")


class StanfordError(ModelError):
    """A malformed or inconsistent dataset line; the message starts with `path:line:`."""


@dataclass(frozen=True)
class FwdRule:
    router: str
    prefix: int
    plen: int
    port: str  # interface, vlanN or self
    priority: int

    def key(self) -> tuple:
        """One route: its match key and next hop (host bits do not count)."""
        return (*self.match_key(), self.port)

    def match_key(self) -> tuple:
        """What OpenFlow identifies the entry by: the routes of one key are one ECMP entry."""
        return ("fwd", self.router, self.prefix & PREFIX_MASKS[self.plen], self.plen, self.priority)


@dataclass(frozen=True)
class AclRule:
    acl: str  # <router>_<acl name>, as in the update lines
    permit: bool
    proto: tuple[int, int]
    src: tuple[int, int] | None  # (value, mask) or None for any
    sport: tuple[int, int] | None  # (lo, hi) or None
    dst: tuple[int, int] | None
    dport: tuple[int, int] | None
    priority: int
    text: str  # the rule text after the element name, for identity

    def key(self) -> tuple:
        return ("acl", self.acl, self.text)

    def match_key(self) -> tuple:
        return self.key()  # effective priorities are distinct within an ACL

    @property
    def name(self) -> str:
        """The access-list name of the line (the ACL is `<router>_<name>`)."""
        return self.text.split()[1]


@dataclass(frozen=True)
class Update:
    op: str  # "+" or "-"
    rule: FwdRule | AclRule
    source: str  # "updates:12"
    members: tuple[FwdRule, ...] = ()  # fwd: the routes of the prefix after this line


@dataclass(frozen=True)
class GroupChange:
    """A GroupMod of the trace (an ECMP group): add or modify `group`, or delete it."""

    command: str  # add | modify | delete
    group: Group
    source: str = ""

    def apply(self, model):
        if self.command == "delete":
            return model.delete_group(self.group.dpid, self.group.group_id)
        return model.set_group(self.group)


def apply_change(model, change: FlowMod | GroupChange):
    """Apply one of `Stanford.changes` to a model; returns the model's Update."""
    return change.apply(model) if isinstance(change, GroupChange) else model.apply(change)


@dataclass
class Stanford:
    """The imported network: topology, port names, groups and the parsed update trace."""

    topo: Topology
    routers: list[str]
    dpid_of: dict[str, int]
    elements: dict[str, list[str]]  # ACL (router_acl) -> element devices applying it
    port_of: dict[tuple[str, str], int]  # (device, port name) -> OpenFlow port
    port_info: dict[tuple[int, int], tuple[str, str, tuple[str, str] | None]]
    send: dict[tuple[str, str], tuple[int, ...]]  # (device, iface) -> ports to output to
    vlans: dict[tuple[str, str], list[str]]  # (router, vlanN) -> member interfaces
    groups: list[Group]
    updates: list[Update]
    acl_priority: dict[tuple, int] = field(default_factory=dict)  # rule key -> effective
    rule_id: dict[tuple, int] = field(default_factory=dict)  # rule key -> rule id
    rule_ids: bool = True
    inject: dict[str, int] = field(default_factory=dict)  # router -> extra edge port (tests)
    element_acl: dict[str, str | None] = field(default_factory=dict)  # element -> its ACL
    ecmp_gid: dict[tuple, int] = field(default_factory=dict)  # route match key -> group id

    # --- rules ------------------------------------------------------------------------------
    def _rid(self, key: tuple) -> int:
        return self.rule_id.get(key, 0) if self.rule_ids else 0

    def entries(self, rule: FwdRule | AclRule) -> list[FlowEntry]:
        """The flow entries of one dataset rule (several for an ACL on several interfaces);
        for a route, the entry as if it were the only one of its prefix."""
        if isinstance(rule, FwdRule):
            if (rule.router, rule.port) in self.vlans:
                ins = Instructions((("group", vlan_id(rule.port)),))
            else:
                ins = Instructions(self._outputs(rule))
            return [self._route_entry(rule, ins, self._rid(rule.key()))]
        rid = self._rid(rule.key())
        prio = self.acl_priority[rule.key()]
        matches = acl_matches(rule)
        out = []
        for el in self.elements[rule.acl]:
            dpid = self.dpid_of[el]
            if rule.permit:
                ins = Instructions(tuple(("output", p) for p in self.send[(el, "permit")]))
            else:
                ins = Instructions()
            out += [FlowEntry(dpid, 0, prio, m, ins, rule_id=rid) for m in matches]
        return out

    def _route_entry(self, rule: FwdRule, ins: Instructions, rid: int) -> FlowEntry:
        mask = PREFIX_MASKS[rule.plen]
        m = Match.build({"eth_type": ETH_IP, "ipv4_dst": (rule.prefix & mask, mask)})
        return FlowEntry(self.dpid_of[rule.router], 0, rule.priority, m, ins, rule_id=rid)

    def _outputs(self, rule: FwdRule) -> tuple:
        """The output actions of a route's next hop (every port of a VLAN's members)."""
        ifaces = self.vlans.get((rule.router, rule.port), [rule.port])
        return tuple(("output", p) for i in ifaces for p in self.send[(rule.router, i)])

    def _ecmp(self, members: tuple[FwdRule, ...]) -> tuple[FlowEntry, Group]:
        """The entry and SELECT group of a prefix with several routes."""
        first = members[0]
        gid = self.ecmp_gid[first.match_key()]
        group = Group(self.dpid_of[first.router], gid, "select", tuple(map(self._outputs, members)))
        rid = self._rid(("ecmp", *first.match_key()[1:]))
        return self._route_entry(first, Instructions((("group", gid),)), rid), group

    def changes(self, upd: Update) -> list[FlowMod | GroupChange]:
        """The OpenFlow changes of one trace line, in the order a switch needs them: adds
        for '+', strict deletes for '-', and for a prefix with several routes the GroupMods
        of its ECMP group (apply each with `apply_change`)."""
        rule, n = upd.rule, len(upd.members)
        if not isinstance(rule, FwdRule) or (n == 1 and upd.op == "+") or n == 0:
            return [self._flowmod(upd.op, e, upd.source) for e in self.entries(rule)]
        if n == 1:  # '-' leaves one route: the entry outputs to it again, then no group
            (e,) = self.entries(upd.members[0])
            _, group = self._ecmp((rule, *upd.members))
            return [self._flowmod("+", e, upd.source), GroupChange("delete", group, upd.source)]
        entry, group = self._ecmp(upd.members)
        if n == 2 and upd.op == "+":  # the second route: the group, then the entry uses it
            return [GroupChange("add", group, upd.source), self._flowmod("+", entry, upd.source)]
        return [GroupChange("modify", group, upd.source)]

    @staticmethod
    def _flowmod(op: str, e: FlowEntry, source: str) -> FlowMod:
        if op == "+":
            fm = FlowMod("add", e.dpid, 0, e.priority, e.match, e.instructions)
            fm.rule_id = e.rule_id
        else:
            fm = FlowMod("delete_strict", e.dpid, 0, e.priority, e.match)
        fm.source = source
        return fm

    def present(self, upto: int | None = None) -> list[FwdRule | AclRule]:
        """The dataset rules installed after the first `upto` updates (all: None)."""
        cur: dict[tuple, FwdRule | AclRule] = {}
        for upd in self.updates[:upto]:
            if upd.op == "+":
                cur[upd.rule.key()] = upd.rule
            else:
                cur.pop(upd.rule.key(), None)
        return list(cur.values())

    def inserted(self) -> list[FwdRule | AclRule]:
        """The rules present when the inserts are over (before the first delete)."""
        n = next((i for i, u in enumerate(self.updates) if u.op == "-"), len(self.updates))
        return self.present(n)

    def entries_of(self, rules) -> list[FlowEntry]:
        """The flow entries of a set of rules (one per prefix with several routes)."""
        return self.state(rules)[0]

    def state(self, rules) -> tuple[list[FlowEntry], list[Group]]:
        routes: dict[tuple, list[FwdRule]] = defaultdict(list)
        entries = []
        for r in rules:
            if isinstance(r, FwdRule):
                routes[r.match_key()].append(r)
            else:
                entries += self.entries(r)
        groups = list(self.groups)
        for members in routes.values():
            if len(members) == 1:
                entries += self.entries(members[0])
            else:
                e, g = self._ecmp(tuple(members))
                entries.append(e)
                groups.append(g)
        return entries, groups

    # --- names ------------------------------------------------------------------------------
    def port_label(self, p: tuple[int, int]) -> str:
        """'device iface' (plus '-> dev:port' for a port of a shared interface)."""
        dev, iface, peer = self.port_info[p]
        return f"{dev} {iface}" + (f" -> {peer[0]}:{peer[1]}" if peer else "")

    # --- files ------------------------------------------------------------------------------
    def topology_yaml(self) -> str:
        """The topology in cpc.topology's YAML, with the interface names of every port."""
        t = self.topo
        data = {
            "switches": [
                {"name": s.name, "dpid": s.dpid, "ports": dict(sorted(s.ports.items()))}
                for s in sorted(t.switches.values(), key=lambda s: s.dpid)
            ],
            "links": [
                [t.port_name(a), t.port_name(b)] for a, b in sorted(t.links.items()) if a < b
            ],
            "edge": [{"port": t.port_name(p), "name": n} for p, n in sorted(t.edges.items())],
        }
        return yaml.safe_dump(data, sort_keys=False, default_flow_style=None, width=1000)

    def write(self, topo_path, rules_path, ports_path=None, rules=None) -> int:
        """Write the topology YAML, the rule JSON lines (default: the rules present after
        the inserts) and optionally the port map JSON. Returns the number of flows."""
        from cpc.ofctl import write_rules

        Path(topo_path).write_text(self.topology_yaml())
        entries, groups = self.state(self.inserted() if rules is None else rules)
        write_rules(rules_path, entries, groups)
        if ports_path is not None:
            doc = {
                dev: {name: port for (d, name), port in sorted(self.port_of.items()) if d == dev}
                for dev in sorted(self.dpid_of, key=self.dpid_of.get)
            }
            Path(ports_path).write_text(json.dumps(doc, indent=1) + "\n")
        return len(entries)


# --- ranges and masks --------------------------------------------------------------------------
def range_to_masks(lo: int, hi: int, width: int) -> list[tuple[int, int]]:
    """The minimal list of disjoint (value, mask) prefixes covering exactly lo..hi."""
    if not 0 <= lo <= hi < 1 << width:
        raise ValueError(f"range {lo}..{hi} is not within 0..{(1 << width) - 1}")
    full = (1 << width) - 1
    out = []
    while lo <= hi:
        size = lo & -lo if lo else 1 << width  # largest aligned block starting at lo
        while size > hi - lo + 1:
            size >>= 1
        out.append((lo, full & ~(size - 1)))
        lo += size
    return out


def acl_matches(rule: AclRule) -> list[Match]:
    """The OpenFlow matches of one ACL rule: the product of its range expansions."""
    base: dict[str, tuple[int, int]] = {"eth_type": ETH_IP}
    if rule.src is not None:
        base["ipv4_src"] = rule.src
    if rule.dst is not None:
        base["ipv4_dst"] = rule.dst
    protos = [None] if rule.proto == (0, 255) else range_to_masks(*rule.proto, 8)
    sports = [None] if rule.sport in (None, (0, 0xFFFF)) else range_to_masks(*rule.sport, 16)
    dports = [None] if rule.dport in (None, (0, 0xFFFF)) else range_to_masks(*rule.dport, 16)
    out = []
    for pr in protos:
        for sp in sports:
            for dp in dports:
                v = dict(base)
                if pr is not None:
                    v["ip_proto"] = pr
                if sp is not None:
                    v["tp_src"] = sp
                if dp is not None:
                    v["tp_dst"] = dp
                out.append(Match.build(v))
    return out


# --- parsing ---------------------------------------------------------------------------------------
def _err(path: Path, no: int, msg: str) -> StanfordError:
    return StanfordError(f"{path}:{no}: {msg}")


def _int(text: str, what: str, lo: int, hi: int) -> int:
    try:
        v = int(text)
    except ValueError:
        raise ValueError(f"{what} {text!r} is not a number") from None
    if not lo <= v <= hi:
        raise ValueError(f"{what} {v} is out of range {lo}..{hi}")
    return v


def _addr(addr: str, wildcard: str, what: str) -> tuple[int, int] | None:
    if addr in ("any", "null"):
        return None
    try:
        value = int(ipaddress.IPv4Address(addr))
        wc = 0 if wildcard == "null" else int(ipaddress.IPv4Address(wildcard))
    except ValueError:
        raise ValueError(f"{what} {addr} {wildcard} is not an address and wildcard") from None
    mask = ~wc & 0xFFFFFFFF
    return (value & mask, mask) if mask else None


def _range(lo: str, hi: str, width: int, what: str) -> tuple[int, int] | None:
    """Cisco port/protocol range; `null` low: any; `null` high: up to the maximum."""
    top = (1 << width) - 1
    if lo in ("null", "any"):
        return None
    a = _int(lo, what, 0, top)
    b = top if hi in ("null", "any") else _int(hi, what, 0, top)
    if a > b:
        raise ValueError(f"{what} range {a}..{b} is empty")
    return (a, b)


def parse_acl(tokens: list[str]) -> AclRule:
    """Tokens after '+|- acl': element access-list NAME permit|deny proto.. src.. dst.. prio."""
    if len(tokens) != 15 or tokens[1] != "access-list":
        raise ValueError(
            "an ACL line is 'acl ELEMENT access-list NAME permit|deny PROTO_LO PROTO_HI SRC "
            "SRC_WC SPORT_LO SPORT_HI DST DST_WC DPORT_LO DPORT_HI PRIORITY'"
        )
    acl, _, _name, action = tokens[:4]
    if action not in ("permit", "deny"):
        raise ValueError(f"ACL action {action!r} is not permit or deny")
    proto = _range(tokens[4], tokens[5], 8, "protocol") or (0, 255)
    src = _addr(tokens[6], tokens[7], "source")
    sport = _range(tokens[8], tokens[9], 16, "source port")
    dst = _addr(tokens[10], tokens[11], "destination")
    dport = _range(tokens[12], tokens[13], 16, "destination port")
    prio = _int(tokens[14], "priority", 0, 0xFFFF)
    for rng in (sport, dport):
        if rng not in (None, (0, 0xFFFF)) and proto not in ((6, 6), (17, 17)):
            raise ValueError(
                "transport ports need protocol 6 or 17 exactly (OpenFlow has no ports otherwise)"
            )
    return AclRule(
        acl, action == "permit", proto, src, sport, dst, dport, prio, " ".join(tokens[1:])
    )


def parse_fwd(tokens: list[str]) -> FwdRule:
    """Tokens after '+|- fwd': router dst plen port priority."""
    if len(tokens) != 5:
        raise ValueError("a forwarding line is 'fwd ROUTER DST PREFIXLEN PORT PRIORITY'")
    router, dst, plen, port, prio = tokens
    rule = FwdRule(
        router,
        _int(dst, "destination", 0, 0xFFFFFFFF),
        _int(plen, "prefix length", 0, 32),
        port,
        _int(prio, "priority", 0, 0xFFFF),
    )
    if rule.priority != rule.plen:
        raise ValueError(
            f"priority {rule.priority} is not the prefix length {rule.plen} "
            "(forwarding is longest-prefix match)"
        )
    return rule


def _lines(path: Path):
    try:
        text = path.read_text()
    except OSError as e:
        raise StanfordError(f"{path}: {e.strerror}") from None
    for no, line in enumerate(text.splitlines(), 1):
        s = line.split("#", 1)[0].strip()
        if s:
            yield no, s.split()


def vlan_id(port: str) -> int | None:
    """N for a name `vlanN`, else None (`vlan.100`, `Vlan200` are interfaces). An out port
    `vlanN` is the VLAN of vlan.txt, or else an interface of that name in topo.txt."""
    m = VLAN_RE.fullmatch(port)
    return int(m.group(1)) if m else None


def _read_topo(path: Path):
    """Directed links, and each device's ports with the line that first names them."""
    outs: dict[tuple[str, str], set[tuple[str, str]]] = defaultdict(set)
    ins: dict[tuple[str, str], set[tuple[str, str]]] = defaultdict(set)
    ports: dict[str, dict[str, int]] = defaultdict(dict)
    for no, t in _lines(path):
        if len(t) != 4:
            raise _err(path, no, "a link is 'DEVICE PORT DEVICE PORT'")
        a, b = (t[0], t[1]), (t[2], t[3])
        if a == b:
            raise _err(path, no, "a link from a port to itself")
        for dev, port in (a, b):
            seen = ports[dev]
            if port == "self":
                raise _err(path, no, f"{dev} port 'self': 'self' is the router itself")
            other = next((p for p in seen if (p in IFACE_PORTS) != (port in IFACE_PORTS)), None)
            if other is not None:
                raise _err(
                    path,
                    no,
                    f"{dev} has port {port!r} and port {other!r} (line {seen[other]}): a device "
                    "is an ACL element (ports inport and permit) or a router (interfaces)",
                )
            seen.setdefault(port, no)
        outs[a].add(b)
        ins[b].add(a)
    return outs, ins, ports


def _acl_routers(updates: list[Update], routers: set[str], path: Path) -> dict[str, str]:
    """ACL (`<router>_<name>`, as the update lines name it) -> its router."""
    out: dict[str, str] = {}
    name_of: dict[str, tuple[str, str]] = {}
    for upd in updates:
        r = upd.rule
        if not isinstance(r, AclRule):
            continue
        where = path.parent / upd.source
        prev = name_of.setdefault(r.acl, (r.name, upd.source))
        if prev[0] != r.name:
            raise StanfordError(
                f"{where}: ACL {r.acl} is access-list {r.name} here and {prev[0]} at {prev[1]}"
            )
        if r.acl in out:
            continue
        router = r.acl[: -len(r.name) - 1] if r.acl.endswith("_" + r.name) else None
        if router not in routers:
            raise StanfordError(
                f"{where}: unknown device {r.acl!r} (an ACL is named <router>_{r.name}, and "
                + (f"{router!r} is not a router in topo.txt)" if router else "it does not end so)")
            )
        out[r.acl] = router
    return out


def element_acls(
    elements: list[str],
    acl_router: dict[str, str],
    router_ifaces: dict[str, set[str]],
    first_line,
) -> dict[str, str | None]:
    """The ACL each element applies. An element is `<acl>_<port>_<in|out>` with <acl> an ACL
    the updates name and <port> an interface of that ACL's router (in topo.txt or vlan.txt);
    both may contain `_`. Two readings: an error; none: an ACL without lines (None).
    first_line(el) -> (path, line) for errors."""
    out: dict[str, str | None] = {}
    for el in elements:
        stem = next((el[: -len(d)] for d in ("_in", "_out") if el.endswith(d)), None)
        if stem is None:
            raise _err(
                *first_line(el),
                f"ACL element {el!r} (ports inport/permit) is not named "
                "<router>_<acl>_<port>_in or _out",
            )
        fits = [
            (stem[:i], stem[i + 1 :])
            for i, ch in enumerate(stem)
            if ch == "_"
            and stem[:i] in acl_router
            and stem[i + 1 :] in router_ifaces[acl_router[stem[:i]]]
        ]
        if len(fits) > 1:
            readings = " or ".join(f"ACL {a} on {acl_router[a]} {p}" for a, p in fits)
            raise _err(*first_line(el), f"ACL element {el!r} is ambiguous: {readings}")
        out[el] = fits[0][0] if fits else None
    return out


def load(directory: str | Path, rule_ids: bool = True, inject_ports: bool = False) -> Stanford:
    """Import a dataset directory (topo.txt, vlan.txt, updates).

    inject_ports adds one extra edge port named `inject` on every router, to send test
    packets in "at the router" (it changes no rule).
    """
    d = Path(directory)
    topo_path, vlan_path, upd_path = d / "topo.txt", d / "vlan.txt", d / "updates"

    # Directed links. A device whose ports are `inport`/`permit` is an ACL element.
    outs, ins, dev_ports = _read_topo(topo_path)
    routers = sorted(x for x, ps in dev_ports.items() if not set(ps) <= set(IFACE_PORTS))
    element_names = sorted(x for x in dev_ports if x not in set(routers))
    known = set(routers)
    ifaces: dict[str, set[str]] = {r: {"self"} for r in routers}
    for el in element_names:
        ifaces[el] = set(IFACE_PORTS)
    for dev, port in list(outs) + list(ins):
        ifaces[dev].add(port)
    if inject_ports:
        for r in routers:
            if "inject" in ifaces[r]:
                raise StanfordError(f"{topo_path}: {r} has an interface 'inject' (the test port)")

    # VLANs.
    vlans: dict[tuple[str, str], list[str]] = {}
    vlan_line: dict[tuple[str, int], int] = {}
    linked = {r: set(ifaces[r]) for r in routers}  # the interfaces topo.txt names
    if vlan_path.exists():
        for no, t in _lines(vlan_path):
            if len(t) < 3 or vlan_id(t[1]) is None:
                raise _err(vlan_path, no, "a VLAN line is 'ROUTER vlanN PORT PORT ...'")
            if t[0] not in known:
                raise _err(vlan_path, no, f"unknown device {t[0]!r} (not a router in topo.txt)")
            if (t[0], t[1]) in vlans:
                raise _err(vlan_path, no, f"{t[0]} {t[1]} is defined twice")
            if t[1] in linked[t[0]]:
                raise _err(vlan_path, no, f"{t[0]} {t[1]} is also an interface in topo.txt")
            prev = vlan_line.setdefault((t[0], vlan_id(t[1])), no)
            if prev != no:
                raise _err(vlan_path, no, f"{t[0]} {t[1]} has the number of line {prev}")
            for m in t[2:]:
                if m == "self" or (inject_ports and m == "inject"):
                    raise _err(vlan_path, no, f"VLAN member {m!r} is not an interface")
            vlans[(t[0], t[1])] = sorted(set(t[2:]))
            ifaces[t[0]].update(t[2:])
    topo_ifaces = {r: set(ifaces[r]) - {"self"} for r in routers}

    # The update trace.
    updates: list[Update] = []
    present: dict[tuple, tuple[tuple, str]] = {}  # rule key -> (match key, source)
    routes: dict[tuple, list[FwdRule]] = defaultdict(list)  # match key -> routes, in order
    ecmp_gid: dict[tuple, int] = {}
    for no, t in _lines(upd_path):
        where = f"{upd_path.name}:{no}"
        try:
            if len(t) < 2 or t[0] not in "+-" or len(t[0]) != 1:
                raise ValueError("an update starts with '+' or '-' and 'fwd' or 'acl'")
            if t[1] == "fwd":
                rule = parse_fwd(t[2:])
                if rule.router not in known:
                    raise ValueError(f"unknown device {rule.router!r} (not a router in topo.txt)")
                if (rule.router, rule.port) in vlans:
                    pass
                elif vlan_id(rule.port) is not None and rule.port not in linked[rule.router]:
                    raise ValueError(
                        f"{rule.router} has no {rule.port} in vlan.txt (nor an interface "
                        f"{rule.port} in topo.txt)"
                    )
                elif inject_ports and rule.port == "inject":
                    raise ValueError("out port 'inject' is the test port, not an interface")
                elif rule.port != "self":
                    ifaces[rule.router].add(rule.port)
            elif t[1] == "acl":
                rule = parse_acl(t[2:])
            else:
                raise ValueError(f"unknown update type {t[1]!r} (fwd or acl)")
            key, mk = rule.key(), rule.match_key()
            if t[0] == "+" and key in present:
                what = "route (prefix, priority and port)" if isinstance(rule, FwdRule) else "line"
                raise ValueError(f"{present[key][1]} installed the same {what}, not deleted since")
            if t[0] == "-" and key not in present:
                raise ValueError("deletes a rule that is not installed")
        except ValueError as e:
            raise _err(upd_path, no, str(e)) from None
        members: tuple[FwdRule, ...] = ()
        if t[0] == "+":
            present[key] = (mk, where)
        else:
            del present[key]
        if isinstance(rule, FwdRule):
            ms = routes[mk]
            if t[0] == "+":
                ms.append(rule)
            else:  # the member installed, whose line may spell other host bits
                del ms[next(i for i, m in enumerate(ms) if m.key() == key)]
            members = tuple(ms)
            if len(ms) > 1:
                ecmp_gid.setdefault(mk, ECMP_GROUP_BASE + len(ecmp_gid))
            if not ms:
                del routes[mk]
        updates.append(Update(t[0], rule, where, members))

    # ACL elements: which ACL each applies (element_acls).
    acl_router = _acl_routers(updates, known, upd_path)

    def first_line(el):
        return topo_path, min(dev_ports[el].values())

    element_acl = element_acls(element_names, acl_router, topo_ifaces, first_line)
    elements: dict[str, list[str]] = defaultdict(list)
    for el, acl in element_acl.items():
        if acl is not None:
            elements[acl].append(el)
    for upd in updates:
        if isinstance(upd.rule, AclRule) and upd.rule.acl not in elements:
            acl, router = upd.rule.acl, acl_router[upd.rule.acl]
            raise StanfordError(
                f"{d / upd.source}: unknown device {acl!r} (no ACL element in topo.txt is "
                f"named {acl}_<port>_in or _out with <port> an interface of {router})"
            )

    # Ports: one per linked device of an interface, plus an edge port where needed.
    dpid_of = {name: i for i, name in enumerate(routers + element_names, 1)}
    port_names: dict[str, dict[str, tuple[str, tuple[str, str] | None]]] = {}
    edge_names: dict[tuple[str, str], str] = {}  # (device, port name) -> what it faces
    link_port: dict[tuple[tuple[str, str], tuple[str, str]], str] = {}  # (end, peer) -> name
    for dev in routers + element_names:
        names: dict[str, tuple[str, tuple[str, str] | None]] = {}
        for iface in sorted(ifaces[dev]):
            end = (dev, iface)
            o, i = outs.get(end, set()), ins.get(end, set())
            peers = sorted(o | i)
            if dev not in known:
                needs_edge = (iface == "inport" and not i) or (iface == "permit" and not o)
            else:
                needs_edge = iface == "self" or not o or not i
            if inject_ports and iface == "self":
                names["inject"] = ("inject", None)
                edge_names[(dev, "inject")] = f"{dev} (test injection)"
            if needs_edge:
                names[iface] = (iface, None)
                edge_names[(dev, iface)] = f"{dev} {iface}"
            for peer in peers:
                pname = (
                    iface if len(peers) == 1 and not needs_edge else f"{iface}|{peer[0]}:{peer[1]}"
                )
                names[pname] = (iface, peer)
                link_port[(end, peer)] = pname
        port_names[dev] = names

    topo = Topology()
    port_of: dict[tuple[str, str], int] = {}
    port_info: dict[tuple[int, int], tuple[str, str, tuple[str, str] | None]] = {}
    for dev, names in port_names.items():
        dpid = dpid_of[dev]
        ordered = sorted(names)
        sw = topo.add_switch(dpid, dev)
        for num, pname in enumerate(ordered, 1):
            sw.ports[num] = pname
            port_of[(dev, pname)] = num
            iface, peer = names[pname]
            port_info[(dpid, num)] = (dev, iface, peer)
    done = set()
    for (end, peer), pname in sorted(link_port.items()):
        if (peer, end) in done:
            continue
        done.add((end, peer))
        a = (dpid_of[end[0]], port_of[(end[0], pname)])
        b = (dpid_of[peer[0]], port_of[(peer[0], link_port[(peer, end)])])
        topo.add_link(a, b)
    for (dev, pname), what in sorted(edge_names.items()):
        topo.add_edge((dpid_of[dev], port_of[(dev, pname)]), what)

    send: dict[tuple[str, str], tuple[int, ...]] = {}
    for dev in routers + element_names:
        for iface in ifaces[dev]:
            o = outs.get((dev, iface))
            if o:
                send[(dev, iface)] = tuple(
                    sorted(port_of[(dev, link_port[((dev, iface), p)])] for p in o)
                )
            elif (dev, iface) in port_of:
                send[(dev, iface)] = (port_of[(dev, iface)],)
    groups = [
        Group(
            dpid_of[r],
            int(v[4:]),
            "all",
            tuple((("output", p),) for m in members for p in send[(r, m)]),
        )
        for (r, v), members in sorted(vlans.items())
    ]
    net = Stanford(
        topo=topo,
        routers=routers,
        dpid_of=dpid_of,
        elements=dict(elements),
        port_of=port_of,
        port_info=port_info,
        send=send,
        vlans=vlans,
        groups=groups,
        updates=updates,
        rule_ids=rule_ids,
        inject={r: port_of[(r, "inject")] for r in routers} if inject_ports else {},
        element_acl=element_acl,
        ecmp_gid=ecmp_gid,
    )
    net.acl_priority = acl_priorities(updates, upd_path)
    for upd in updates:
        net.rule_id.setdefault(upd.rule.key(), len(net.rule_id) + 1)
        if len(upd.members) > 1:  # the ECMP entry is a rule of its own
            net.rule_id.setdefault(("ecmp", *upd.rule.match_key()[1:]), len(net.rule_id) + 1)
    return net


def acl_priorities(updates: list[Update], path: Path | str = "updates") -> dict[tuple, int]:
    """Effective OpenFlow priorities of the ACL rules of a trace.

    Per ACL, the distinct rules are put in first-match order: dataset priority
    descending, then order of first appearance in the trace. Walking that order, each
    rule gets min(its priority, previous effective priority - 1). A rule keeps its
    dataset priority unless it shares it with an earlier line (then it and the ones
    after it move down just enough to stay strictly ordered). Below 0 is an error.
    """
    per_acl: dict[str, list[tuple[int, int, AclRule, str]]] = defaultdict(list)
    seen: set[tuple] = set()
    for i, upd in enumerate(updates):
        r = upd.rule
        if isinstance(r, AclRule) and r.key() not in seen:
            seen.add(r.key())
            per_acl[r.acl].append((-r.priority, i, r, upd.source))
    out: dict[tuple, int] = {}
    for rules in per_acl.values():
        prev = None
        for _, _, r, src in sorted(rules, key=lambda x: (x[0], x[1])):
            eff = r.priority if prev is None else min(r.priority, prev - 1)
            if eff < 0:
                raise StanfordError(
                    f"{Path(path).parent / src}: too many ACL lines share low priorities "
                    "to keep their order within OpenFlow priorities"
                )
            out[r.key()] = eff
            prev = eff
    return out


def main(argv=None) -> None:
    import argparse

    ap = argparse.ArgumentParser(description="Write a Stanford dataset as model files.")
    ap.add_argument("dataset", help="directory with topo.txt, vlan.txt, updates")
    ap.add_argument("--topology", required=True, help="topology YAML to write")
    ap.add_argument("--rules", required=True, help="rule JSON lines to write")
    ap.add_argument("--ports", help="port map JSON to write (device -> interface -> port)")
    ap.add_argument("--no-rule-ids", action="store_true")
    args = ap.parse_args(argv)
    net = load(args.dataset, rule_ids=not args.no_rule_ids)
    n = net.write(args.topology, args.rules, args.ports)
    print(f"{len(net.topo.switches)} switches, {n} flows, {len(net.groups)} groups")


if __name__ == "__main__":
    main()
