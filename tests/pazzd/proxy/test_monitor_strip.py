"""The Nicira variant of flow-monitor stripping (NXST_FLOW_MONITOR on OpenFlow 1.3, as
Open vSwitch before 3.x sends it: NXM match, then actions). OVS 3.1 rejects NXST on 1.3
(see test_flow_monitor.py), so these updates are built here: the expected bytes are the
same update built without the ID action, not derived from the proxy's code."""

from __future__ import annotations

import struct

import ofwire as of
from ofwire import flow_monitor
from pazzd.proxy import Proxy, ProxyConfig
from tests.pazzd.proxy.test_robustness import connected

NXM_OF_IN_PORT = struct.pack("!IH", 0x00000002, 2)  # in_port=2, 6 bytes: padded to 8


def nx_update(event: int, actions: bytes, cookie: int = 0x42) -> bytes:
    match = NXM_OF_IN_PORT + b"\0\0"
    return (
        struct.pack(
            "!HHHHHHHBxQ",
            24 + len(match) + len(actions),
            event,
            0,
            100,
            0,
            0,
            len(NXM_OF_IN_PORT),
            0,
            cookie,
        )
        + match
        + actions
    )


def nx_reply(xid: int, *updates: bytes) -> bytes:
    head = struct.pack("!HH4xII", 0xFFFF, 0, of.NX_VENDOR_ID, flow_monitor.NXST_FLOW_MONITOR)
    return of.message(4, of.OFPT_MULTIPART_REPLY, xid, head + b"".join(updates))


def test_nx_flow_monitor_updates_lose_the_id_action():
    proxy = Proxy(ProxyConfig(audit_delay=-1, audit_interval=0))
    s, _sw, up = connected(proxy)
    acts = of.output_action(1, 0) + of.output_action(3, 0)
    with_id = of.verify_rule_action(77) + acts
    s.send_own(of.message(4, of.OFPT_BARRIER_REQUEST, 0xFFF0FFFF), None)  # an own xid
    abbrev_ctl = struct.pack("!HHI", 8, 3, 1234)
    abbrev_own = struct.pack("!HHI", 8, 3, 0xFFF0FFFF)
    sent = nx_reply(0, nx_update(0, with_id), abbrev_own, nx_update(1, with_id, 7), abbrev_ctl)
    up.data.clear()
    s.from_switch(sent)
    assert bytes(up.data) == nx_reply(0, nx_update(0, acts), nx_update(1, acts, 7), abbrev_ctl)
    # An unsolicited reply left with nothing to say is not relayed; an answer is.
    up.data.clear()
    s.from_switch(nx_reply(0, abbrev_own))
    s.from_switch(nx_reply(99, abbrev_own))
    assert bytes(up.data) == nx_reply(99)
    # Without the ID action the reply is relayed as it came.
    up.data.clear()
    plain = nx_reply(5, nx_update(2, acts))
    s.from_switch(plain)
    assert bytes(up.data) == plain
    proxy.store.close()
