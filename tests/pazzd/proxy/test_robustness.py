"""Malformed and truncated OpenFlow from both sides: the proxy never crashes, never
forwards a corrupted message, and disconnects a bad peer with a clear log line."""

from __future__ import annotations

import logging
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ofwire as of
from ofwire import flow_monitor
from pazzd.proxy import Proxy, ProxyConfig, Session
from tests.pazzd.proxy.ofhelpers import DPATH, flow_mod, ofp, ofpp, out, ser


class FakeTransport:
    def __init__(self) -> None:
        self.data = bytearray()
        self.closed = False

    def write(self, b: bytes) -> None:
        assert not self.closed
        self.data += b

    def close(self) -> None:
        self.closed = True

    def get_extra_info(self, name):
        return ("127.0.0.1", 1)


class _Dummy:
    def cancel(self):
        pass


def features_reply(xid: int, dpid: int = 7) -> bytes:
    return of.message(
        4, of.OFPT_FEATURES_REPLY, xid, struct.pack("!QIBB2xII", dpid, 0, 254, 0, 0, 0)
    )


def connected(proxy: Proxy) -> tuple[Session, FakeTransport, FakeTransport]:
    sw, up = FakeTransport(), FakeTransport()
    s = Session(proxy.services, sw)
    s.upstream_task = _Dummy()
    s.from_switch(of.hello([4]))
    xid = next(iter(s.own))
    s.from_switch(features_reply(xid))
    s.upstream_made(up)
    s.from_controller(of.hello([4]))
    assert s.up_ready and s.dpid == 7
    sw.data.clear()
    up.data.clear()
    return s, sw, up


def frames(data: bytes) -> list[bytes]:
    out, off = [], 0
    while off < len(data):
        ln = struct.unpack_from("!H", data, off + 2)[0]
        assert ln >= 8 and off + ln <= len(data), "forwarded bytes are not well framed"
        out.append(bytes(data[off : off + ln]))
        off += ln
    return out


def flow_stats_reply(xid: int) -> bytes:
    fm = flow_mod(1, match=ofpp.OFPMatch(eth_type=0x800, ipv4_dst="10.0.0.1"), actions=[out(2)])
    p = of.parse_flow_mod(fm)
    instr = of.add_rule_id(p.instr, 9)
    match = fm[48 : p.match_end]
    entry = (
        struct.pack("!HBxIIHHHH4xQQQ", 48 + len(match) + len(instr), 0, 1, 2, 100, 0, 0, 0, 0, 0, 0)
        + match
        + instr
    )
    return of.message(4, of.OFPT_MULTIPART_REPLY, xid, struct.pack("!HH4x", 1, 0) + entry)


def flow_monitor_reply(xid: int) -> bytes:
    """An ONF flow-monitor reply as OVS sends it on 1.3: a full update (ofp_match, then
    instructions with the ID) and an abbreviated one."""
    fm = flow_mod(1, match=ofpp.OFPMatch(eth_type=0x800, ipv4_dst="10.0.0.1"), actions=[out(2)])
    p = of.parse_flow_mod(fm)
    match = fm[48 : p.match_end]
    instr = of.add_rule_id(p.instr, 9)
    full = (
        struct.pack(
            "!HHHHHHHBxQ",
            24 + len(match) + len(instr),
            0,
            0,
            100,
            0,
            0,
            struct.unpack_from("!H", match, 2)[0],
            0,
            7,
        )
        + match
        + instr
    )
    abbrev = struct.pack("!HHI", 8, 3, 5)
    head = struct.pack(
        "!HH4xII", 0xFFFF, 0, flow_monitor.ONF_VENDOR_ID, flow_monitor.ONFST_FLOW_MONITOR
    )
    return of.message(4, of.OFPT_MULTIPART_REPLY, xid, head + full + abbrev)


