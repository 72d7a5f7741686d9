"""Random OpenFlow 1.3 message sequences and packets for the agent comparison (pazzlab.agents).

A sequence is a few GroupMods and FlowMods for one switch with ports 1-4, encoded with
os-ken's OpenFlow 1.3 classes: random matches over the fields the model supports (with
masks), priorities from a small set (so equal-priority overlaps are common), three tables
and goto_table, groups, set_field, push/pop VLAN, all five FlowMod commands, CHECK_OVERLAP,
and messages that are plausible but wrong: a missing prerequisite, a backward goto, an
output to a port that cannot be one, a group that does not exist. Values come from small
pools so that the packets, drawn from the same pools, hit the entries.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import os_ken.base.app_manager  # noqa: F401  (import order: breaks a circular import in os-ken)
from os_ken.ofproto import ofproto_v1_3 as ofp
from os_ken.ofproto import ofproto_v1_3_parser as ofpp

PORTS = (1, 2, 3, 4)
IPS = ("10.0.0.1", "10.0.0.2", "10.0.1.1", "10.1.0.1", "192.168.0.1")
PREFIXES = (8, 16, 24, 32, 32)
MACS = ("02:00:00:00:00:01", "02:00:00:00:00:02", "02:00:00:00:01:01")
MAC_MASKS = ("ff:ff:ff:ff:ff:ff", "ff:ff:ff:ff:ff:00", "ff:ff:ff:00:00:00")
TP_PORTS = (22, 80, 443)
VIDS = (10, 20)
PROTOS = (1, 6, 17)
PRIORITIES = (0, 10, 100, 100, 200, 0xFFFF)
BAD_PORTS = (0, 0xFFFFFF00, 0xFFFFFFFF)  # not a port / beyond OFPP_MAX / ANY
GROUP_IDS = (1, 2)
MISSING_GROUP = 7


class _DP:
    """The datapath stand-in os-ken's message classes need to serialize."""

    ofproto = ofp
    ofproto_parser = ofpp
    id = 0


DP = _DP()


def serialize(msg, xid: int) -> bytes:
    msg.set_xid(xid)
    msg.serialize()
    return bytes(msg.buf)


@dataclass
class Packet:
    in_port: int
    header: dict[str, int]  # the model's fields (cpc.fields), 0 when absent


@dataclass
class Sequence:
    seed: int
    messages: list[tuple[str, object]] = field(default_factory=list)  # ("flow"|"group", msg)
    packets: list[Packet] = field(default_factory=list)


def _ip(r: random.Random) -> str:
    return r.choice(IPS)


def _prefix_mask(n: int) -> str:
    bits = (0xFFFFFFFF << (32 - n)) & 0xFFFFFFFF
    return ".".join(str(bits >> s & 0xFF) for s in (24, 16, 8, 0))


def random_match(r: random.Random) -> ofpp.OFPMatch:
    f: dict = {}
    if r.random() < 0.3:
        f["in_port"] = r.choice(PORTS + (9,))
    if r.random() < 0.25:
        mask = r.choice(MAC_MASKS)
        f["eth_dst"] = (r.choice(MACS), mask) if r.random() < 0.4 else r.choice(MACS)
    if r.random() < 0.15:
        f["eth_src"] = r.choice(MACS)
    v = r.random()
    if v < 0.15:
        f["vlan_vid"] = 0x1000 | r.choice(VIDS)
    elif v < 0.22:
        f["vlan_vid"] = (0x1000, 0x1000)
    elif v < 0.28:
        f["vlan_vid"] = 0
    ip = r.random() < 0.8
    broken = r.random() < 0.08  # leave out a prerequisite, or name the wrong protocol
    if ip or r.random() < 0.5:
        f["eth_type"] = 0x0800 if ip else r.choice((0x0806, 0x86DD))
    if ip:
        if r.random() < 0.7:
            n = r.choice(PREFIXES)
            f["ipv4_dst"] = (_ip(r), _prefix_mask(n)) if n < 32 else _ip(r)
        if r.random() < 0.3:
            f["ipv4_src"] = _ip(r)
        if r.random() < 0.5:
            proto = r.choice(PROTOS)
            f["ip_proto"] = proto
            if proto in (6, 17) and r.random() < 0.6:
                kind = "tcp" if proto == 6 else "udp"
                if broken and r.random() < 0.5:
                    kind = "udp" if proto == 6 else "tcp"
                port = r.choice(TP_PORTS)
                val = (port, 0xFFF0) if r.random() < 0.15 else port
                f[f"{kind}_{r.choice(('dst', 'src'))}"] = val
        if broken:
            f.pop(r.choice(("eth_type", "ip_proto")), None)
    return ofpp.OFPMatch(**f)


