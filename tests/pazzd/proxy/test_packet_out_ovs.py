"""Fuzz probes by PACKET_OUT through the proxy's switch session, into the real patched OVS.

fuzzer.inject.QueuedPacketOut queues the fuzzer's frames and sends them from the event loop
with Proxy.send_packet_out (in_port = the edge port, actions = output:TABLE, a fresh Verify
shim put in): the switch processes each probe through its tables as if it arrived on the
edge port, so the frame leaving on the inner port carries the tags of the entry it matched.
The tags are checked against cpc.tags computed from the entry the switch holds."""

from __future__ import annotations

import asyncio
import time

import pytest

from cpc import tags
from cpc.model import Model
from fuzzer.craft import Crafter
from fuzzer.inject import QueuedPacketOut
from tests.ovs.test_datapath import Capture, tag_of
from tests.pazzd.proxy.ofhelpers import flow_mod, ofpp, out
from tests.pazzd.proxy.test_proxy_ovs import start, target, topo

pytestmark = pytest.mark.ovs

COOKIE, PRIO = 0x42, 100
HEADER = {
    "eth_src": 0x020000000001,
    "eth_dst": 0x020000000002,
    "eth_type": 0x800,
    "ipv4_src": 0x0A000001,
    "ipv4_dst": 0x0A000002,
    "ip_proto": 6,
    "tcp_src": 1234,
    "tcp_dst": 80,
}


def test_packet_out_probes_are_tagged_as_if_they_arrived_on_the_edge(ovs, bridge, tmp_path):
    br = bridge(dpid=1)
    ovs.vsctl("set", "bridge", br, "other_config:verify-tagging=true")
    ovs.vsctl("set", "interface", f"{br}1", "other_config:verify-edge=true")
    ovs.netns.run("ip", "link", "set", f"{br}2", "up")
    model = Model(topo(1))
    model.build()
    crafter = Crafter(pretag=False)
    frames = [crafter.frame(HEADER, seq) for seq in range(5)]

    caps: list[Capture] = []

    async def main():
        ctl, px = await start(ovs, model=model)
        stop = asyncio.Event()
        inj = QueuedPacketOut(px.send_packet_out)
        task = asyncio.ensure_future(inj.run(stop))
        try:
            ovs.vsctl("set-controller", br, target(px))
            c = await ctl.conn()
            match = ofpp.OFPMatch(in_port=1, eth_type=0x800, ipv4_dst="10.0.0.2")
            c.send(
                flow_mod(c.next_xid(), priority=PRIO, match=match, actions=[out(2)], cookie=COOKIE)
            )
            await c.barrier()
            await px.barrier(1)
            (entry,) = px.intended(1)
            # Captured from now on: the bridge has settled.
            caps.append(Capture(f"{br}2", tmp_path / "out.pcap", ns=ovs.netns))
            caps[0].wait_ready()
            assert inj.inject((1, 1), frames) == len(frames)
            inj.inject((9, 1), frames[:1])  # no such switch: counted, not sent
            for _ in range(100):
                if not inj.queue:
                    break
                await asyncio.sleep(0.02)
            await px.barrier(1)
            assert (inj.sent, inj.failed) == (len(frames), 1)
            return entry
        finally:
            stop.set()
            await task
            await px.stop()
            await ctl.stop()

    try:
        entry = asyncio.run(main())
        time.sleep(1.5)  # tcpdump hands packets over once a second (its buffer timeout)
    finally:
        for cap in caps:
            cap.stop()
    got = [f for f in cap.frames() if tag_of(f) is not None]
    assert entry.rule_id != 0
    port = tags.set_verify_port(tags.VERIFY_PORT_INIT, 1, 1)
    rule = tags.set_verify_rule(tags.VERIFY_RULE_INIT, 1, 0, PRIO, COOKIE, entry.rule_id)
    assert len(got) == len(frames)
    for sent, f in zip(frames, got, strict=True):
        assert tag_of(f) == (port, rule)
        assert f[:12] + f[20:] == sent  # the probe itself, the shim aside
