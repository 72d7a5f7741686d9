"""Two controllers on one switch through the proxy, against the same two controllers on a
switch directly: the real patched OVS is the oracle. One bridge connects straight to two
raw controllers (OVS's own roles), another to the proxy, which connects to two more; both
pairs play the same script (roles with generation ids, a stale one, a slave's FlowMod and
PACKET_OUT, PACKET_INs, FLOW_REMOVED and PORT_STATUS per role, an asynchronous
configuration, requests of both controllers with the same xid) and must see the same
replies, errors and asynchronous messages."""

from __future__ import annotations

import asyncio
import struct

import pytest

import ofwire as of
from pazzd.proxy import Proxy, ProxyConfig
from pazzd.proxy.proxy import Controller
from tests.pazzd.proxy.ofhelpers import DPATH, RawController, flow_mod, ofp, ofpp, out, parse, ser
from tests.pazzd.proxy.test_proxy_ovs import target, unix_path

pytestmark = pytest.mark.ovs

FRAME = bytes.fromhex("ffffffffffff0000000000010800") + bytes(46)
ASYNC_TYPES = (ofp.OFPT_PACKET_IN, ofp.OFPT_FLOW_REMOVED, ofp.OFPT_PORT_STATUS)


def role(c, r, gen=0) -> bytes:
    return ser(ofpp.OFPRoleRequest(DPATH, r, gen), c.next_xid())


def packet_out(c) -> bytes:
    acts = [ofpp.OFPActionOutput(ofp.OFPP_CONTROLLER, ofp.OFPCML_NO_BUFFER)]
    msg = ofpp.OFPPacketOut(DPATH, ofp.OFP_NO_BUFFER, ofp.OFPP_CONTROLLER, acts, FRAME)
    return ser(msg, c.next_xid())


def answer(msgs: list[bytes], sent: bytes) -> tuple:
    """A reply or error, as comparable across switches: type, same xid as the request,
    body (an error's echoed request compared whole)."""
    (m,) = msgs
    assert of.header(m)[3] == of.header(sent)[3], "the reply carries the request's xid"
    return (m[1], m[8:])


def async_seen(c, since: int) -> list[tuple]:
    """(type, reason) of the asynchronous messages c got since index `since`."""
    at = {ofp.OFPT_PACKET_IN: 14, ofp.OFPT_FLOW_REMOVED: 18, ofp.OFPT_PORT_STATUS: 8}
    return sorted((m[1], m[at[m[1]]]) for m in c.received[since:] if m[1] in ASYNC_TYPES)


async def settle(*cs) -> None:
    for c in cs:
        await c.barrier()
    await asyncio.sleep(0.3)


async def script(x, y, del_port) -> list:
    """What x and y see; y's FlowMods and PACKET_OUTs while slave are refused."""
    seen: list = []

    async def ask(c, msg):
        seen.append(answer(await c.request(msg, timeout=5), msg))

    async def asyncs(label, coro):
        marks = (len(x.received), len(y.received))
        await coro
        await settle(x, y)
        seen.append((label, async_seen(x, marks[0]), async_seen(y, marks[1])))

    await ask(x, role(x, ofp.OFPCR_ROLE_NOCHANGE))
    await ask(x, ser(ofpp.OFPGetAsyncRequest(DPATH), x.next_xid()))
    await ask(x, role(x, ofp.OFPCR_ROLE_MASTER, 5))
    await ask(y, role(y, ofp.OFPCR_ROLE_SLAVE, 5))
    await ask(y, role(y, ofp.OFPCR_ROLE_MASTER, 4))  # stale
    await ask(y, role(y, ofp.OFPCR_ROLE_NOCHANGE))
    await ask(y, role(y, 7))  # no such role
    await ask(y, flow_mod(y.next_xid(), priority=9, actions=[out(1)]))  # slave
    await ask(y, packet_out(y))
    # the master's FlowMods take effect; PACKET_INs go to the master only
    x.send(flow_mod(x.next_xid(), priority=7, actions=[out(2)], flags=ofp.OFPFF_SEND_FLOW_REM))
    await asyncs("packet-in, master and slave", _send(x, packet_out(x)))
    await asyncs(
        "flow removed, master and slave",
        _send(x, flow_mod(x.next_xid(), command=ofp.OFPFC_DELETE, table=ofp.OFPTT_ALL)),
    )
    # generation ids wrap: 2^64 - 1 is older than 6
    await ask(y, role(y, ofp.OFPCR_ROLE_MASTER, (1 << 64) - 1))
    await ask(y, role(y, ofp.OFPCR_ROLE_MASTER, 6))
    await ask(x, role(x, ofp.OFPCR_ROLE_NOCHANGE))  # x was made slave
    await ask(x, flow_mod(x.next_xid(), priority=9, actions=[out(1)]))
    # a slave asking for packet-ins of reason ACTION gets them
    x.send(ser(ofpp.OFPSetAsync(DPATH, [0b011, 0b010], [0b111, 0b111], [0b1111, 0]), x.next_xid()))
    await ask(x, ser(ofpp.OFPGetAsyncRequest(DPATH), x.next_xid()))
    await asyncs("packet-in, slave asked for it", _send(y, packet_out(y)))
    await ask(x, role(x, ofp.OFPCR_ROLE_EQUAL))
    await ask(y, role(y, ofp.OFPCR_ROLE_EQUAL))
    await asyncs("packet-in, both equal", _send(x, packet_out(x)))
    await asyncs("port status, both", _call(del_port))
    # the same xid from both controllers at once: each gets the answer to its own request
    y.send(flow_mod(y.next_xid(), table=0, priority=3, actions=[out(1)]))
    y.send(flow_mod(y.next_xid(), table=1, priority=3, actions=[out(1)]))
    y.send(flow_mod(y.next_xid(), table=1, priority=4, actions=[out(2)]))
    await settle(x, y)
    xid = 77
    fx = asyncio.get_running_loop().create_future()
    fy = asyncio.get_running_loop().create_future()
    x.waiters[xid], y.waiters[xid] = fx, fy
    x.send(of.flow_stats_request(xid, 0))
    y.send(of.flow_stats_request(xid, 1))
    rx, ry = await asyncio.wait_for(asyncio.gather(fx, fy), 5)
    seen.append(("same xid", stats_tables(rx), stats_tables(ry)))
    return seen


