"""Reading rules: the ovs-ofctl flow and group syntax, dump-flows output, and JSON lines.

Rule files are either JSON lines, one object per line:

    {"dpid": 1, "flow": "table=0,priority=10,ip,nw_dst=10.0.0.0/24,actions=output:2"}
    {"dpid": 1, "group": "group_id=1,type=select,bucket=output:1,bucket=output:2"}

or the text that `ovs-ofctl -O OpenFlow13 --no-names dump-flows BR` (and `dump-groups`)
prints, with a `## dpid=N` line before each switch's section. Every error names the
file and line.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

from . import yamlpos
from .fields import (
    ALIASES,
    ETH_TYPE_IPV4,
    FIELD_NAMES,
    IP_FIELDS,
    OFPVID_PRESENT,
    PROTO_OF_ALIAS,
    TP_FIELDS,
    WIDTH,
    format_value,
    parse_value,
)
from .rules import (
    GROUP_TYPES,
    OFPFF_CHECK_OVERLAP,
    OFPFF_NO_BYT_COUNTS,
    OFPFF_NO_PKT_COUNTS,
    OFPFF_RESET_COUNTS,
    OFPFF_SEND_FLOW_REM,
    OFPP_ALL,
    OFPP_ANY,
    OFPP_CONTROLLER,
    OFPP_FLOOD,
    OFPP_IN_PORT,
    OFPP_LOCAL,
    OFPP_MAX,
    OFPP_NORMAL,
    OFPP_TABLE,
    FlowEntry,
    FlowMod,
    Group,
    Instructions,
    Match,
    ModelError,
    select_weights,
)

PROTOCOL_WORDS = {
    "ip": {"eth_type": 0x0800},
    "ipv4": {"eth_type": 0x0800},
    "tcp": {"eth_type": 0x0800, "ip_proto": 6},
    "udp": {"eth_type": 0x0800, "ip_proto": 17},
    "icmp": {"eth_type": 0x0800, "ip_proto": 1},
    "arp": {"eth_type": 0x0806},
}
# Keys of dump-flows output and FlowMod options that carry no match semantics.
STAT_KEYS = {"duration", "n_packets", "n_bytes", "idle_age", "hard_age", "importance"}
FLAG_WORDS = {
    "send_flow_rem": OFPFF_SEND_FLOW_REM,
    "check_overlap": OFPFF_CHECK_OVERLAP,
    "reset_counts": OFPFF_RESET_COUNTS,
    "no_packet_counts": OFPFF_NO_PKT_COUNTS,
    "no_byte_counts": OFPFF_NO_BYT_COUNTS,
}
SPECIAL_PORTS = {
    "in_port": OFPP_IN_PORT,
    "table": OFPP_TABLE,
    "normal": OFPP_NORMAL,
    "flood": OFPP_FLOOD,
    "all": OFPP_ALL,
    "controller": OFPP_CONTROLLER,
    "local": OFPP_LOCAL,
    "any": OFPP_ANY,
    "none": OFPP_ANY,
}
# Actions that change nothing the model matches on: accepted as no-ops.
NOOP_ACTIONS = {
    "dec_ttl",
    "set_queue",
    "meter",
    "note",
    "mod_nw_tos",
    "mod_nw_ecn",
    "set_mpls_ttl",
    "dec_mpls_ttl",
}
VERIFY_ACTIONS = {"push_verify", "pop_verify", "set_verify_port"}


def split_top(text: str, sep: str = ",") -> list[str]:
    """Split on sep outside parentheses."""
    parts, depth, cur = [], 0, []
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == sep and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    if cur or parts:
        parts.append("".join(cur))
    return [p.strip() for p in parts if p.strip()]


def parse_port(text: str) -> int:
    t = text.strip().strip('"')
    if t.lower() in SPECIAL_PORTS:
        return SPECIAL_PORTS[t.lower()]
    try:
        port = int(t, 0)
    except ValueError:
        raise ModelError(f"port {text!r} is not a number (dump flows with --no-names)") from None
    if not 0 < port < OFPP_MAX and port not in SPECIAL_PORTS.values():
        raise ModelError(f"port {port} is out of range")
    return port


def parse_actions(text: str) -> tuple[Instructions, int]:
    """Parse an ovs-ofctl action list into (instructions, rule_id)."""
    apply: list[tuple] = []
    write: list[tuple] = []
    clear = False
    goto = None
    rule_id = 0
    for item in split_top(text):
        low = item.lower()
        if low == "drop":
            continue
        if low == "clear_actions":
            clear = True
            continue
        if low.startswith("write_actions(") and item.endswith(")"):
            inner, _ = parse_actions(item[len("write_actions(") : -1])
            write.extend(inner.apply)
            continue
        if low.startswith("goto_table:"):
            goto = _int(item.split(":", 1)[1], "goto_table")
            continue
        if low.startswith("set_verify_rule"):
            rule_id = _int(item.split(":", 1)[1], "set_verify_rule") if ":" in item else 0
            continue
        apply.append(parse_action(item))
    return Instructions(tuple(a for a in apply if a), tuple(write), clear, goto), rule_id


def parse_action(item: str) -> tuple:
    name, _, arg = item.partition(":")
    if "(" in name:
        name = name.split("(", 1)[0]
    name = name.strip().lower()
    if arg == "" and name.isdigit():
        return ("output", parse_port(name))
    if name == "output":
        return ("output", parse_port(arg))
    if name in SPECIAL_PORTS and name not in ("any", "none", "table", "normal"):
        return ("output", SPECIAL_PORTS[name])
    if name in ("table", "normal", "resubmit", "learn", "ct", "enqueue", "bundle", "multipath"):
        raise ModelError(
            f"action {item!r} is not modelled (the model needs explicit OpenFlow forwarding)"
        )
    if name == "group":
        return ("group", _int(arg, "group"))
    if name == "set_field" or name == "load" and "->" in arg:
        value_text, _, target = arg.partition("->")
        field = ALIASES.get(target.strip())
        if field is None:
            if target.strip() in ("nw_tos", "ip_dscp", "nw_ttl", "ip_ecn"):
                return ()
            raise ModelError(f"set_field on {target!r} is not modelled")
        value, _ = _value(field, value_text)
        return ("set_field", field, value)
    if name.startswith("mod_") or name.startswith("set_"):
        target = name[4:]
        if target in ("vlan_vid",):
            return ("set_field", "vlan_vid", OFPVID_PRESENT | _int(arg, name))
        field = ALIASES.get(target)
        if field is not None:
            value, _ = _value(field, arg)
            return ("set_field", field, value)
    if name in ("strip_vlan", "pop_vlan"):
        return ("pop_vlan",)
    if name == "push_vlan":
        return ("push_vlan",)
    if name in NOOP_ACTIONS or name in VERIFY_ACTIONS:
        return ()
    raise ModelError(f"action {item!r} is not modelled")


def parse_flow(text: str, dpid: int, command: str = "add") -> FlowMod:
    """Parse one flow in ovs-ofctl syntax (add-flow form or a dump-flows line)."""
    text = text.strip()
    # dump-flows separates the match from the actions with a space, add-flow with a comma.
    idx = text.find("actions=")
    if idx < 0:
        if command.startswith("delete"):
            head, actions = text, None
        else:
            raise ModelError("flow has no actions= part")
    else:
        head, actions = text[:idx].rstrip(", "), text[idx + len("actions=") :]
    values: dict[str, tuple[int, int]] = {}
    fm = FlowMod(command=command, dpid=dpid)
    in_port = None
    for item in _items(head):
        key, sep, val = item.partition("=")
        key = key.strip().lower()
        if not sep:
            if key in FLAG_WORDS:
                fm.flags |= FLAG_WORDS[key]
            else:
                add_match_item(values, key, sep, val)
            continue
        if key in STAT_KEYS:
            continue
        if key == "table":
            fm.table = _int(val, "table")
        elif key == "priority":
            fm.priority = _int(val, "priority")
        elif key == "cookie":
            value_text, _, mask_text = val.partition("/")
            fm.cookie = _int(value_text, "cookie")
            fm.cookie_mask = _int(mask_text, "cookie mask") if mask_text else 0
        elif key == "idle_timeout":
            fm.idle_timeout = _int(val, key)
        elif key == "hard_timeout":
            fm.hard_timeout = _int(val, key)
        elif key == "out_port":
            fm.out_port = parse_port(val)
        elif key == "out_group":
            fm.out_group = _int(val, key)
        elif key == "in_port":
            in_port = parse_port(val)
        else:
            add_match_item(values, key, sep, val)
    if values.keys() & {"ipv4_dst", "ipv4_src", "ip_proto"}:
        values.setdefault("eth_type", (0x0800, 0xFFFF))
    fm.match = Match.build(values, in_port)
    if actions is not None:
        fm.instructions, fm.rule_id = parse_actions(actions)
    return fm


def _items(text: str) -> list[str]:
    return [p.strip() for p in text.replace(" ", ",").split(",") if p.strip()]


# Implied by a protocol word or a transport alias: set twice, the values must agree.
_IMPLIED_MASKS = {"eth_type": 0xFFFF, "ip_proto": 0xFF}
IPV6_WORDS = {"ipv6", "tcp6", "udp6", "icmp6", "sctp6", "ipv6_src", "ipv6_dst", "ipv6_label"}


def _imply(values: dict, field: str, value: int, item: str) -> None:
    old = values.get(field)
    if old is not None and old != (value, _IMPLIED_MASKS[field]):
        given = f"{OFCTL_NAMES[field][0]}={format_value(field, old[0])}"
        raise ModelError(f"{item!r} contradicts {given} given before")
    values[field] = (value, _IMPLIED_MASKS[field])


def add_match_item(values: dict[str, tuple[int, int]], key: str, sep: str, val: str) -> None:
    """Add one item of an ovs-ofctl match to values (model field -> (value, mask)): a
    protocol word (ip, tcp, udp, icmp, arp) or a field=value. in_port and the FlowMod's
    own keys (table, priority, ...) are the caller's. ModelError for anything else."""
    if not sep:
        if key in PROTOCOL_WORDS:
            for f, v in PROTOCOL_WORDS[key].items():
                _imply(values, f, v, key)
            return
        if key in IPV6_WORDS:
            raise ModelError(f"{key!r}: IPv6 is not modelled (the model's headers are IPv4)")
        words = ", ".join(PROTOCOL_WORDS)
        raise ModelError(f"unknown match keyword {key!r} (protocols: {words}; fields: NAME=VALUE)")
    if key == "dl_vlan":
        vid = _int(val, key)
        values["vlan_vid"] = (0, 0x1FFF) if vid == 0xFFFF else (OFPVID_PRESENT | vid, 0x1FFF)
    elif key == "vlan_tci":
        tci, mask = _value_mask16(val)
        if mask & 0xE000:
            raise ModelError("matching VLAN PCP bits is not modelled")
        values["vlan_vid"] = (tci & 0x1FFF, mask & 0x1FFF)
    elif key in ALIASES:
        field = ALIASES[key]
        value = _value(field, val)
        if field in _IMPLIED_MASKS and value[1] == _IMPLIED_MASKS[field]:
            _imply(values, field, value[0], f"{key}={val}")
        else:
            values[field] = value
        if key in PROTO_OF_ALIAS:
            item = f"{key}={val}"
            if "ip_proto" in values:
                _imply(values, "ip_proto", PROTO_OF_ALIAS[key], item)
            values.setdefault("ip_proto", (PROTO_OF_ALIAS[key], 0xFF))
            values.setdefault("eth_type", (0x0800, 0xFFFF))
    elif key in IPV6_WORDS:
        raise ModelError(f"{key!r}: IPv6 is not modelled (the model's headers are IPv4)")
    else:
        raise ModelError(f"match field {key!r} is not modelled")


