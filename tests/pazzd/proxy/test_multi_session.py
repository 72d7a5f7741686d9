"""Two controllers on one session, driven byte by byte against a scripted switch: whatever
xids the controllers pick (colliding on purpose), each gets exactly the replies to its own
requests, with its own xids, in order; errors echo its own bytes; PACKET_INs go by role;
and pazzd.proxy.roles' pieces hold against plain arithmetic."""

from __future__ import annotations

import struct

from hypothesis import given, settings
from hypothesis import strategies as st

import ofwire as of
from pazzd.proxy import Proxy, ProxyConfig, Session, roles
from pazzd.proxy.proxy import Controller
from tests.pazzd.proxy.ofhelpers import DPATH, flow_mod, ofp, ofpp, out, ser
from tests.pazzd.proxy.test_robustness import FakeTransport, _Dummy, features_reply, frames

REJECT = 13  # the scripted switch refuses FlowMods of this priority


def two(proxy: Proxy):
    sw, ups = FakeTransport(), [FakeTransport(), FakeTransport()]
    s = Session(proxy.services, sw)
    s.upstream_task = _Dummy()
    s.from_switch(of.hello([4]))
    s.from_switch(features_reply(next(iter(s.own))))
    for u, t in zip(s.ups, ups, strict=True):
        s.upstream_made(t, u)
        s.from_controller(of.hello([4]), u)
    sw.data.clear()
    for t in ups:
        t.data.clear()
    return s, sw, ups


def new_proxy() -> Proxy:
    cfg = ProxyConfig(
        audit_delay=-1,
        audit_interval=0,
        controller_name="a",
        controllers=[Controller("127.0.0.1", 1, "b")],
    )
    return Proxy(cfg)


def switch_answers(s: Session, sw: FakeTransport, parts: dict[int, int]) -> None:
    """The scripted switch: answers what the proxy sent it, in order. parts: wire xid ->
    number of parts of a flow-stats reply."""
    msgs = frames(bytes(sw.data))
    sw.data.clear()
    for m in msgs:
        _, t, _, xid = of.header(m)
        if t == of.OFPT_ECHO_REQUEST:
            s.from_switch(of.message(4, of.OFPT_ECHO_REPLY, xid, m[8:]))
        elif t == of.OFPT_BARRIER_REQUEST:
            s.from_switch(of.message(4, of.OFPT_BARRIER_REPLY, xid))
        elif t == of.OFPT_MULTIPART_REQUEST:
            n = parts.get(xid, 1)
            for i in range(n):
                flags = of.OFPMPF_REPLY_MORE if i < n - 1 else 0
                body = struct.pack("!HH4x", of.OFPMP_FLOW, flags)
                s.from_switch(of.message(4, of.OFPT_MULTIPART_REPLY, xid, body))
        elif t == of.OFPT_FLOW_MOD and struct.unpack_from("!H", m, 30)[0] == REJECT:
            s.from_switch(of.error_msg(4, xid, ofp.OFPET_FLOW_MOD_FAILED, 0, m))


OPS = st.lists(
    st.tuples(
        st.integers(0, 1),  # which controller
        st.sampled_from(["echo", "barrier", "stats", "flow", "rejected", "packet_in"]),
        st.integers(1, 3),  # its xid: the two controllers collide all the time
        st.integers(1, 3),  # parts of a stats reply
    ),
    max_size=40,
)


@settings(max_examples=150, deadline=None)
@given(OPS, st.integers(1, 8))
def test_each_controller_gets_its_own_replies(ops, batch):
    proxy = new_proxy()
    s, sw, ups = two(proxy)
    want: list[list] = [[], []]
    sent_fm: dict[tuple[int, int], bytes] = {}
    parts: dict[int, int] = {}
    for i, (c, kind, xid, n) in enumerate(ops):
        u = s.ups[c]
        if kind == "packet_in":  # from the switch, after it answered what came before
            switch_answers(s, sw, parts)
            body = struct.pack("!IHBBQ", 0xFFFFFFFF, 60, 0, 0, 0) + struct.pack("!HH4x", 1, 4)
            s.from_switch(of.message(4, of.OFPT_PACKET_IN, 0, body + b"\0\0" + bytes(60)))
            for w in want:
                w.append((of.OFPT_PACKET_IN, 0))
            continue
        if kind == "echo":
            msg = of.message(4, of.OFPT_ECHO_REQUEST, xid, b"x")
            want[c].append((of.OFPT_ECHO_REPLY, xid))
        elif kind == "barrier":
            msg = of.message(4, of.OFPT_BARRIER_REQUEST, xid)
            want[c].append((of.OFPT_BARRIER_REPLY, xid))
        elif kind == "stats":
            msg = of.flow_stats_request(xid)
            want[c] += [(of.OFPT_MULTIPART_REPLY, xid)] * n
        else:
            prio = REJECT if kind == "rejected" else 100 + i
            msg = flow_mod(xid, priority=prio, actions=[out(1)])
            if kind == "rejected":
                want[c].append((of.OFPT_ERROR, xid))
                sent_fm[(c, len(want[c]) - 1)] = msg
        s.from_controller(msg, u)
        if kind == "stats":  # the wire xid the proxy gave it: the newest translation
            parts[next(reversed(s.xmap.map))] = n
        if i % batch == 0:
            switch_answers(s, sw, parts)
    switch_answers(s, sw, parts)
    switch_answers(s, sw, parts)  # the proxy's own barrier for the last FlowMods
    for c, t in enumerate(ups):
        got = frames(bytes(t.data))
        assert [(m[1], of.header(m)[3]) for m in got] == want[c]
        for (cc, k), fm in sent_fm.items():
            if cc == c:  # the error echoes the controller's own bytes, its own xid in them
                assert got[k][12:] == fm[:64]
    assert not s.xmap.map  # every translation ended: with its reply or a later barrier


