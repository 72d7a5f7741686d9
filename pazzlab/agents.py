"""Differential testing of OpenFlow agents: stock Open vSwitch, patched Open vSwitch with
Verify tagging on, and the model, given the same random message sequences
(pazzlab.agentgen).

    with Comparison(patched_prefix) as cmp:
        for seed in range(n):
            cmp.run(random_sequence(seed))
        print(cmp.counts)

Each switch runs in a network namespace of its own (a userspace ovs-vswitchd owns the
namespace's ovs-netdev device), with one bridge (dpid 1, internal ports 1-4). The patched
bridge gets every FlowMod as pazzd's proxy sends it, with `set_verify_rule:ID` first.

Compared, per sequence: the error (type, code) each message draws; the flow-stats dump
(rule IDs stripped); and for every packet, the outputs and each output's packet, from
`ofproto/trace` (pazzlab.dpactions, Verify actions left out). Stock against patched, any
difference is a defect of the patch series. The model (cpc.model.Model, fed as the proxy
feeds it: the messages the switch accepted) against the stock switch: the messages one
accepts and the other refuses, and the forwarding; each difference is classified by
cpc.agents.explain_* into a known divergence (docs/agents.md) or "unexplained".
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import NamedTuple

import ofwire as of
from cpc import agents as known
from cpc import flowmod
from cpc.model import Model
from cpc.rules import OFPFF_CHECK_OVERLAP, ModelError
from cpc.topology import Topology
from pazzlab import dpactions
from pazzlab.agentgen import PORTS, Packet, Sequence, serialize
from pazzlab.ofclient import OfClient, Unixctl
from pazzlab.ovs import Cleanup, Netns, OvsInstance

DPID = 1
BRIDGE = "br0"
STOCK_PREFIX = "/usr"


class _NsOvs(OvsInstance):
    """An OvsInstance whose daemons run in a network namespace."""

    def __init__(self, prefix, rundir, ns: Netns, **kw) -> None:
        super().__init__(prefix, rundir, **kw)
        self.ns = ns

    def _spawn(self, *cmd) -> None:
        super()._spawn("ip", "netns", "exec", self.ns.name, *cmd)


class SwitchAgent:
    """One private ovs-vswitchd in its own namespace, with one bridge."""

    def __init__(self, label: str, prefix, cleanup: Cleanup, tagging: bool = False) -> None:
        self.label = label
        self.tagging = tagging
        ns = Netns()
        cleanup.push(ns.delete)
        rundir = tempfile.mkdtemp(prefix=f"pazz-agent-{label}-")
        cleanup.push(shutil.rmtree, rundir, True)
        self.ovs = _NsOvs(prefix, rundir, ns, name=label)
        cleanup.push(self.ovs.stop)
        self.ovs.start()
        oc = {"verify-tagging": "true"} if tagging else {}
        self.ovs.add_bridge(BRIDGE, dpid=DPID, other_config=oc)
        for p in PORTS:
            sets = [f"ofport_request={p}", "type=internal"]
            if tagging:
                sets.append("other_config:verify-edge=true")
            self.ovs.vsctl("add-port", BRIDGE, f"p{p}", "--", "set", "interface", f"p{p}", *sets)
        self.of = OfClient(str(Path(rundir) / f"{BRIDGE}.mgmt"))
        cleanup.push(self.of.close)
        self.ctl = Unixctl(str(Path(rundir) / "ovs-vswitchd.ctl"))
        cleanup.push(self.ctl.close)
        self.ports = dpactions.dp_ports(self.ctl.call("dpif/show"), BRIDGE)

    def run(self, msgs: list[bytes]) -> list[tuple[int, int] | None]:
        """Send the messages (FlowMods with the proxy's rule ID when tagging), return the
        error each drew (None: accepted)."""
        self.of.clear()
        sent, xids = [], []
        for i, m in enumerate(msgs):
            xid = self.of.next_xid()
            m = of.set_xid(m, xid)
            if self.tagging and m[1] == of.OFPT_FLOW_MOD:
                fm = of.parse_flow_mod(m)
                if fm.command in (of.FC_ADD, of.FC_MODIFY, of.FC_MODIFY_STRICT):
                    m = of.flow_mod_with_instructions(m, fm, of.add_rule_id(fm.instr, i + 1))
            sent.append(m)
            xids.append(xid)
        errors, _ = self.of.exchange(sent)
        return [errors.get(x) for x in xids]

    def flows(self) -> list[tuple]:
        out = []
        for s in self.of.dump_flows():
            instr = of.canonical_instructions(s.instr)
            out.append((s.table, s.priority, s.cookie, s.mkey, instr, s.flags, s.idle, s.hard))
        return sorted(out)

    def trace(self, pkt: Packet) -> list[tuple[object, tuple]]:
        text = self.ctl.call("ofproto/trace", BRIDGE, trace_flow(pkt))
        acts = dpactions.datapath_actions(text)
        outs = dpactions.outcomes(acts, self.ports)
        return outs + [("RECIRC", ())] if "recirc(" in acts else outs


def trace_flow(pkt: Packet) -> str:
    h = pkt.header
    mac = lambda v: ":".join(f"{v >> s & 0xFF:02x}" for s in range(40, -8, -8))  # noqa: E731
    ip = lambda v: ".".join(str(v >> s & 0xFF) for s in (24, 16, 8, 0))  # noqa: E731
    parts = [f"in_port={pkt.in_port}", f"dl_src={mac(h['eth_src'])}", f"dl_dst={mac(h['eth_dst'])}"]
    if h["vlan_vid"]:
        parts.append(f"vlan_tci=0x{h['vlan_vid']:04x}")
    parts.append(f"dl_type=0x{h['eth_type']:04x}")
    if h["eth_type"] == 0x0800:
        parts += [f"nw_src={ip(h['ipv4_src'])}", f"nw_dst={ip(h['ipv4_dst'])}"]
        parts += [f"nw_proto={h['ip_proto']}", "nw_ttl=64"]
        if h["ip_proto"] in (6, 17):
            tp = "tcp" if h["ip_proto"] == 6 else "udp"
            parts += [f"{tp}_src={h['tp_src']}", f"{tp}_dst={h['tp_dst']}"]
    return ",".join(parts)


def switch_headers(pkt: Packet, outs: list[tuple[object, tuple]]) -> list[tuple[object, tuple]]:
    """A switch's outputs as (port, header in the model's fields), sorted."""
    res = []
    for port, state in outs:
        h = dict(pkt.header)
        vlans = [h["vlan_vid"] & 0xFFF] if h["vlan_vid"] else []
        for k, v in state:
            if k == "vlans":
                for op in v:  # -1: pop_vlan, else the VID pushed
                    vlans = vlans[1:] if op < 0 else [op, *vlans]
            elif k in _DP_FIELDS and isinstance(v, int):
                h[_DP_FIELDS[k]] = v
        h["vlan_vid"] = 0x1000 | vlans[0] if vlans else 0
        res.append((port, tuple(sorted(h.items()))))
    return sorted(res, key=repr)


_DP_FIELDS = {
    "eth.src": "eth_src",
    "eth.dst": "eth_dst",
    "ipv4.src": "ipv4_src",
    "ipv4.dst": "ipv4_dst",
    "tcp.src": "tp_src",
    "tcp.dst": "tp_dst",
    "udp.src": "tp_src",
    "udp.dst": "tp_dst",
}


class ModelAgent:
    """The model of one switch, fed as the proxy feeds it."""

    def __init__(self) -> None:
        topo = Topology()
        topo.add_switch(DPID, "s1", PORTS)
        for p in PORTS:
            topo.add_edge((DPID, p))
        self.model = Model(topo)
        self.model.add_entries([])
        self.groups: set[int] = set()
        self.unmodelled: set[int] = set()  # groups the switch may have and the model not

    def reset(self) -> None:
        self.model.apply(of.flowmod_to_cpc(DPID, of.parse_flow_mod(_DELETE_ALL)))
        for gid in self.groups:
            self.model.delete_group(DPID, gid)
        self.groups.clear()
        self.unmodelled.clear()

    def apply(self, msg: bytes) -> str | None:
        """Apply one message; the model's reason for refusing it, or None."""
        try:
            if msg[1] == of.OFPT_FLOW_MOD:
                raw = of.parse_flow_mod(msg)
                fm = of.flowmod_to_cpc(DPID, raw)
                fm.flags = raw.flags  # the proxy drops CHECK_OVERLAP: the switch checked
                self.model.apply(fm)
            else:
                gm = of.parse_group_mod(msg)
                if gm.command == of.GC_DELETE:
                    gids = list(self.groups) if gm.group_id == of.OFPG_ALL else [gm.group_id]
                    for gid in gids:
                        self.model.delete_group(DPID, gid)
                        self.groups.discard(gid)
                else:
                    self.unmodelled.add(gm.group_id)
                    self.model.set_group(of.group_to_cpc(DPID, gm.type, gm.group_id, gm.buckets))
                    self.groups.add(gm.group_id)
                    self.unmodelled.discard(gm.group_id)
        except (ModelError, of.ProtocolError) as e:
            return str(e) or type(e).__name__
        return None

    def headers(self, pkt: Packet) -> list[tuple[object, tuple]]:
        res = []
        for d, h in self.model.trace_headers((DPID, pkt.in_port), pkt.header):
            if d.kind == "egress":
                port = d.egress[1]
            elif d.kind in ("controller", "local"):
                port = d.kind.upper()
            else:
                continue
            res.append((port, tuple(sorted(h.items()))))
        return sorted(res, key=repr)


