"""The load balancer: spreads a destination over paths with rules more specific than the
router's, sent as they are appended to a file (JSON lines {"dpid", "flow", "command"},
flows in ovs-ofctl syntax), each batch followed by a barrier. Its cookie is 0x30 unless
PAZZ_LB_COOKIE says otherwise (0: the app is known by its controller connection only)."""

from __future__ import annotations

import os

from os_ken.lib import hub

from examples.apps.common import RuleApp, flow_mod, read_lines

RULES_ENV, COOKIE_ENV = "PAZZ_LB_RULES", "PAZZ_LB_COOKIE"


class LoadBalancer(RuleApp):
    COOKIE, MASK = 0x30, 0xFF

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.cookie = int(os.environ.get(COOKIE_ENV, "0x30"), 0)
        if os.environ.get(RULES_ENV):
            self.threads.append(hub.spawn(self._follow, os.environ[RULES_ENV]))

    def _follow(self, path: str) -> None:
        done = 0
        while True:
            hub.sleep(0.1)
            lines, done = read_lines(path, done)
            touched = {}
            for line in lines:
                dp = self.dps.get(line["dpid"])
                if dp is None:
                    self.logger.warning("lb: switch %#x is not connected", line["dpid"])
                    continue
                dp.send_msg(flow_mod(dp, line, self.cookie))
                touched[dp.id] = dp
            for dp in touched.values():
                dp.send_msg(dp.ofproto_parser.OFPBarrierRequest(dp))