async def _send(c, msg) -> None:
    c.send(msg)


async def _call(fn) -> None:
    fn()


def stats_tables(replies) -> list[tuple[int, int]]:
    return sorted((e.table_id, e.priority) for r in replies for e in parse(r).body)


def test_two_controllers_through_the_proxy_see_what_a_switch_shows(ovs, bridge):
    direct, proxied = bridge(dpid=1), bridge(dpid=2)

    async def main():
        da, db = RawController(), RawController()
        pa, pb = RawController(), RawController()
        paths = [str(ovs.rundir / f"ctl{i}.sock") for i in range(2)]
        await da.start_unix(paths[0])
        await db.start_unix(paths[1])
        port_a, port_b = await pa.start(), await pb.start()
        cfg = ProxyConfig(
            listen_host="127.0.0.1",
            listen_port=0,
            listen_unix=unix_path(ovs),
            controller_port=port_a,
            controller_name="a",
            controllers=[Controller("127.0.0.1", port_b, "b")],
            audit_interval=0,
            audit_delay=-1,
        )
        px = Proxy(cfg)
        await px.start()
        try:
            ovs.vsctl("set-controller", direct, *(f"unix:{p}" for p in paths))
            ovs.vsctl("set-controller", proxied, target(px))
            dx, dy = await da.conn(), await db.conn()
            px_, py = await pa.conn(), await pb.conn()
            assert (dx.dpid, dy.dpid, px_.dpid, py.dpid) == (1, 1, 2, 2)
            ref = await script(dx, dy, lambda: ovs.vsctl("del-port", direct, f"{direct}3"))
            got = await script(px_, py, lambda: ovs.vsctl("del-port", proxied, f"{proxied}3"))
            for want, have in zip(ref, got, strict=True):
                assert have == want
            # the proxy's intended entries name the connection that added them
            owners = {(e.table, e.priority, e.conn) for e in px.intended(2)}
            assert owners == {(0, 3, "b"), (1, 3, "b"), (1, 4, "b")}
            one = {"switches": 1, "roles": {"equal": 1}}
            assert px.controllers() == {"a": one, "b": one}
            return ref
        finally:
            await px.stop()
            for c in (da, db, pa, pb):
                await c.stop()

    ref = asyncio.run(main())
    # what the oracle showed, spelled out
    err = {r for r in ref if r[0] == ofp.OFPT_ERROR}
    codes = {struct.unpack_from("!HH", body)[:2] for _, body in err}
    assert (ofp.OFPET_BAD_REQUEST, ofp.OFPBRC_IS_SLAVE) in codes
    assert (ofp.OFPET_ROLE_REQUEST_FAILED, ofp.OFPRRFC_STALE) in codes
    labelled = {r[0]: r[1:] for r in ref if isinstance(r[0], str)}
    pin = (ofp.OFPT_PACKET_IN, ofp.OFPR_ACTION)
    assert labelled["packet-in, master and slave"] == ([pin], [])
    assert labelled["packet-in, both equal"] == ([pin], [pin])
    assert labelled["same xid"] == ([(0, 3)], [(1, 3), (1, 4)])
