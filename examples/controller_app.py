"""Example os-ken controller app: installs routes proactively and reads flow stats.

Run it (os-ken has no osken-manager script in this venv, so this file starts its own):

    python examples/controller_app.py --port 6633 [--record out.jsonl] [--rules rules.jsonl]
                                      [--updates updates.jsonl]

On each switch (OpenFlow 1.3) it installs, once the features reply is in:
- with --rules, everything a cpc rule file holds for that dpid (JSON lines
  {"dpid": N, "flow": "..."} / {"dpid": N, "group": "..."}, or dump-flows text with
  "## dpid=N" sections): first the groups (GroupMod ADD, select buckets of weight 1), then
  the flow entries with their table, priority, cookie, match (exact fields unmasked,
  tp_src/tp_dst as tcp_* or udp_* by ip_proto) and instructions (apply actions: output,
  group, set_field, push/pop_vlan; write_actions; clear_actions; goto_table; none = drop).
  `set_verify_rule:ID` is not sent: pazzd's proxy gives every entry its own rule ID.
  Outputs to ordinary ports carry max_len 0 (max_len only applies to output:CONTROLLER),
  as ovs-ofctl writes them: an entry put back with ovs-ofctl equals the controller's;
- by default, 10.0.i.0/24 -> output:(i % 3 + 1), i < 8, plus a goto_table entry and a
  table-1 entry with write_actions;
then a barrier, then a flow-stats request. With --updates, it follows that file (JSON
lines {"dpid": N, "flow": "...", "command": "add|modify|modify_strict|delete|delete_strict"},
flows in ovs-ofctl syntax) and sends each line appended to it as a FlowMod to its switch,
each batch followed by a barrier: a test drives the controller's own changes with it.
With --record, every message it receives is
written as one JSON line {"dpid", "type", "xid", "hex"}; the transparency test compares
such recordings with and without pazzd's proxy in between.
"""

from __future__ import annotations

import json
import os
import sys

import os_ken.base.app_manager as app_manager  # noqa: I001  (import order matters in os-ken)
from os_ken import cfg
from os_ken.controller import ofp_event
from os_ken.controller.handler import CONFIG_DISPATCHER, MAIN_DISPATCHER, set_ev_cls
from os_ken.ofproto import ofproto_v1_3

CONF = cfg.CONF
# --record and --rules reach the app (loaded as a module by os-ken) through the environment.
RECORD_ENV, RULES_ENV = "PAZZ_EXAMPLE_RECORD", "PAZZ_EXAMPLE_RULES"
UPDATES_ENV = "PAZZ_EXAMPLE_UPDATES"


