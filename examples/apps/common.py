"""What the three example apps share: rule files as FlowMods, sent on every switch that
connects, and a file of more FlowMods followed as it grows."""

from __future__ import annotations

import json
import os

import os_ken.base.app_manager as app_manager  # noqa: I001  (import order matters in os-ken)
from os_ken.controller import ofp_event
from os_ken.controller.handler import CONFIG_DISPATCHER, MAIN_DISPATCHER, set_ev_cls
from os_ken.ofproto import ofproto_v1_3

from examples import controller_app as base

RULES_ENV = "PAZZ_APPS_RULES"  # the rule file (cpc JSON lines) router and acl take from


class RuleApp(app_manager.OSKenApp):
    """Installs, on each switch, the entries of the rule file whose cookie is in this app's
    range (COOKIE, MASK), with the groups they use; logs the errors the switch sends."""

    OFP_VERSIONS = [ofproto_v1_3.OFP_VERSION]
    COOKIE, MASK = 0, 0
    GROUPS = False  # install the rule file's groups too

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.dps = {}

    @set_ev_cls(ofp_event.EventOFPSwitchFeatures, CONFIG_DISPATCHER)
    def features(self, ev):
        dp = ev.msg.datapath
        self.dps[dp.id] = dp
        path = os.environ.get(RULES_ENV)
        if not path:
            return
        groups, flows = base.rules_from_file(dp, path)
        ofp, p = dp.ofproto, dp.ofproto_parser
        if self.GROUPS:
            for gid, gtype, buckets in groups:
                dp.send_msg(p.OFPGroupMod(dp, ofp.OFPGC_ADD, gtype, gid, buckets))
        n = 0
        for table, prio, match, inst, cookie in flows:
            if cookie & self.MASK != self.COOKIE:
                continue
            dp.send_msg(
                p.OFPFlowMod(
                    dp, table_id=table, priority=prio, match=match, instructions=inst, cookie=cookie
                )
            )
            n += 1
        dp.send_msg(p.OFPBarrierRequest(dp))
        self.logger.info("%s: switch %#x: sent %d flows", self.name, dp.id, n)

    @set_ev_cls(ofp_event.EventOFPErrorMsg, [CONFIG_DISPATCHER, MAIN_DISPATCHER])
    def error(self, ev):
        self.logger.warning(
            "%s: switch %#x: error type %d code %d",
            self.name,
            ev.msg.datapath.id,
            ev.msg.type,
            ev.msg.code,
        )


def flow_mod(dp, line: dict, cookie: int | None = None):
    """A FlowMod of a JSON line {"dpid", "flow" (ovs-ofctl syntax), "command"}; cookie
    overrides the flow's own."""
    from cpc import ofctl

    cmd = line.get("command", "add")
    fm = ofctl.parse_flow(line["flow"], line["dpid"], cmd)
    ofp, p = dp.ofproto, dp.ofproto_parser
    proto = (fm.match.get("ip_proto") or (None, 0))[0]
    return p.OFPFlowMod(
        dp,
        cookie=fm.cookie if cookie is None else cookie,
        cookie_mask=fm.cookie_mask,
        table_id=fm.table,
        command=getattr(ofp, "OFPFC_" + cmd.upper()),
        priority=fm.priority,
        out_port=fm.out_port,
        out_group=fm.out_group,
        match=base._match(p, fm.match),
        instructions=base._instructions(dp, fm.instructions, proto),
    )


def read_lines(path: str, done: int) -> tuple[list[dict], int]:
    """The complete JSON lines of `path` after byte `done`, and the new offset."""
    try:
        with open(path) as f:
            f.seek(done)
            text = f.read()
    except FileNotFoundError:
        return [], done
    cut = text.rfind("\n") + 1
    lines = [json.loads(ln) for ln in text[:cut].splitlines() if ln.strip()]
    return lines, done + len(text[:cut].encode())