def parse_header(text: str) -> dict[str, int]:
    """One packet's header from ovs-ofctl match syntax, exact values only:
    'tcp,nw_dst=10.0.1.5,tp_dst=80', 'ipv4_dst=10.0.1.5,tcp_dst=80', 'arp'. Every model
    field not given is 0; the protocol words, tcp_*/udp_* and IPv4 fields imply their
    prerequisites (eth_type, ip_proto). ValueError (ModelError) naming the item."""
    values: dict[str, tuple[int, int]] = {}
    for item in _items(text):
        key, sep, val = item.partition("=")
        key = key.strip().lower()
        if key == "in_port":
            raise ModelError(
                "in_port is not a header field: the port where the packet enters is given apart"
            )
        if sep and key not in ALIASES and key not in ("dl_vlan", "vlan_tci", *IPV6_WORDS):
            raise ModelError(f"unknown header field {key!r}; known: {', '.join(sorted(ALIASES))}")
        add_match_item(values, key, sep, val)
        if sep:
            field = "vlan_vid" if key in ("dl_vlan", "vlan_tci") else ALIASES[key]
            if values[field][1] != (1 << WIDTH[field]) - 1:
                raise ModelError(f"header field {key} needs an exact value, not a mask")
    header = dict.fromkeys(FIELD_NAMES, 0)
    header.update((f, v) for f, (v, _) in values.items())
    if values.keys() & (IP_FIELDS | TP_FIELDS) and "eth_type" not in values:
        header["eth_type"] = ETH_TYPE_IPV4
    return header