class ExampleApp(app_manager.OSKenApp):
    OFP_VERSIONS = [ofproto_v1_3.OFP_VERSION]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        path = os.environ.get(RECORD_ENV)
        self.record = open(path, "a") if path else None  # noqa: SIM115
        self.dps = {}  # dpid -> datapath, for --updates
        if os.environ.get(UPDATES_ENV):
            from os_ken.lib import hub

            self.threads.append(hub.spawn(self._follow, os.environ[UPDATES_ENV]))

    def _log(self, dp, msg) -> None:
        if self.record is not None:
            self.record.write(
                json.dumps(
                    {
                        "dpid": dp.id,
                        "type": msg.msg_type,
                        "xid": msg.xid,
                        "hex": bytes(msg.buf).hex(),
                    }
                )
                + "\n"
            )
            self.record.flush()

    @set_ev_cls(ofp_event.EventOFPSwitchFeatures, CONFIG_DISPATCHER)
    def features(self, ev):
        dp = ev.msg.datapath
        self._log(dp, ev.msg)
        self.dps[dp.id] = dp
        ofp, p = dp.ofproto, dp.ofproto_parser
        if os.environ.get(RULES_ENV):
            groups, flows = rules_from_file(dp, os.environ[RULES_ENV])
        else:
            groups, flows = [], self.rules(dp)
        for gid, gtype, buckets in groups:  # before the flows that use them
            dp.send_msg(p.OFPGroupMod(dp, ofp.OFPGC_ADD, gtype, gid, buckets))
        n = 0
        for table, prio, match, inst, cookie in flows:
            dp.send_msg(
                p.OFPFlowMod(
                    dp, table_id=table, priority=prio, match=match, instructions=inst, cookie=cookie
                )
            )
            n += 1
        dp.send_msg(p.OFPBarrierRequest(dp))
        dp.send_msg(p.OFPFlowStatsRequest(dp, 0, ofp.OFPTT_ALL, ofp.OFPP_ANY, ofp.OFPG_ANY))
        self.logger.info("switch %#x: sent %d groups and %d flows", dp.id, len(groups), n)

    def rules(self, dp):
        """The default routes (without --rules)."""
        ofp, p = dp.ofproto, dp.ofproto_parser

        def apply(*acts):
            return [p.OFPInstructionActions(ofp.OFPIT_APPLY_ACTIONS, list(acts))]

        for i in range(8):
            m = p.OFPMatch(eth_type=0x800, ipv4_dst=(f"10.0.{i}.0", "255.255.255.0"))
            yield 0, 100, m, apply(p.OFPActionOutput(i % 3 + 1)), 0x7
        yield 0, 50, p.OFPMatch(eth_type=0x800), [p.OFPInstructionGotoTable(1)], 0x7
        yield (
            1,
            10,
            p.OFPMatch(in_port=1),
            [p.OFPInstructionActions(ofp.OFPIT_WRITE_ACTIONS, [p.OFPActionOutput(2)])],
            0x7,
        )

    def _follow(self, path: str) -> None:
        """--updates: send the FlowMods of each line appended to `path`."""
        from os_ken.lib import hub

        from cpc import ofctl

        commands = {
            "add": "OFPFC_ADD",
            "modify": "OFPFC_MODIFY",
            "modify_strict": "OFPFC_MODIFY_STRICT",
            "delete": "OFPFC_DELETE",
            "delete_strict": "OFPFC_DELETE_STRICT",
        }
        done, pending = 0, ""
        while True:
            hub.sleep(0.1)
            try:
                with open(path) as f:
                    f.seek(done)
                    pending += f.read()
                    done = f.tell()
            except FileNotFoundError:
                continue
            *lines, pending = pending.split("\n")
            touched = {}
            for line in filter(None, (ln.strip() for ln in lines)):
                u = json.loads(line)
                dp = self.dps.get(u["dpid"])
                if dp is None:
                    self.logger.warning("--updates: switch %#x is not connected", u["dpid"])
                    continue
                cmd = u.get("command", "add")
                fm = ofctl.parse_flow(u["flow"], u["dpid"], cmd)
                ofp, p = dp.ofproto, dp.ofproto_parser
                proto = (fm.match.get("ip_proto") or (None, 0))[0]
                dp.send_msg(
                    p.OFPFlowMod(
                        dp,
                        cookie=fm.cookie,
                        cookie_mask=fm.cookie_mask,
                        table_id=fm.table,
                        command=getattr(ofp, commands[cmd]),
                        priority=fm.priority,
                        out_port=fm.out_port,
                        out_group=fm.out_group,
                        match=_match(p, fm.match),
                        instructions=_instructions(dp, fm.instructions, proto),
                    )
                )
                touched[dp.id] = dp
            for dp in touched.values():
                dp.send_msg(dp.ofproto_parser.OFPBarrierRequest(dp))

    @set_ev_cls(ofp_event.EventOFPFlowStatsReply, MAIN_DISPATCHER)
    def flow_stats(self, ev):
        self._log(ev.msg.datapath, ev.msg)
        self.logger.info(
            "switch %#x: flow-stats reply with %d entries", ev.msg.datapath.id, len(ev.msg.body)
        )

    @set_ev_cls(ofp_event.EventOFPBarrierReply, MAIN_DISPATCHER)
    def barrier(self, ev):
        self._log(ev.msg.datapath, ev.msg)

    @set_ev_cls(ofp_event.EventOFPErrorMsg, [CONFIG_DISPATCHER, MAIN_DISPATCHER])
    def error(self, ev):
        self._log(ev.msg.datapath, ev.msg)
        self.logger.warning(
            "switch %#x: error type %d code %d", ev.msg.datapath.id, ev.msg.type, ev.msg.code
        )


# --- a cpc rule file as OpenFlow 1.3 messages ----------------------------------------------------
_WIDTH = {
    "ipv4_dst": 32,
    "ipv4_src": 32,
    "ip_proto": 8,
    "tp_dst": 16,
    "tp_src": 16,
    "eth_type": 16,
    "vlan_vid": 13,
    "eth_dst": 48,
    "eth_src": 48,
}


def _oxm_value(field: str, v: int):
    """cpc's integer field values in os-ken's words (dotted quads, colon-separated MACs)."""
    if field.startswith("ipv4_"):
        return ".".join(str(v >> s & 0xFF) for s in (24, 16, 8, 0))
    if field in ("eth_dst", "eth_src"):
        return ":".join(f"{v >> s & 0xFF:02x}" for s in range(40, -8, -8))
    return v


def _oxm_name(field: str, proto: int | None) -> str:
    if field in ("tp_src", "tp_dst"):  # cpc refuses transport fields without ip_proto 6/17
        return ("udp_" if proto == 17 else "tcp_") + field[3:]
    return field


