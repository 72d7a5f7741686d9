"""Several controllers on one switch connection: OpenFlow 1.3 roles, the asynchronous
configuration of each controller, and the xid translation that keeps their requests apart.

The switch sees one connection, the proxy's, which stays in role EQUAL: the proxy answers
ROLE_REQUEST, GET_ASYNC_REQUEST and SET_ASYNC itself, refuses what a slave may not send
with OFPET_BAD_REQUEST / OFPBRC_IS_SLAVE, and hands each asynchronous message of the
switch to the controllers whose role and configuration ask for it (OpenFlow 1.3, "Multiple
Controllers" and OFPT_SET_ASYNC). The behaviour follows Open vSwitch's (checked against it
in tests/pazzd/proxy/test_multi_controller.py).
"""

from __future__ import annotations

import collections
import struct
from dataclasses import dataclass

from os_ken.ofproto import ofproto_v1_3 as of13

import ofwire as of

EQUAL, MASTER, SLAVE = of13.OFPCR_ROLE_EQUAL, of13.OFPCR_ROLE_MASTER, of13.OFPCR_ROLE_SLAVE
ROLE_NAMES = {EQUAL: "equal", MASTER: "master", SLAVE: "slave"}
ASYNC_TYPES = (of13.OFPT_PACKET_IN, of13.OFPT_PORT_STATUS, of13.OFPT_FLOW_REMOVED)
# What a slave may not send: the switch answers OFPBRC_IS_SLAVE.
SLAVE_REFUSED = frozenset(
    (
        of13.OFPT_PACKET_OUT,
        of13.OFPT_FLOW_MOD,
        of13.OFPT_GROUP_MOD,
        of13.OFPT_PORT_MOD,
        of13.OFPT_TABLE_MOD,
        of13.OFPT_METER_MOD,
    )
)
OFPBRC_IS_SLAVE = of13.OFPBRC_IS_SLAVE
# Controller messages the proxy answers itself.
ANSWERED = frozenset((of13.OFPT_ROLE_REQUEST, of13.OFPT_GET_ASYNC_REQUEST, of13.OFPT_SET_ASYNC))
_ASYNC = struct.Struct("!6I")
# Per message kind (packet-in, port-status, flow-removed): the reasons a master/equal and a
# slave controller receive by default: every packet-in reason but invalid TTL, every port
# status, flow-removed to master/equal only.
DEFAULT_ASYNC = (0b011, 0, 0b111, 0b111, 0b1111, 0)
# Offset of the reason byte in each asynchronous message.
_REASON_AT = {of13.OFPT_PACKET_IN: 14, of13.OFPT_PORT_STATUS: 8, of13.OFPT_FLOW_REMOVED: 18}
_KIND = {of13.OFPT_PACKET_IN: 0, of13.OFPT_PORT_STATUS: 2, of13.OFPT_FLOW_REMOVED: 4}


@dataclass
class Generation:
    """The master election generation_id of one switch (what the controllers see)."""

    value: int | None = None

    def accept(self, gen: int) -> bool:
        """False for a stale generation_id (older than the last one, by signed 64-bit
        distance, so that it wraps); else remember it."""
        if self.value is not None and _s64((gen - self.value) & (1 << 64) - 1) < 0:
            return False
        self.value = gen
        return True


def _s64(v: int) -> int:
    return v - (1 << 64) if v >= 1 << 63 else v


def role_request(msg: bytes, role: int, gen: Generation) -> tuple[int, bytes]:
    """(the controller's role now, the answer: ROLE_REPLY or OFPT_ERROR) for its
    ROLE_REQUEST `msg`, given its role so far. Before any generation_id, the reply says
    2^64 - 1, as Open vSwitch does."""
    xid = of.header(msg)[3]
    want, gid = struct.unpack_from("!I4xQ", msg, 8)
    if want > SLAVE:
        bad = of13.OFPRRFC_BAD_ROLE
        return role, of.error_msg(of.OFP13, xid, of13.OFPET_ROLE_REQUEST_FAILED, bad, msg)
    if want in (MASTER, SLAVE) and not gen.accept(gid):
        err = of.error_msg(of.OFP13, xid, of13.OFPET_ROLE_REQUEST_FAILED, of13.OFPRRFC_STALE, msg)
        return role, err
    if want != of13.OFPCR_ROLE_NOCHANGE:
        role = want
    body = struct.pack("!I4xQ", role, gen.value if gen.value is not None else (1 << 64) - 1)
    return role, of.message(of.OFP13, of13.OFPT_ROLE_REPLY, xid, body)