def test_roles_and_async_on_one_session():
    proxy = new_proxy()
    s, sw, (ta, tb) = two(proxy)
    a, b = s.ups
    s.from_controller(ser(ofpp.OFPRoleRequest(DPATH, ofp.OFPCR_ROLE_MASTER, 1), 5), a)
    s.from_controller(ser(ofpp.OFPRoleRequest(DPATH, ofp.OFPCR_ROLE_MASTER, 2), 5), b)
    assert (a.role, b.role) == (roles.SLAVE, roles.MASTER)  # at most one master
    fm = flow_mod(9, priority=5, actions=[out(1)])
    s.from_controller(fm, a)
    err = frames(bytes(ta.data))[-1]
    assert err[1] == of.OFPT_ERROR and of.header(err)[3] == 9
    assert struct.unpack_from("!HH", err, 8) == (ofp.OFPET_BAD_REQUEST, ofp.OFPBRC_IS_SLAVE)
    assert err[12:] == fm and not sw.data  # never forwarded
    # a slave asking for flow-removed (delete) makes the proxy ask the switch for it
    s.from_controller(
        ser(ofpp.OFPSetAsync(DPATH, [0b11, 0b100], [0b111, 0b111], [0b1111, 0b100]), 6), a
    )
    (sa,) = frames(bytes(sw.data))
    assert sa[1] == ofp.OFPT_SET_ASYNC and of.header(sa)[3] >= 0xFFF00000
    assert roles.parse_async(sa) == (0b111, 0, 0b111, 0b111, 0b1111, 0)


@given(st.integers(0, (1 << 64) - 1), st.integers(0, (1 << 64) - 1))
def test_generation_ids_compare_as_signed_distance(last, new):
    g = roles.Generation(last)
    # stale: new is behind last by less than half the 64-bit circle
    behind = (last - new) % (1 << 64)
    stale = 0 < behind <= 1 << 63
    assert g.accept(new) is not stale
    assert g.value == (last if stale else new)


@given(st.lists(st.tuples(st.integers(0, 1), st.integers(0, 2**32 - 1)), max_size=200))
def test_xid_map_gives_distinct_wire_xids_and_back(reqs):
    m = roles.XidMap(cap=1 << 16)
    wires = [m.out(c, x) for c, x in reqs]
    assert len(set(wires)) == len(wires)
    assert all(1 <= w < 0xFFF00000 for w in wires)
    for w, (c, x) in zip(wires, reqs, strict=True):
        assert m.back(w, final=True) == (c, x)
    assert not m.map


def test_openflow_10_replies_reach_the_controller_that_asked():
    proxy = new_proxy()
    sw, ups = FakeTransport(), [FakeTransport(), FakeTransport()]
    s = Session(proxy.services, sw)
    s.upstream_task = _Dummy()
    s.from_switch(of.hello([1]))
    feat = struct.pack("!QIB3xII", 7, 0, 254, 0, 0)
    s.from_switch(of.message(1, of.OFPT_FEATURES_REPLY, next(iter(s.own)), feat))
    for u, t in zip(s.ups, ups, strict=True):
        s.upstream_made(t, u)
        s.from_controller(of.hello([1]), u)
        t.data.clear()
    sw.data.clear()
    barrier = 18  # OpenFlow 1.0's OFPT_BARRIER_REQUEST; its reply is 19
    s.from_controller(of.message(1, barrier, 4), s.ups[1])
    (m,) = frames(bytes(sw.data))
    s.from_switch(of.message(1, barrier + 1, of.header(m)[3]))
    assert not ups[0].data and not s.closed
    assert [(r[1], of.header(r)[3]) for r in frames(bytes(ups[1].data))] == [(barrier + 1, 4)]