def random_action(r: random.Random, groups: bool = True):
    v = r.random()
    if v < 0.45:
        w = r.random()
        if w < 0.8:
            port = r.choice(PORTS)
        elif w < 0.9:
            port = r.choice((ofp.OFPP_IN_PORT, ofp.OFPP_ALL, ofp.OFPP_FLOOD, ofp.OFPP_CONTROLLER))
        else:
            port = r.choice(BAD_PORTS)
        return ofpp.OFPActionOutput(port, ofp.OFPCML_NO_BUFFER)
    if v < 0.55 and groups:
        gid = r.choice(GROUP_IDS) if r.random() < 0.85 else MISSING_GROUP
        return ofpp.OFPActionGroup(gid)
    if v < 0.85:
        k = r.choice(
            ("eth_dst", "eth_src", "ipv4_dst", "ipv4_src", "tcp_dst", "udp_src", "vlan_vid")
        )
        val = {
            "eth_dst": lambda: r.choice(MACS),
            "eth_src": lambda: r.choice(MACS),
            "ipv4_dst": lambda: _ip(r),
            "ipv4_src": lambda: _ip(r),
            "tcp_dst": lambda: r.choice(TP_PORTS),
            "udp_src": lambda: r.choice(TP_PORTS),
            "vlan_vid": lambda: 0x1000 | r.choice(VIDS),
        }[k]()
        return ofpp.OFPActionSetField(**{k: val})
    if v < 0.93:
        return ofpp.OFPActionPushVlan(0x8100)
    return ofpp.OFPActionPopVlan()


def random_actions(r: random.Random, n_max: int = 4, groups: bool = True) -> list:
    acts = [random_action(r, groups) for _ in range(r.randint(0, n_max))]
    # An entry naming one group twice crashes ovs-vswitchd 3.1.0 when the group is
    # deleted (docs/agents.md): keep the first.
    named: set[int] = set()
    for i, a in enumerate(acts):
        if isinstance(a, ofpp.OFPActionGroup):
            if a.group_id in named:
                acts[i] = ofpp.OFPActionOutput(r.choice(PORTS), ofp.OFPCML_NO_BUFFER)
            named.add(a.group_id)
    if acts and r.random() < 0.7 and not isinstance(acts[-1], ofpp.OFPActionOutput):
        acts.append(ofpp.OFPActionOutput(r.choice(PORTS), ofp.OFPCML_NO_BUFFER))
    return acts


def random_instructions(r: random.Random, table: int) -> list:
    out = []
    if r.random() < 0.8:
        out.append(ofpp.OFPInstructionActions(ofp.OFPIT_APPLY_ACTIONS, random_actions(r)))
    if r.random() < 0.1:
        out.append(ofpp.OFPInstructionActions(ofp.OFPIT_CLEAR_ACTIONS, []))
    if r.random() < 0.25:
        acts = random_actions(r, 3)
        out.append(ofpp.OFPInstructionActions(ofp.OFPIT_WRITE_ACTIONS, acts))
    if r.random() < 0.35:
        if r.random() < 0.1:
            nxt = r.randint(0, table)  # backward or to itself: a switch must refuse it
        else:
            nxt = r.randint(table + 1, 3) if table < 3 else 3
        if nxt > table or r.random() < 0.5:
            out.append(ofpp.OFPInstructionGotoTable(nxt))
    return out


def random_group_mod(r: random.Random, gid: int, command: int = ofp.OFPGC_ADD):
    gtype = r.choice(
        (ofp.OFPGT_ALL, ofp.OFPGT_ALL, ofp.OFPGT_ALL, ofp.OFPGT_SELECT, ofp.OFPGT_INDIRECT)
        + (ofp.OFPGT_INDIRECT, ofp.OFPGT_FF)
    )
    n = 1 if gtype == ofp.OFPGT_INDIRECT and r.random() < 0.9 else r.randint(0, 2)
    if gtype == ofp.OFPGT_SELECT:
        n = min(n, 1)  # one live bucket: which of several a switch picks is its own hash
    buckets = []
    for _ in range(n if command != ofp.OFPGC_DELETE else 0):
        acts = random_actions(r, 2, groups=False)
        watch = r.choice(PORTS) if gtype == ofp.OFPGT_FF else ofp.OFPP_ANY
        buckets.append(ofpp.OFPBucket(1, watch, ofp.OFPG_ANY, acts))
    return ofpp.OFPGroupMod(DP, command, gtype, gid, buckets)