def format_header(header: dict[str, int]) -> str:
    """A header (model field -> value) as an ovs-ofctl match of its non-zero fields
    ('tcp,nw_dst=10.0.1.5,tcp_dst=80'); parse_header reads it back."""
    fields = tuple((f, header[f], (1 << WIDTH[f]) - 1) for f in FIELD_NAMES if header.get(f))
    return format_match(Match(fields, None))


def parse_group(text: str, dpid: int) -> Group:
    """Parse ovs-ofctl group syntax: group_id=N,type=all|select|indirect,bucket=...,bucket=..."""
    head, *buckets = text.strip().split("bucket=")
    gid = gtype = None
    for item in filter(None, (p.strip() for p in head.split(","))):
        key, _, val = item.partition("=")
        if key == "group_id":
            gid = _int(val, "group_id")
        elif key == "type":
            gtype = val.strip().lower()
        elif key in ("selection_method", "selection_method_param", "fields"):
            continue
        else:
            raise ModelError(f"unknown group keyword {key!r}")
    if gid is None:
        raise ModelError("group has no group_id")
    if gtype not in GROUP_TYPES:
        raise ModelError(
            f"group type {gtype!r} is not modelled (use one of {', '.join(GROUP_TYPES)})"
        )
    parsed, weights = [], []
    for b in buckets:
        b = b.strip().rstrip(",")
        items = []
        weight = 1
        for part in split_top(b):
            if part.startswith(("weight:", "weight=")):
                weight = _int(part[len("weight:") :], "bucket weight")
                if not 0 <= weight <= 0xFFFF:
                    raise ModelError(f"bucket weight {weight} is not within 0..65535")
                continue
            if part.startswith(("bucket_id:", "watch_port:", "watch_group:")):
                continue
            items.append(part[len("actions=") :] if part.startswith("actions=") else part)
        instr, _ = parse_actions(",".join(items))
        parsed.append(instr.apply)
        weights.append(weight)
    if gtype == "indirect" and len(parsed) != 1:
        raise ModelError("an indirect group has exactly one bucket")
    return Group(dpid, gid, gtype, tuple(parsed), weights=select_weights(gtype, weights))


