"""NICE's invariants over PACKET_INs: direct paths, strict direct paths, forgotten buffers.

PACKET_INs are OpenFlow 1.3 messages packed here by hand from the specification (section
7.4.1), so the proxy's parser is checked too."""

from __future__ import annotations

import struct

import pytest

import ofwire as of
from cpc.model import Model
from cpc.ofctl import parse_flow
from cpc.topology import Topology
from pazzd.packetins import NO_BUFFER, PacketInWatch
from tester.packet import build_frame

H1, H2 = 0x0A000101, 0x0A000201
TCP = {"eth_type": 0x0800, "ip_proto": 6, "tp_src": 40000, "tp_dst": 80}


def packet_in(buffer_id: int, in_port: int, frame: bytes) -> bytes:
    oxm = struct.pack("!IIH", (0x8000 << 16) | (0 << 9) | 4, in_port, 0)[:8]  # OXM in_port
    match = struct.pack("!HH", 1, 4 + len(oxm)) + oxm
    match += b"\0" * (-len(match) % 8)
    body = struct.pack("!IHBBQ", buffer_id, len(frame), 0, 0, 0) + match + b"\0\0" + frame
    return struct.pack("!BBHI", 4, 10, 8 + len(body), 7) + body


class Clock:
    t = 100.0

    def __call__(self):
        return self.t


def net():
    t = Topology()
    t.add_switch(1, "s1", [1, 2])
    t.add_switch(2, "s2", [1, 2])
    t.add_link((1, 2), (2, 1))
    t.add_edge((1, 1))
    t.add_edge((2, 2))
    m = Model(t)
    m.build()
    return t, m


def send(w, dpid, buffer_id, in_port, hdr):
    bid, port, frame = of.parse_packet_in(packet_in(buffer_id, in_port, build_frame(hdr)))
    assert (bid, port) == (buffer_id, in_port)
    w.packet_in(dpid, bid, port, frame)


def test_direct_and_strict_paths():
    topo, m = net()
    clk = Clock()
    w = PacketInWatch(m, topo, grace=1.0, resolve_after=30.0, clock=clk)
    fwd = {**TCP, "ipv4_src": H1, "ipv4_dst": H2}
    send(w, 1, NO_BUFFER, 1, fwd)  # nothing installed: the controller is asked, rightly
    assert w.open == {}
    m.apply(parse_flow("priority=10,ip,nw_dst=10.0.2.0/24,actions=output:2", 1))
    m.apply(parse_flow("priority=10,ip,nw_dst=10.0.2.0/24,actions=output:2", 2))
    w.committed(1)
    w.committed(2)
    clk.t += 0.5
    send(w, 1, NO_BUFFER, 1, fwd)  # within the grace: packets in flight
    assert w.open == {}
    clk.t += 1.0
    send(w, 1, NO_BUFFER, 1, fwd)
    assert set(w.open) == {"direct_paths|s1 table=0 priority=10 cookie=0x0"}
    # The way back installed too: strict_direct_paths as well.
    m.apply(parse_flow("priority=10,ip,nw_dst=10.0.1.0/24,actions=output:1", 2))
    m.apply(parse_flow("priority=10,ip,nw_dst=10.0.1.0/24,actions=output:1", 1))
    w.committed(1)
    w.committed(2)
    clk.t += 2.0
    send(w, 1, NO_BUFFER, 1, fwd)
    occ = w.open["strict_direct_paths|s1 table=0 priority=10 cookie=0x0"]
    assert occ.detail["reply"]["ipv4_dst"] == H1 and occ.detail["reply"]["tp_dst"] == 40000
    assert w.open["direct_paths|s1 table=0 priority=10 cookie=0x0"].count == 2
    # Quiet for resolve_after: both resolve.
    clk.t += 31.0
    assert {o.name for o in w.tick()} == {"direct_paths", "strict_direct_paths"}
    assert w.open == {}


def test_forgotten_buffers():
    topo, m = net()
    clk = Clock()
    w = PacketInWatch(m, topo, forgotten_after=5.0, clock=clk)
    hdr = {**TCP, "ipv4_src": H1, "ipv4_dst": H2}
    send(w, 1, 17, 1, hdr)
    send(w, 1, 18, 1, hdr)
    w.released(1, 17)  # a PACKET_OUT or FLOW_MOD names buffer 17
    clk.t += 4.0
    w.tick()
    assert w.open == {}
    clk.t += 2.0
    w.tick()
    (occ,) = w.open.values()
    assert occ.name == "no_forgotten_packets" and occ.detail["buffer_id"] == 18


def test_packet_in_parser_refuses_truncated_messages():
    msg = packet_in(NO_BUFFER, 1, build_frame({**TCP, "ipv4_dst": H2}))
    with pytest.raises(of.ProtocolError):
        of.parse_packet_in(msg[:30])
    bad = bytearray(msg)
    bad[26:28] = struct.pack("!H", 4000)  # a match longer than the message
    with pytest.raises(of.ProtocolError):
        of.parse_packet_in(bytes(bad))
