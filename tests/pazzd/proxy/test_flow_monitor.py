"""Flow monitoring through the proxy against the real patched OVS: the controller's
flow-monitor updates never show the proxy's set_verify_rule:ID.

Two bridges of one ovs-vswitchd get the same messages (same xids) from two raw controller
connections, one through the proxy and one direct. The oracle is the direct connection:
the flow-monitor updates the controller receives through the proxy must equal, byte for
byte, the ones it receives directly (the initial reply as a set, the later updates in
order). OVS's own decoder (`ovs-ofctl ofp-print`) must read every relayed reply and find no
set_verify_rule in it, while the switch behind the proxy holds every entry with its ID.

On OpenFlow 1.3, OVS 3.1 serves the ONF extension flow monitor (EXT-187, experimenter
0x4f4e4600 / 1870, Nicira's structures with an ofp_match and instructions) and rejects
NXST_FLOW_MONITOR; the test checks both.
"""

from __future__ import annotations

import asyncio
import struct

import pytest

import ofwire as of
from ofwire import flow_monitor
from tests.pazzd.proxy.ofhelpers import RawController, flow_mod, ofp, ofpp, out
from tests.pazzd.proxy.test_proxy_ovs import start, target, unix_path

pytestmark = pytest.mark.ovs

INITIAL, ADD, DELETE, MODIFY, ACTIONS, OWN = 1, 2, 4, 8, 16, 32
VERIFY_PREFIX = bytes.fromhex("ffff001000002320")  # an experimenter action of Nicira...
VERIFY_SUB = struct.pack("!H", of.NXAST_SET_VERIFY_RULE_ID)  # ...subtype set_verify_rule


def monitor_request(
    xid: int,
    mon_id: int,
    flags: int,
    vendor=flow_monitor.ONF_VENDOR_ID,
    exp_type=flow_monitor.ONFST_FLOW_MONITOR,
) -> bytes:
    """One flow monitor on all tables, all flows: onf_flow_monitor_request + an empty
    ofp_match (what OVS's decoder pulls)."""
    body = struct.pack("!HH4xII", 0xFFFF, 0, vendor, exp_type)
    body += struct.pack("!IHHIB3x", mon_id, flags, 4, 0xFFFFFFFF, 0xFF)
    body += struct.pack("!HH4x", 1, 4)
    return of.message(4, of.OFPT_MULTIPART_REQUEST, xid, body)


def monitor_cancel(xid: int, mon_id: int) -> bytes:
    body = struct.pack("!III", flow_monitor.ONF_VENDOR_ID, flow_monitor.ONFST_FLOW_MONITOR, mon_id)
    return of.message(4, of.OFPT_EXPERIMENTER, xid, body)


def ip_match(net: str, plen: int = 24):
    mask = ".".join(str((0xFFFFFFFF << (32 - plen) >> (24 - 8 * i)) & 0xFF) for i in range(4))
    return ofpp.OFPMatch(eth_type=0x800, ipv4_dst=(net, mask))


def apply(*acts):
    return ofpp.OFPInstructionActions(ofp.OFPIT_APPLY_ACTIONS, list(acts))


def initial_mods(x) -> list[bytes]:
    """A varied table: plain routes, a goto with no actions (the proxy creates an
    APPLY_ACTIONS just for its ID), apply + write actions, set_field in table 1."""
    msgs = [
        flow_mod(
            x(),
            priority=100,
            cookie=0x10 + i,
            match=ip_match(f"10.0.{i}.0"),
            actions=[out(i % 3 + 1)],
        )
        for i in range(6)
    ]
    msgs.append(
        flow_mod(
            x(),
            priority=50,
            match=ofpp.OFPMatch(in_port=3),
            instructions=[ofpp.OFPInstructionGotoTable(1)],
        )
    )
    msgs.append(
        flow_mod(
            x(),
            priority=60,
            match=ip_match("10.9.0.0", 16),
            instructions=[
                apply(out(2)),
                ofpp.OFPInstructionActions(ofp.OFPIT_WRITE_ACTIONS, [out(3)]),
            ],
        )
    )
    msgs.append(
        flow_mod(
            x(),
            table=1,
            priority=10,
            match=ofpp.OFPMatch(),
            actions=[ofpp.OFPActionSetField(eth_dst="02:00:00:00:00:09"), out(1)],
        )
    )
    return msgs