_DELETE_ALL = of.flow_mod(0, of.OFPTT_ALL, of.FC_DELETE, 0, b"", b"")


# Switch errors (type, code) that the model does not check: it has no GroupMod commands.
_GROUP_COMMAND_ERRORS = {(6, 0), (6, 1), (6, 8)}  # GROUP_EXISTS, INVALID_GROUP, UNKNOWN_GROUP
_BAD_TAG = (2, 12)  # OFPBAC_BAD_TAG: a third VLAN tag
_BAD_OUT_GROUP = (2, 9)
_OVERLAP = (5, 3)  # OFPFMFC_OVERLAP


class _Slice(NamedTuple):
    """The lost entries of one (table, in_port), shaped as flowmod.select reads elements."""

    table: int
    in_port: int | None
    entries: dict


def _slices(lost) -> list[_Slice]:
    by: dict = {}
    for e in lost:
        s = by.setdefault((e.table, e.match.in_port), _Slice(e.table, e.match.in_port, {}))
        s.entries[(e.match.fields, e.priority)] = e
    return list(by.values())


def _lost_entry_explains(err, msg: bytes, lost) -> bool:
    """Whether the switch refused msg because of an entry only it holds: a MODIFY that
    selects it checks its new groups (OVS checks a MODIFY's actions only when it selects
    an entry: ofproto.c modify_flows_start__), an ADD with CHECK_OVERLAP overlaps it."""
    try:
        raw = of.parse_flow_mod(msg)
        fm = of.flowmod_to_cpc(DPID, raw)
    except (ModelError, of.ProtocolError, IndexError):
        return False
    if err == _BAD_OUT_GROUP and fm.command.startswith("modify"):
        return bool(flowmod.select(_slices(lost), fm, fm.command == "modify_strict"))
    if err == _OVERLAP and fm.command == "add" and raw.flags & OFPFF_CHECK_OVERLAP:
        return any(
            e.table == fm.table
            and e.priority == fm.priority
            and e.match != fm.match
            and e.match.overlaps(fm.match)
            for e in lost
        )
    return False