def _int(text: str, what: str) -> int:
    try:
        return int(str(text).strip().strip('"'), 0)
    except ValueError:
        raise ModelError(f"{what} value {text!r} is not a number") from None


def _value(field: str, text: str) -> tuple[int, int]:
    try:
        return parse_value(field, text.strip().strip('"'))
    except ValueError as e:
        raise ModelError(f"{field}: {e}") from None


def _value_mask16(text: str) -> tuple[int, int]:
    v, _, m = text.partition("/")
    return _int(v, "vlan_tci"), _int(m, "vlan_tci mask") if m else 0xFFFF


# --- rule files -------------------------------------------------------------------------------
MAX_RULES_BYTES = 1 << 30  # about five million rules in JSON lines


def read_rules(path: str | Path) -> Iterator[FlowEntry | Group]:
    """Yield the flow entries and groups of a rule file; errors name file and line."""
    path = Path(path)
    lines = yamlpos.read_text(path, MAX_RULES_BYTES, ModelError).splitlines()
    first = next((ln.strip() for ln in lines if ln.strip()), "")
    is_json = first.startswith("{")
    dpid = None
    for no, line in enumerate(lines, 1):
        where = f"{path}:{no}"
        s = line.strip()
        if not s:
            continue
        try:
            if is_json:
                yield _json_item(s, where)
                continue
            if s.startswith("##"):
                key, _, val = s.lstrip("#").strip().partition("=")
                if key.strip() != "dpid":
                    raise ModelError("section line must be '## dpid=N'")
                dpid = _int(val, "dpid")
                continue
            if s.startswith("#") or s.startswith(("OFPST_", "NXST_", "OFPST_GROUP")):
                continue
            if dpid is None:
                raise ModelError("no '## dpid=N' line before the first flow")
            if s.startswith("group_id="):
                g = parse_group(s, dpid)
                g.source = where
                yield g
            else:
                e = parse_flow(s, dpid).entry()
                e.source = where
                yield e
        except ModelError as e:
            raise ModelError(f"{where}: {e}") from None