def is_slave_error(msg: bytes) -> bytes:
    """The OFPBRC_IS_SLAVE error a switch answers a slave's `msg` with (the request whole,
    as Open vSwitch echoes it)."""
    body = struct.pack("!HH", of13.OFPET_BAD_REQUEST, OFPBRC_IS_SLAVE) + msg[: 0xFFFF - 12]
    return of.message(of.OFP13, of13.OFPT_ERROR, of.header(msg)[3], body)


def parse_async(msg: bytes) -> tuple[int, ...]:
    return _ASYNC.unpack_from(msg, 8)


def async_reply(xid: int, cfg: tuple[int, ...]) -> bytes:
    return of.message(of.OFP13, of13.OFPT_GET_ASYNC_REPLY, xid, _ASYNC.pack(*cfg))


def set_async(xid: int, cfg: tuple[int, ...]) -> bytes:
    return of.message(of.OFP13, of13.OFPT_SET_ASYNC, xid, _ASYNC.pack(*cfg))


def wants(role: int, cfg: tuple[int, ...], t: int, msg: bytes) -> bool:
    """Does a controller of this role and asynchronous configuration get this message?"""
    reason = msg[_REASON_AT[t]]
    mask = cfg[_KIND[t] + (role == SLAVE)]
    return reason < 32 and bool(mask >> reason & 1)


def switch_async(cfgs) -> tuple[int, ...]:
    """What the proxy's own (EQUAL) connection asks of the switch: whatever some controller
    asks for in any role, and every port status and flow removal (the model needs them)."""
    pin = st = fr = 0
    for c in cfgs:
        pin |= c[0] | c[1]
        st |= c[2] | c[3]
        fr |= c[4] | c[5]
    return (pin, DEFAULT_ASYNC[1], st | 0b111, DEFAULT_ASYNC[3], fr | 0b1111, DEFAULT_ASYNC[5])


class XidMap:
    """Controller xids <-> the xids the switch sees, so that two controllers' requests never
    collide. Wire xids are 1 .. 0xFFEFFFFF (the proxy's own are above). A translation ends
    with its request's last reply, or when a barrier sent after it is answered (the switch
    has answered everything before); at most `cap` are kept."""

    LAST = 0xFFEFFFFF

    def __init__(self, cap: int = 1 << 16) -> None:
        self.cap = cap
        # wire xid -> (connection, its xid, sequence number), in the order sent
        self.map: collections.OrderedDict[int, tuple[object, int, int]] = collections.OrderedDict()
        self.seq = 0

    def out(self, conn, xid: int) -> int:
        self.seq += 1
        w = (self.seq - 1) % self.LAST + 1
        self.map.pop(w, None)
        self.map[w] = (conn, xid, self.seq)
        if len(self.map) > self.cap:
            self.map.popitem(last=False)
        return w

    def back(self, wxid: int, final: bool, barrier: bool = False):
        """(conn, xid) of a reply's wire xid, or None; final: its request's last reply."""
        hit = self.map.get(wxid)
        if hit is None:
            return None
        if barrier:
            self.done_upto(hit[2])
        elif final:
            del self.map[wxid]
        return hit[0], hit[1]

    def done_upto(self, seq: int) -> None:
        """A barrier sent after request number seq is answered: forget it and all before."""
        m = self.map
        while m:
            w = next(iter(m))
            if m[w][2] > seq:
                break
            del m[w]


def with_xid(msg: bytes, xid: int) -> bytes:
    return msg[:4] + xid.to_bytes(4, "big") + msg[8:]