def lose(lost: list, msg: bytes, refused: bool) -> None:
    """Keep `lost` in step with a FlowMod the switch accepted: an ADD the model refused
    adds its entry, one both took replaces it; a DELETE removes the entries it selects."""
    try:
        fm = of.flowmod_to_cpc(DPID, of.parse_flow_mod(msg))
    except (ModelError, of.ProtocolError, IndexError):
        return
    if fm.command == "add":
        key = (fm.table, fm.priority, fm.match)
        lost[:] = [e for e in lost if (e.table, e.priority, e.match) != key]
        if refused:
            lost.append(fm.entry())
    elif fm.command.startswith("delete"):
        gone = {id(e) for e in flowmod.select(_slices(lost), fm, fm.command == "delete_strict")}
        lost[:] = [e for e in lost if id(e) not in gone]


def explain_acceptance(
    err: tuple[int, int] | None, why: str | None, unmodelled=(), msg: bytes = b"", lost=()
) -> str:
    """The known divergence behind a message one side accepted and the other refused
    (unmodelled: the groups the model refused and the switch has; lost: the entries of
    FlowMods the switch took and the model refused, cpc FlowEntry)."""
    if lost and err in (_BAD_OUT_GROUP, _OVERLAP) and _lost_entry_explains(err, msg, lost):
        return "not-modelled"
    if err in _GROUP_COMMAND_ERRORS:
        return "group-command"
    if err == _BAD_TAG:
        return "vlan-stack"
    if err is None and why and "is not modelled" in why:
        return "not-modelled"
    if err is None and any(f"group {g} does not exist" in (why or "") for g in unmodelled):
        return "not-modelled"
    return "unexplained"