def _json_item(s: str, where: str) -> FlowEntry | Group:
    try:
        obj = json.loads(s)
    except json.JSONDecodeError as e:
        raise ModelError(f"not valid JSON ({e.msg} at column {e.colno})") from None
    if not isinstance(obj, dict) or "dpid" not in obj:
        raise ModelError("each line needs an object with a 'dpid'")
    dpid = _int(obj["dpid"], "dpid")
    if "flow" in obj:
        e = parse_flow(str(obj["flow"]), dpid).entry()
        e.source = where
        return e
    if "group" in obj:
        g = parse_group(str(obj["group"]), dpid)
        g.source = where
        return g
    raise ModelError("each line needs a 'flow' or a 'group' key")


# Model field -> ovs-ofctl match name, and the mod_* action that rewrites it.
OFCTL_NAMES = {
    "ipv4_dst": ("nw_dst", "mod_nw_dst"),
    "ipv4_src": ("nw_src", "mod_nw_src"),
    "ip_proto": ("nw_proto", None),
    "tp_dst": ("tp_dst", "mod_tp_dst"),
    "tp_src": ("tp_src", "mod_tp_src"),
    "eth_type": ("dl_type", None),
    "eth_dst": ("dl_dst", "mod_dl_dst"),
    "eth_src": ("dl_src", "mod_dl_src"),
}