def random_flow_mod(r: random.Random, earlier: list) -> ofpp.OFPFlowMod:
    v = r.random()
    command = (
        ofp.OFPFC_ADD
        if v < 0.7
        else ofp.OFPFC_MODIFY
        if v < 0.78
        else ofp.OFPFC_MODIFY_STRICT
        if v < 0.85
        else ofp.OFPFC_DELETE
        if v < 0.93
        else ofp.OFPFC_DELETE_STRICT
    )
    if earlier and (command != ofp.OFPFC_ADD or r.random() < 0.2) and r.random() < 0.7:
        table, priority, match = r.choice(earlier)
    else:
        table = r.choice((0, 0, 0, 1, 2))
        priority = r.choice(PRIORITIES)
        match = random_match(r)
    if command == ofp.OFPFC_DELETE and r.random() < 0.2:
        table = ofp.OFPTT_ALL
    flags = ofp.OFPFF_CHECK_OVERLAP if r.random() < 0.15 else 0
    out_port, out_group = ofp.OFPP_ANY, ofp.OFPG_ANY
    if command in (ofp.OFPFC_DELETE, ofp.OFPFC_DELETE_STRICT) and r.random() < 0.2:
        out_port = r.choice(PORTS)
    cookie = r.choice((0, 0, 1, 2))
    cookie_mask = r.choice((0, 0, 0xFF)) if command != ofp.OFPFC_ADD else 0
    instructions = (
        random_instructions(r, table if table != ofp.OFPTT_ALL else 0)
        if command in (ofp.OFPFC_ADD, ofp.OFPFC_MODIFY, ofp.OFPFC_MODIFY_STRICT)
        else []
    )
    if command == ofp.OFPFC_ADD:
        earlier.append((table, priority, match))
    return ofpp.OFPFlowMod(
        DP,
        cookie=cookie,
        cookie_mask=cookie_mask,
        table_id=table,
        command=command,
        priority=priority,
        buffer_id=ofp.OFP_NO_BUFFER,
        out_port=out_port,
        out_group=out_group,
        flags=flags,
        match=match,
        instructions=instructions,
    )


def _mac_int(text: str) -> int:
    return int(text.replace(":", ""), 16)


def _ip_int(text: str) -> int:
    a, b, c, d = map(int, text.split("."))
    return a << 24 | b << 16 | c << 8 | d


def random_packet(r: random.Random) -> Packet:
    h = dict.fromkeys(("ipv4_dst", "ipv4_src", "ip_proto", "tp_dst", "tp_src", "vlan_vid"), 0)
    h["eth_dst"] = _mac_int(r.choice(MACS))
    h["eth_src"] = _mac_int(r.choice(MACS))
    if r.random() < 0.3:
        h["vlan_vid"] = 0x1000 | r.choice(VIDS)
    v = r.random()
    h["eth_type"] = 0x0800 if v < 0.85 else 0x0806 if v < 0.95 else 0x86DD
    if h["eth_type"] == 0x0800:
        h["ipv4_dst"] = _ip_int(_ip(r))
        h["ipv4_src"] = _ip_int(_ip(r))
        h["ip_proto"] = r.choice(PROTOS)
        if h["ip_proto"] in (6, 17):
            h["tp_dst"] = r.choice(TP_PORTS)
            h["tp_src"] = r.choice(TP_PORTS)
    return Packet(r.choice(PORTS), h)


def random_sequence(seed: int, n_packets: int = 10) -> Sequence:
    r = random.Random(seed)
    seq = Sequence(seed)
    for gid in GROUP_IDS:
        if r.random() < 0.6:
            seq.messages.append(("group", random_group_mod(r, gid)))
    earlier: list = []
    for _ in range(r.randint(2, 8)):
        if r.random() < 0.06:
            gid = r.choice(GROUP_IDS)
            cmd = r.choice((ofp.OFPGC_MODIFY, ofp.OFPGC_DELETE))
            seq.messages.append(("group", random_group_mod(r, gid, cmd)))
        else:
            seq.messages.append(("flow", random_flow_mod(r, earlier)))
    seq.packets = [random_packet(r) for _ in range(n_packets)]
    return seq