class Comparison:
    """Stock and patched switches and the model, and the differences found so far."""

    def __init__(self, patched_prefix, stock_prefix=STOCK_PREFIX, model: bool = True) -> None:
        self.cleanup = Cleanup()
        try:
            self.stock = SwitchAgent("stock", stock_prefix, self.cleanup)
            self.patched = SwitchAgent("patched", patched_prefix, self.cleanup, tagging=True)
        except BaseException:
            self.cleanup.run()
            raise
        self.model = ModelAgent() if model else None
        self.counts: Counter = Counter()
        self.examples: dict[str, list] = {}
        self.seconds = 0.0

    def close(self) -> None:
        self.cleanup.run()

    def __enter__(self) -> Comparison:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _diff(self, kind: str, example, limit: int = 5) -> None:
        self.counts[f"diff:{kind}"] += 1
        ex = self.examples.setdefault(kind, [])
        if len(ex) < limit:
            ex.append(example)

    def run(self, seq: Sequence) -> None:
        try:
            self._run(seq)
        except (OSError, RuntimeError) as e:  # a switch hung or died: say which sequence
            logs = "\n".join(
                f"-- {a.label}\n{a.ovs.log_tail(15)}" for a in (self.stock, self.patched)
            )
            raise RuntimeError(f"sequence {seq.seed}: {e!r}\n{logs}") from e

    def _run(self, seq: Sequence) -> None:
        t0 = time.perf_counter()
        msgs = [serialize(m, i + 1) for i, (_, m) in enumerate(seq.messages)]
        errs_s = self.stock.run(msgs)
        errs_p = self.patched.run(msgs)
        self.counts["sequences"] += 1
        self.counts["messages"] += len(msgs)
        self.counts["refused_by_switch"] += sum(e is not None for e in errs_s)
        if errs_s != errs_p:
            self._diff("switch-errors", (seq.seed, errs_s, errs_p))
        if self.stock.flows() != self.patched.flows():
            self._diff("switch-flows", seq.seed)
        model_ok = self._model_messages(seq, msgs, errs_s) if self.model else False
        for pkt in seq.packets:
            self.counts["packets"] += 1
            out_s = self.stock.trace(pkt)
            out_p = self.patched.trace(pkt)
            if out_s != out_p:
                if self.model is not None and self._tie(pkt):
                    # Which of two equal-priority entries wins differs even between two
                    # stock instances: the classifier's subtable order.
                    self.counts["switch-forwarding:equal-priority-overlap"] += 1
                else:
                    self._diff("switch-forwarding", (seq.seed, pkt, out_s, out_p))
            if ("RECIRC", ()) in out_s:
                # A select group hashes and recirculates; the trace stops there.
                self.counts["packets-not-traced:select-group"] += 1
            elif self.model is not None:
                self._model_packet(seq, pkt, out_s, model_ok)
        self.seconds += time.perf_counter() - t0

    def _tie(self, pkt: Packet) -> bool:
        entries = self.model.model.entries(DPID)
        return any(
            a.match.contains(pkt.header, pkt.in_port) and b.match.contains(pkt.header, pkt.in_port)
            for a, b in known.equal_priority_overlaps(entries)
        )

    def _model_messages(self, seq: Sequence, msgs: list[bytes], errs: list) -> bool:
        """Feed the model the messages the switch accepted; compare acceptance. False when
        the model refused one the switch accepted (its table then lacks that entry)."""
        m = self.model
        m.reset()
        in_step = True
        accepted: list[bytes] = []
        lost: list = []  # entries the switch holds and the model refused
        for msg, err in zip(msgs, errs, strict=True):
            why = m.apply(msg)
            if err is None and msg[1] == of.OFPT_FLOW_MOD:
                lose(lost, msg, refused=why is not None)
            if (why is None) == (err is None):
                if why is None:
                    accepted.append(msg)
                continue
            kind = explain_acceptance(err, why, m.unmodelled, msg, lost)
            self.counts[f"acceptance:{kind}"] += 1
            if kind == "unexplained":
                self._diff("model-acceptance", (seq.seed, msg.hex(), err, why))
            if err is None:
                in_step = False  # the switch has an entry the model lacks
                accepted.append(msg)
            else:  # the model took what the switch refused: replay what the switch took
                m.reset()
                for a in accepted:
                    m.apply(a)
        return in_step

    def _model_packet(self, seq: Sequence, pkt: Packet, out_s, in_step: bool) -> None:
        want = switch_headers(pkt, out_s)
        got = self.model.headers(pkt)
        if want == got:
            return
        if not in_step:
            self.counts["forwarding:after-refused-message"] += 1
            return
        mm = self.model.model
        kind = known.explain_forwarding(
            mm.entries(DPID), mm.groups(), pkt.in_port, pkt.header, want, got
        )
        self.counts[f"forwarding:{kind}"] += 1
        if kind == "unexplained":
            self._diff("model-forwarding", (seq.seed, pkt, want, got))

    def summary(self) -> dict:
        c = self.counts
        return {
            "sequences": c["sequences"],
            "messages": c["messages"],
            "packets": c["packets"],
            "refused_by_switch": c["refused_by_switch"],
            "differences": {k[5:]: v for k, v in sorted(c.items()) if k.startswith("diff:")},
            "known_divergences": {
                k: v
                for k, v in sorted(c.items())
                if k.startswith(("acceptance:", "forwarding:", "switch-forwarding:"))
            },
            "packets_not_traced": c["packets-not-traced:select-group"],
            "seconds": round(self.seconds, 2),
        }