def format_match(match: Match) -> str:
    """A match in ovs-ofctl syntax (OVS names: nw_dst, dl_type, vlan_tci, and tcp_dst or
    udp_dst where the match fixes the protocol, tp_dst otherwise; the protocol keywords
    ip, tcp, udp, icmp and arp for their dl_type and nw_proto)."""
    parts = [] if match.in_port is None else [f"in_port={match.in_port}"]
    proto = match.get("ip_proto")
    tp = {(6, 0xFF): "tcp_", (17, 0xFF): "udp_"}.get(proto, "tp_")
    for f, v, m in match.fields:
        if f in ("tp_src", "tp_dst"):
            parts.append(f"{tp}{f[3:]}={format_value(f, v, m)}")
        elif f == "vlan_vid":
            parts.append(f"vlan_tci=0x{v:04x}/0x{m:04x}")
        elif f == "ip_proto" and m == 0xFF and match.get("eth_type") == (0x0800, 0xFFFF):
            continue  # written as the tcp/udp/ip keyword below
        elif f == "eth_type" and m == 0xFFFF and v in (0x0800, 0x0806):
            continue  # the ip (tcp, udp, icmp) or arp keyword
        else:
            parts.append(f"{OFCTL_NAMES[f][0]}={format_value(f, v, m)}")
    if match.get("eth_type") == (0x0800, 0xFFFF):
        word = {(6, 0xFF): "tcp", (17, 0xFF): "udp", (1, 0xFF): "icmp"}.get(proto)
        if word is None and proto is not None:
            parts.insert(0, f"nw_proto={proto[0]}")
        parts.insert(0, word or "ip")
    elif match.get("eth_type") == (0x0806, 0xFFFF):
        parts.insert(0, "arp")
    return ",".join(parts)


def format_action(a: tuple) -> str:
    """One action in ovs-ofctl syntax."""
    if a[0] == "output":
        return f"output:{PORT_WORDS.get(a[1], a[1])}"
    if a[0] == "group":
        return f"group:{a[1]}"
    if a[0] == "set_field":
        field, value = a[1], a[2]
        if field == "vlan_vid":
            return f"set_field:{value}->vlan_vid"
        mod = OFCTL_NAMES[field][1]
        if mod is None:
            return f"set_field:{format_value(field, value)}->{OFCTL_NAMES[field][0]}"
        return f"{mod}:{format_value(field, value)}"
    return "push_vlan:0x8100" if a[0] == "push_vlan" else a[0]


def action_parts(instructions: Instructions, rule_id: int = 0) -> list[str]:
    """The instructions as ovs-ofctl action words, in order (empty: drop)."""
    ins = instructions
    parts = [f"set_verify_rule:{rule_id}"] if rule_id else []
    parts += [format_action(a) for a in ins.apply]
    if ins.clear:
        parts.append("clear_actions")
    if ins.write:
        parts.append("write_actions(" + ",".join(format_action(a) for a in ins.write) + ")")
    if ins.goto is not None:
        parts.append(f"goto_table:{ins.goto}")
    return parts


def format_actions(instructions: Instructions, rule_id: int = 0) -> str:
    return ",".join(action_parts(instructions, rule_id)) or "drop"


def format_group(g: Group) -> str:
    """The ovs-ofctl add-group text of a group; parse_group reads it back unchanged."""
    weights = g.weights or (None,) * len(g.buckets)
    buckets = ",".join(
        "bucket=" + (f"weight:{w}," if w is not None else "") + ",".join(map(format_action, b))
        for b, w in zip(g.buckets, weights, strict=True)
    )
    return f"group_id={g.group_id},type={g.type},{buckets}"


def write_rules(path: str | Path, entries, groups=()) -> None:
    """A rule file of JSON lines (read_rules reads it): the groups first, then the entries."""
    with open(path, "w") as f:
        for g in groups:
            f.write(json.dumps({"dpid": g.dpid, "group": format_group(g)}) + "\n")
        for e in entries:
            f.write(json.dumps({"dpid": e.dpid, "flow": format_flow(e)}) + "\n")


def format_flow(e: FlowEntry) -> str:
    """The ovs-ofctl add-flow text of an entry; parse_flow reads it back unchanged."""
    head = f"table={e.table},priority={e.priority}"
    if e.cookie:
        head += f",cookie=0x{e.cookie:x}"
    match = format_match(e.match)
    if match:
        head += "," + match
    return f"{head},actions={format_actions(e.instructions, e.rule_id)}"


PORT_WORDS = {
    OFPP_IN_PORT: "IN_PORT",
    OFPP_FLOOD: "FLOOD",
    OFPP_ALL: "ALL",
    OFPP_CONTROLLER: "CONTROLLER",
    OFPP_LOCAL: "LOCAL",
}