def owned_changes(x) -> list[bytes]:
    """Changes reported in full (monitor with OWN): add, modify, delete, non-strict delete."""
    return [
        flow_mod(x(), priority=100, cookie=0x99, match=ip_match("10.0.7.0"), actions=[out(2)]),
        flow_mod(
            x(),
            command=ofp.OFPFC_MODIFY_STRICT,
            priority=100,
            match=ip_match("10.0.1.0"),
            actions=[out(3), out(1)],
        ),
        flow_mod(x(), command=ofp.OFPFC_DELETE_STRICT, priority=100, match=ip_match("10.0.2.0")),
        flow_mod(x(), command=ofp.OFPFC_DELETE, match=ip_match("10.9.0.0", 16)),
        flow_mod(
            x(),
            command=ofp.OFPFC_MODIFY_STRICT,
            table=1,
            priority=10,
            match=ofpp.OFPMatch(),
            instructions=[],
        ),
    ]


def abbreviated_changes(x) -> list[bytes]:
    """Changes reported abbreviated (no OWN): a non-strict MODIFY over two entries makes the
    proxy give each its own ID back with MODIFY_STRICTs of its own, which the controller's
    monitor must not see."""
    return [
        flow_mod(x(), priority=100, cookie=0x77, match=ip_match("10.0.8.0"), actions=[out(1)]),
        flow_mod(
            x(),
            command=ofp.OFPFC_MODIFY,
            cookie=0x10,
            cookie_mask=0xFE,
            match=ofpp.OFPMatch(eth_type=0x800),
            actions=[out(2)],
        ),
        flow_mod(x(), command=ofp.OFPFC_DELETE_STRICT, priority=100, match=ip_match("10.0.3.0")),
    ]


def monitor_replies(c) -> list[bytes]:
    return [
        m
        for m in c.received
        if m[1] == of.OFPT_MULTIPART_REPLY and flow_monitor.monitor_kind(m) is not None
    ]


def updates(msgs: list[bytes]) -> list[bytes]:
    """The update records of flow-monitor replies, split by their own length field."""
    out_ = []
    for m in msgs:
        body, off = m[24:], 0
        while off < len(body):
            ln = struct.unpack_from("!H", body, off)[0]
            assert ln >= 8
            out_.append(bytes(body[off : off + ln]))
            off += ln
    return out_


def has_id_action(data: bytes) -> bool:
    i = data.find(VERIFY_PREFIX)
    while i >= 0:
        if data[i + 8 : i + 10] == VERIFY_SUB:
            return True
        i = data.find(VERIFY_PREFIX, i + 1)
    return False