def _match(p, m):
    proto = (m.get("ip_proto") or (None, 0))[0]
    kw = {}
    for f, v, mask in m.fields:
        name = _oxm_name(f, proto)
        if mask == (1 << _WIDTH[f]) - 1:  # exact: no mask on the wire (eth_type has none)
            kw[name] = _oxm_value(f, v)
        else:
            kw[name] = (_oxm_value(f, v), _oxm_value(f, mask))
    if m.in_port is not None:
        kw["in_port"] = m.in_port
    return p.OFPMatch(**kw)


def _actions(dp, acts, proto: int | None) -> list:
    p, ofp = dp.ofproto_parser, dp.ofproto
    out = []
    for a in acts:
        if a[0] == "output":
            max_len = ofp.OFPCML_MAX if a[1] == ofp.OFPP_CONTROLLER else 0
            out.append(p.OFPActionOutput(a[1], max_len))
        elif a[0] == "group":
            out.append(p.OFPActionGroup(a[1]))
        elif a[0] == "set_field":
            out.append(p.OFPActionSetField(**{_oxm_name(a[1], proto): _oxm_value(a[1], a[2])}))
        elif a[0] == "push_vlan":
            out.append(p.OFPActionPushVlan(0x8100))
        elif a[0] == "pop_vlan":
            out.append(p.OFPActionPopVlan())
        else:
            raise ValueError(f"action {a!r} is not supported by the example app")
    return out


def _instructions(dp, ins, proto: int | None) -> list:
    p, ofp = dp.ofproto_parser, dp.ofproto
    inst = []
    if ins.clear:
        inst.append(p.OFPInstructionActions(ofp.OFPIT_CLEAR_ACTIONS, []))
    if ins.apply:
        acts = _actions(dp, ins.apply, proto)
        inst.append(p.OFPInstructionActions(ofp.OFPIT_APPLY_ACTIONS, acts))
    if ins.write:
        acts = _actions(dp, ins.write, proto)
        inst.append(p.OFPInstructionActions(ofp.OFPIT_WRITE_ACTIONS, acts))
    if ins.goto is not None:
        inst.append(p.OFPInstructionGotoTable(ins.goto))
    return inst


def rules_from_file(dp, path):
    """([(group_id, type, buckets)], [(table, priority, match, instructions, cookie)]):
    what the cpc rule file at `path` holds for switch dp.id."""
    from cpc import ofctl
    from cpc.rules import Group

    p, ofp = dp.ofproto_parser, dp.ofproto
    types = {
        "all": ofp.OFPGT_ALL,
        "select": ofp.OFPGT_SELECT,
        "indirect": ofp.OFPGT_INDIRECT,
        "ff": ofp.OFPGT_FF,
        "fast_failover": ofp.OFPGT_FF,
    }
    groups, flows = [], []
    for e in ofctl.read_rules(path):
        if e.dpid != dp.id:
            continue
        if isinstance(e, Group):
            weight = 1 if e.type == "select" else 0
            buckets = [p.OFPBucket(weight=weight, actions=_actions(dp, b, None)) for b in e.buckets]
            groups.append((e.group_id, types[e.type], buckets))
            continue
        proto = (e.match.get("ip_proto") or (None, 0))[0]
        inst = _instructions(dp, e.instructions, proto)
        flows.append((e.table, e.priority, _match(p, e.match), inst, e.cookie))
    return groups, flows


def main(argv=None) -> None:
    from os_ken.lib import hub

    hub.patch(thread=False)
    args = list(sys.argv[1:] if argv is None else argv)
    for opt, env in (("--record", RECORD_ENV), ("--rules", RULES_ENV), ("--updates", UPDATES_ENV)):
        if opt in args:
            i = args.index(opt)
            os.environ[env] = args[i + 1]
            del args[i : i + 2]
    if "--port" in args:
        i = args.index("--port")
        args[i : i + 2] = ["--ofp-tcp-listen-port", args[i + 1], "--ofp-listen-host", "127.0.0.1"]
    CONF(args=args, project="os_ken")
    serve([__name__ if __name__ != "__main__" else "examples.controller_app"])


def serve(modules: list[str]) -> None:
    """Run these os-ken app modules in this process, with the OpenFlow handler, until they
    stop (os-ken's CONF must be set up first)."""
    from os_ken.lib import hub

    mgr = app_manager.AppManager.get_instance()
    mgr.load_apps([*modules, "os_ken.controller.ofp_handler"])
    services = mgr.instantiate_apps(**mgr.create_contexts())
    try:
        hub.joinall(services)
    finally:
        mgr.close()


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    main()
