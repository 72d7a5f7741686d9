"""The guard in the proxy, with real patched OVS: a FlowMod that would break an enforced
policy is answered with FLOW_MOD_FAILED/EPERM carrying the controller's own message, and
neither the switch nor the model ever holds it; other FlowMods pass."""

from __future__ import annotations

import asyncio
import struct

import pytest

import ofwire as of
from cpc.intents import IntentChecker, Policy
from cpc.model import Model
from cpc.topology import Topology
from pazzd.guard import IntentGuard
from tests.pazzd.proxy.ofhelpers import flow_mod, ofp, ofpp, out
from tests.pazzd.proxy.test_proxy_ovs import model_entries, start, switch_entries, target

pytestmark = pytest.mark.ovs


def test_enforced_policy_keeps_the_flowmod_off_the_switch(ovs, bridge):
    br = bridge(dpid=1)
    topo = Topology()
    topo.add_switch(1, "s1", [1, 2, 3])
    for p in (1, 2, 3):
        topo.add_edge((1, p))
    model = Model(topo)
    model.build()
    iso = Policy(
        "no-lab-to-office",
        "isolate",
        src=((1, 1),),
        dst=(1, 2),
        match=(("ipv4_dst", 0x0A050000, 0xFFFF0000), ("eth_type", 0x0800, 0xFFFF)),
        enforce=True,
    )
    checker = IntentChecker(model, [iso])
    checker.check_all()
    guard = IntentGuard(model, lambda: {"no-lab-to-office"})
    model.subscribe(lambda upd: guard.collect(checker.on_update(upd)))

    async def main():
        ctl, px = await start(ovs, model=model)
        px.hooks.guards.append(guard.for_proxy)
        try:
            ovs.vsctl("set-controller", br, target(px))
            c = await ctl.conn()
            bad = flow_mod(
                c.next_xid(),
                priority=100,
                match=ofpp.OFPMatch(eth_type=0x800, ipv4_dst=("10.5.1.0", "255.255.255.0")),
                actions=[out(2)],
            )
            good = flow_mod(
                c.next_xid(),
                priority=100,
                match=ofpp.OFPMatch(eth_type=0x800, ipv4_dst=("10.6.0.0", "255.255.0.0")),
                actions=[out(2)],
            )
            c.send(bad, good)
            await c.barrier()
            await px.barrier(1)
            (err,) = c.errors()
            _, t, _, xid = of.header(err)
            etype, code = struct.unpack_from("!HH", err, 8)
            assert (t, xid) == (of.OFPT_ERROR, of.header(bad)[3])
            # os-ken's numbers: an independent source for OpenFlow 1.3's EPERM
            assert (etype, code) == (ofp.OFPET_FLOW_MOD_FAILED, ofp.OFPFMFC_EPERM)
            assert err[12:] == bad[: len(err) - 12]  # the refused message, as OpenFlow asks
            dump = ovs.dump_flows(br)
            assert "10.6.0.0/16" in dump and "10.5.1.0" not in dump
            assert model_entries(model, 1) == switch_entries(ovs, br, 1)
            assert checker.open == {} and guard.refused == 1 and guard.judged == 2
        finally:
            await px.stop()
            await ctl.stop()

    asyncio.run(main())