async def settle(conns, count, want, timeout=10.0) -> None:
    """Wait until count(c) >= want for every connection (updates arrive asynchronously)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while any(count(c) < want for c in conns):
        if loop.time() > deadline:
            raise TimeoutError([count(c) for c in conns])
        await asyncio.sleep(0.05)
    await asyncio.sleep(0.3)  # and nothing more is on its way


def test_flow_monitor_updates_are_stripped(ovs, bridge):
    br_px = bridge(dpid=1)
    br_direct = bridge(dpid=2)

    async def main():
        ctl, px = await start(ovs)
        direct = RawController()
        await direct.start_unix(unix_path(ovs))
        try:
            ovs.vsctl("set-controller", br_px, target(px))
            ovs.vsctl("set-controller", br_direct, f"unix:{direct.server.sockets[0].getsockname()}")
            cp = await ctl.conn()
            cd = await direct.conn()
            assert (cp.dpid, cd.dpid) == (1, 2)
            conns = (cp, cd)
            xid = iter(range(5000, 100000))

            def x() -> int:
                return next(xid)

            async def both(msgs, proxy_barrier=False):
                for c in conns:
                    c.send(*msgs)
                for c in conns:
                    await c.barrier()
                if proxy_barrier:
                    await px.barrier(1)  # the proxy's re-ID MODIFY_STRICTs are done too

            await both(initial_mods(x))

            # NXST_FLOW_MONITOR is not served on OpenFlow 1.3 by OVS 3.1: the same error
            # reaches the controller with and without the proxy.
            nx_req = monitor_request(
                x(), 9, INITIAL | ADD | ACTIONS, of.NX_VENDOR_ID, flow_monitor.NXST_FLOW_MONITOR
            )
            nx_err = [await c.request(nx_req) for c in conns]
            assert nx_err[0] == nx_err[1] and nx_err[0][0][1] == of.OFPT_ERROR

            # 1. Initial flows and owned changes in full, with their instructions.
            req = monitor_request(x(), 1, INITIAL | ADD | DELETE | MODIFY | ACTIONS | OWN)
            initial = [await c.request(req) for c in conns]
            assert sorted(updates(initial[0])) == sorted(updates(initial[1]))
            assert len(updates(initial[0])) == 9
            n0 = len(updates(monitor_replies(cd)))
            await both(owned_changes(x))
            n_owned = 1 + 1 + 1 + 1 + 1  # added, modified, deleted, deleted, modified
            await settle(conns, lambda c: len(updates(monitor_replies(c))), n0 + n_owned)
            got = [updates(monitor_replies(c))[n0:] for c in conns]
            assert got[0] == got[1]
            assert [struct.unpack_from("!H", u, 2)[0] for u in got[0]] == [0, 2, 1, 1, 2]
            cancel = monitor_cancel(x(), 1)
            for c in conns:
                c.send(cancel)

            # 2. Without OWN the controller's own changes come abbreviated with its xids;
            # the proxy's own re-ID FlowMods are not reported.
            req2 = monitor_request(x(), 2, ADD | DELETE | MODIFY | ACTIONS)
            for c in conns:
                await c.request(req2)
            n1 = len(updates(monitor_replies(cd)))
            mods = abbreviated_changes(x)
            await both(mods, proxy_barrier=True)
            await settle(conns, lambda c: len(updates(monitor_replies(c))), n1 + len(mods))
            got2 = [updates(monitor_replies(c))[n1:] for c in conns]
            assert got2[0] == got2[1]
            assert [struct.unpack_from("!HHI", u)[1:] for u in got2[0]] == [
                (3, of.header(m)[3]) for m in mods
            ]
            assert len(px.intended(1)) == 8 and len({e.rule_id for e in px.intended(1)}) == 8

            # Independently: the switch behind the proxy holds the IDs, OVS's own decoder
            # reads each reply the controller got, and no reply carries the ID action.
            dump = ovs.dump_flows(br_px)
            assert dump.count("set_verify_rule:") == 8, dump
            assert "set_verify_rule" not in ovs.dump_flows(br_direct)
            px_replies, direct_replies = monitor_replies(cp), monitor_replies(cd)
            assert len(updates(px_replies)) == len(updates(direct_replies)) >= 9 + 5 + 3
            texts = []
            for m in px_replies:
                assert not has_id_action(m), m.hex()
                text = ovs.ofctl("ofp-print", m.hex(), version=None)
                assert "verify" not in text and "flow_monitor" in text.lower(), text
                texts.append(text)
            assert any("actions=output:3,output:1" in t for t in texts), texts
            assert any("event=ADDED" in t and "cookie=0x99" in t for t in texts), texts
        finally:
            await px.stop()
            await ctl.stop()
            await direct.stop()

    asyncio.run(main())