CONTROLLER_TEMPLATES = [
    flow_mod(
        5,
        match=ofpp.OFPMatch(eth_type=0x800, ipv4_dst=("10.0.0.0", "255.0.0.0")),
        actions=[out(1), ofpp.OFPActionSetField(eth_dst="00:00:00:00:00:01")],
    ),
    flow_mod(6, command=ofp.OFPFC_DELETE, match=ofpp.OFPMatch(in_port=1)),
    flow_mod(7, instructions=[ofpp.OFPInstructionGotoTable(3)], table=1),
    ser(
        ofpp.OFPGroupMod(
            DPATH,
            ofp.OFPGC_ADD,
            ofp.OFPGT_SELECT,
            1,
            [ofpp.OFPBucket(1, ofp.OFPP_ANY, ofp.OFPG_ANY, [out(2)])],
        ),
        8,
    ),
    of.packet_out(9, 1, b"\x00" * 60),
    of.message(4, of.OFPT_BARRIER_REQUEST, 10),
    of.message(4, of.OFPT_ECHO_REQUEST, 11, b"abc"),
    of.flow_stats_request(12),
]
SWITCH_TEMPLATES = [
    flow_stats_reply(1001),
    flow_monitor_reply(0),
    of.message(4, of.OFPT_ERROR, 5, struct.pack("!HH", 5, 1) + CONTROLLER_TEMPLATES[0][:64]),
    of.message(
        4,
        of.OFPT_PACKET_IN,
        0,
        struct.pack("!IHBBQ", 0xFFFFFFFF, 60, 0, 0, 0)
        + struct.pack("!HH4x", 1, 4)
        + b"\0\0"
        + b"\x11" * 60,
    ),
    of.message(
        4, of.OFPT_PORT_STATUS, 0, struct.pack("!B7x", 2) + struct.pack("!I", 3) + b"\0" * 60
    ),
    of.message(4, of.OFPT_ECHO_REQUEST, 3),
    of.message(4, of.OFPT_BARRIER_REPLY, 10),
]

mutation = st.tuples(
    st.integers(0, 10_000),  # template
    st.lists(st.tuples(st.integers(0, 300), st.integers(0, 255)), max_size=3),  # byte flips
    st.one_of(st.none(), st.integers(0, 300)),  # truncate at
    st.booleans(),  # fix the length field up after mutating
)


def mutate(templates, m) -> bytes:
    idx, flips, cut, fix = m
    b = bytearray(templates[idx % len(templates)])
    for pos, val in flips:
        if pos < len(b):
            b[pos] = val
    if cut is not None:
        b = b[:cut]
    if fix and len(b) >= 4:
        struct.pack_into("!H", b, 2, len(b))
    return bytes(b)


def check_forwarded(data: bytes, sent_msgs: list[bytes], to_switch: bool) -> None:
    """Every forwarded frame is a frame of the sender's byte stream (a truncated message
    without a fixed length shifts the framing, for the proxy as for the peer), or one the
    proxy is allowed to make: its own barrier, a FlowMod with the ID added, a reply with it
    stripped, a local echo reply, an error with the controller's bytes restored."""
    sent = b"".join(sent_msgs)
    for f in frames(data):
        ver, t, ln, xid = of.header(f)
        assert ver == 4 and ln == len(f)
        if f in sent:
            continue
        if to_switch and t == of.OFPT_BARRIER_REQUEST and xid >= 0xFFF00000:
            continue  # the proxy's own barrier
        if to_switch and t == ofp.OFPT_SET_ASYNC and xid >= 0xFFF00000:
            continue  # the proxy's own asynchronous configuration (several controllers)
        if not to_switch and t in (ofp.OFPT_ROLE_REPLY, ofp.OFPT_GET_ASYNC_REPLY):
            assert ln == (24 if t == ofp.OFPT_ROLE_REPLY else 32)  # the proxy's own answer
            continue
        if to_switch and t == of.OFPT_FLOW_MOD:
            p = of.parse_flow_mod(f)
            stripped, rid = of.strip_rule_id(p.instr)
            assert rid is not None
            # The controller's FlowMod with the ID added. Stripping gives it back, except
            # when the controller itself sent an empty APPLY_ACTIONS (the ID went into it,
            # and stripping drops the emptied instruction): then adding the ID to one of
            # the sent FlowMods must give exactly f.
            assert of.flow_mod_with_instructions(f, p, stripped) in sent or any(
                _with_id(m, rid) == f for m in sent_msgs
            )
            continue
        if not to_switch and t == of.OFPT_ECHO_REPLY:
            continue
        if not to_switch and t == of.OFPT_MULTIPART_REPLY:
            kind = flow_monitor.monitor_kind(f)
            if kind is not None:  # well formed, IDs stripped
                assert flow_monitor.strip_updates(f[24:], kind)[1] == 0
            else:
                of.parse_flow_stats_body(f[16:], strip=False)  # well formed, IDs stripped
            continue
        if not to_switch and t == of.OFPT_ERROR:
            continue
        raise AssertionError(f"forwarded a message that was never sent: {f.hex()}")


