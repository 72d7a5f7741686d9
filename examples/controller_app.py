"""Example os-ken controller app: installs a few routes proactively and reads flow stats.

Run it (os-ken has no osken-manager script in this venv, so this file starts its own):

    python examples/controller_app.py --port 6633 [--record out.jsonl] [--rules rules.jsonl]

On each switch (OpenFlow 1.3) it installs, once the features reply is in:
- the routes of a cpc rules file (--rules, JSON lines {"dpid": N, "flow": "..."}; entries
  for other dpids are skipped), or by default 10.0.i.0/24 -> output:(i % 3 + 1), i < 8,
  plus a goto_table entry and a table-1 entry with write_actions;
then a barrier, then a flow-stats request. With --record, every message it receives is
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


class ExampleApp(app_manager.OSKenApp):
    OFP_VERSIONS = [ofproto_v1_3.OFP_VERSION]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        path = os.environ.get(RECORD_ENV)
        self.record = open(path, "a") if path else None  # noqa: SIM115

    def _log(self, dp, msg) -> None:
        if self.record is not None:
            self.record.write(json.dumps({"dpid": dp.id, "type": msg.msg_type, "xid": msg.xid,
                                          "hex": bytes(msg.buf).hex()}) + "\n")  # fmt: skip
            self.record.flush()

    @set_ev_cls(ofp_event.EventOFPSwitchFeatures, CONFIG_DISPATCHER)
    def features(self, ev):
        dp = ev.msg.datapath
        self._log(dp, ev.msg)
        ofp, p = dp.ofproto, dp.ofproto_parser
        for table, prio, match, inst in self.rules(dp):
            dp.send_msg(p.OFPFlowMod(dp, table_id=table, priority=prio, match=match,
                                     instructions=inst, cookie=0x7))  # fmt: skip
        dp.send_msg(p.OFPBarrierRequest(dp))
        dp.send_msg(p.OFPFlowStatsRequest(dp, 0, ofp.OFPTT_ALL, ofp.OFPP_ANY, ofp.OFPG_ANY))

    def rules(self, dp):
        ofp, p = dp.ofproto, dp.ofproto_parser

        def apply(*acts):
            return [p.OFPInstructionActions(ofp.OFPIT_APPLY_ACTIONS, list(acts))]

        if os.environ.get(RULES_ENV):
            yield from self.rules_from_file(dp, os.environ[RULES_ENV])
            return
        for i in range(8):
            m = p.OFPMatch(eth_type=0x800, ipv4_dst=(f"10.0.{i}.0", "255.255.255.0"))
            yield 0, 100, m, apply(p.OFPActionOutput(i % 3 + 1))
        yield 0, 50, p.OFPMatch(eth_type=0x800), [p.OFPInstructionGotoTable(1)]
        yield (
            1,
            10,
            p.OFPMatch(in_port=1),
            [p.OFPInstructionActions(ofp.OFPIT_WRITE_ACTIONS, [p.OFPActionOutput(2)])],
        )

    def rules_from_file(self, dp, path):
        from cpc import ofctl

        p, ofp = dp.ofproto_parser, dp.ofproto
        names = {"ipv4_dst": "ipv4_dst", "ipv4_src": "ipv4_src", "eth_type": "eth_type",
                 "ip_proto": "ip_proto", "eth_dst": "eth_dst", "eth_src": "eth_src"}  # fmt: skip
        for e in ofctl.read_rules(path):
            if getattr(e, "dpid", None) != dp.id or not hasattr(e, "match"):
                continue
            kw = {names[f]: (v, m) for f, v, m in e.match.fields if f in names}
            if e.match.in_port is not None:
                kw["in_port"] = e.match.in_port
            acts = [p.OFPActionOutput(a[1]) for a in e.instructions.apply if a[0] == "output"]
            inst = [p.OFPInstructionActions(ofp.OFPIT_APPLY_ACTIONS, acts)] if acts else []
            if e.instructions.goto is not None:
                inst.append(p.OFPInstructionGotoTable(e.instructions.goto))
            yield e.table, e.priority, p.OFPMatch(**kw), inst

    @set_ev_cls(ofp_event.EventOFPFlowStatsReply, MAIN_DISPATCHER)
    def flow_stats(self, ev):
        self._log(ev.msg.datapath, ev.msg)
        for st in ev.msg.body:
            self.logger.info("flow table=%d priority=%d %s", st.table_id, st.priority,
                             st.instructions)  # fmt: skip

    @set_ev_cls(ofp_event.EventOFPBarrierReply, MAIN_DISPATCHER)
    def barrier(self, ev):
        self._log(ev.msg.datapath, ev.msg)

    @set_ev_cls(ofp_event.EventOFPErrorMsg, [CONFIG_DISPATCHER, MAIN_DISPATCHER])
    def error(self, ev):
        self._log(ev.msg.datapath, ev.msg)


def main(argv=None) -> None:
    from os_ken.lib import hub

    hub.patch(thread=False)
    args = list(sys.argv[1:] if argv is None else argv)
    for opt, env in (("--record", RECORD_ENV), ("--rules", RULES_ENV)):
        if opt in args:
            i = args.index(opt)
            os.environ[env] = args[i + 1]
            del args[i : i + 2]
    if "--port" in args:
        i = args.index("--port")
        args[i : i + 2] = ["--ofp-tcp-listen-port", args[i + 1], "--ofp-listen-host", "127.0.0.1"]
    CONF(args=args, project="os_ken")
    mgr = app_manager.AppManager.get_instance()
    mgr.load_apps([__name__ if __name__ != "__main__" else "examples.controller_app",
                   "os_ken.controller.ofp_handler"])  # fmt: skip
    services = mgr.instantiate_apps(**mgr.create_contexts())
    try:
        hub.joinall(services)
    finally:
        mgr.close()


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    main()
