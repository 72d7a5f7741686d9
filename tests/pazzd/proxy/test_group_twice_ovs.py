"""A FlowMod whose actions name one group twice, through the proxy to real patched OVS:
refused with BAD_ACTION/EPERM carrying the controller's message (Open vSwitch 3.1.0
aborts when such an entry's group is deleted: docs/agents.md); with group_twice "warn"
it reaches the switch and the proxy counts a warning. A group named once passes."""

from __future__ import annotations

import asyncio
import struct

import pytest
from os_ken.ofproto import ofproto_v1_3 as ofp

import ofwire as of
from cpc.model import Model
from tests.pazzd.proxy.ofhelpers import DPATH, flow_mod, ofpp, out, ser
from tests.pazzd.proxy.test_proxy_ovs import start, target, topo

pytestmark = pytest.mark.ovs


def _group(xid: int) -> bytes:
    bucket = ofpp.OFPBucket(0, ofp.OFPP_ANY, ofp.OFPG_ANY, [out(3)])
    return ser(ofpp.OFPGroupMod(DPATH, ofp.OFPGC_ADD, ofp.OFPGT_ALL, 1, [bucket]), xid)


@pytest.mark.parametrize("mode", ["refuse", "warn"])
def test_group_named_twice(ovs, bridge, mode):
    br = bridge(dpid=1)
    model = Model(topo(1))
    model.build()

    async def main():
        ctl, px = await start(ovs, {"group_twice": mode}, model=model)
        try:
            ovs.vsctl("set-controller", br, target(px))
            c = await ctl.conn()
            twice = flow_mod(
                c.next_xid(),
                priority=100,
                match=ofpp.OFPMatch(eth_type=0x800, ipv4_dst="10.0.0.1"),
                actions=[ofpp.OFPActionGroup(1), out(2), ofpp.OFPActionGroup(1)],
            )
            once = flow_mod(
                c.next_xid(),
                priority=100,
                match=ofpp.OFPMatch(eth_type=0x800, ipv4_dst="10.0.0.2"),
                actions=[ofpp.OFPActionGroup(1), out(2)],
            )
            c.send(_group(c.next_xid()), twice, once)
            await c.barrier()
            await px.barrier(1)
            dump = ovs.dump_flows(br)
            assert "10.0.0.2" in dump
            if mode == "refuse":
                (err,) = c.errors()
                _, t, _, xid = of.header(err)
                assert (t, xid) == (of.OFPT_ERROR, of.header(twice)[3])
                etype, code = struct.unpack_from("!HH", err, 8)
                assert (etype, code) == (of.OFPET_BAD_ACTION, of.OFPBAC_EPERM)
                assert err[12:] == twice[: len(err) - 12]
                assert "10.0.0.1" not in dump and px.agent_warnings == 0
            else:
                assert c.errors() == []
                assert "10.0.0.1" in dump and px.agent_warnings >= 1
        finally:
            await px.stop()
            await ctl.stop()

    asyncio.run(main())