def _with_id(msg: bytes, rid: int) -> bytes | None:
    """A sent FlowMod with set_verify_rule:rid added as the proxy adds it (None: unparsable)."""
    try:
        m = of.parse_flow_mod(msg)
        return of.flow_mod_with_instructions(msg, m, of.add_rule_id(m.instr, rid))
    except Exception:
        return None


COUNT = {"messages": 0}


@pytest.mark.slow
@settings(max_examples=1500, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(st.lists(st.tuples(st.booleans(), mutation), min_size=20, max_size=40))
def test_malformed_messages_from_both_sides(msgs):
    """Each generated mutation is applied to two templates of each side (4 messages), so
    1500 examples feed about 180k messages; a disconnected session is replaced."""
    proxy = Proxy(ProxyConfig(audit_delay=-1, audit_interval=0))
    s, sw, up = connected(proxy)
    sent_down, sent_up = [], []
    for first_switch, (idx, *rest) in msgs:
        for k in range(4):
            from_switch = first_switch ^ (k & 1)
            m = (idx + k // 2, *rest)
            if s.closed or not s.up_ready:
                check_forwarded(bytes(sw.data), sent_down, to_switch=True)
                check_forwarded(bytes(up.data), sent_up, to_switch=False)
                # The switch reconnects once its old connection is gone: a second one for
                # a live dpid is refused while the first answers (takeover protection).
                s.switch_lost(None)
                s, sw, up = connected(proxy)
                sent_down, sent_up = [], []
            COUNT["messages"] += 1
            if from_switch:
                b = mutate(SWITCH_TEMPLATES, m)
                sent_up.append(b)
                s.from_switch(b)
            else:
                b = mutate(CONTROLLER_TEMPLATES, m)
                sent_down.append(b)
                s.from_controller(b)
    check_forwarded(bytes(sw.data), sent_down, to_switch=True)
    check_forwarded(bytes(up.data), sent_up, to_switch=False)
    proxy.store.close()


@pytest.mark.slow
def test_the_fuzzing_fed_enough_messages():
    if COUNT["messages"]:
        assert COUNT["messages"] >= 100_000, COUNT


def test_bad_peer_is_disconnected_with_a_log_line(caplog):
    proxy = Proxy(ProxyConfig(audit_delay=-1, audit_interval=0))
    s, sw, up = connected(proxy)
    with caplog.at_level(logging.WARNING, "pazzd.proxy"):
        s.from_controller(of.message(4, of.OFPT_FLOW_MOD, 1, b"\0" * 10))
    assert up.closed and not sw.closed and not s.up_ready
    assert "disconnecting controller of switch 127.0.0.1:1 (dpid 0x7)" in caplog.text
    assert "FLOW_MOD" in caplog.text or "truncated" in caplog.text
    assert sw.data == b""  # nothing forwarded
    with caplog.at_level(logging.WARNING, "pazzd.proxy"):
        s.from_switch(of.message(1, of.OFPT_PACKET_IN, 0, b"\0" * 30))
    assert sw.closed and s.closed
    assert (
        "disconnecting switch 127.0.0.1:1 (dpid 0x7): protocol error: version 0x01" in caplog.text
    )
