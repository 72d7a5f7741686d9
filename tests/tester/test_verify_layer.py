"""The Verify shim as a scapy layer (cpc.verify_layer) against the byte layout of the
contract (cpc.tags.pack_header), the tester's hot-path parser and the fuzzer's crafter."""

from __future__ import annotations

import ipaddress
import random

from hypothesis import given, settings
from hypothesis import strategies as st
from scapy.layers.inet import IP, TCP, UDP
from scapy.layers.l2 import ARP, Dot1Q, Ether
from scapy.packet import Raw

from cpc.tags import VERIFY_ETHERTYPE_MARKED, VERIFY_PORT_INIT, VERIFY_RULE_INIT, pack_header
from cpc.verify_layer import Verify, is_marked
from fuzzer.craft import Crafter
from tester.packet import build_frame, is_report, parse_frame
from tests.fuzzer.test_craft import _headers


def _mac(v: int) -> str:
    return ":".join(f"{v >> s & 0xFF:02x}" for s in range(40, -8, -8))


@settings(max_examples=300, deadline=None)
@given(
    vport=st.integers(0, 2**32 - 1),
    vrule=st.integers(0, 2**16 - 1),
    vlan=st.one_of(st.none(), st.integers(0, 4095)),
    proto=st.sampled_from([6, 17, 1, 0x806]),
    src=st.integers(0, 2**32 - 1),
    dst=st.integers(0, 2**32 - 1),
    sport=st.integers(0, 65535),
    dport=st.integers(0, 65535),
    macs=st.tuples(st.integers(0, 2**48 - 1), st.integers(0, 2**48 - 1)),
)
def test_frames_built_with_the_layer_parse_as_built(
    vport, vrule, vlan, proto, src, dst, sport, dport, macs
):
    pkt = Ether(dst=_mac(macs[0]), src=_mac(macs[1])) / Verify(port=vport, rule=vrule)
    if vlan is not None:
        pkt = pkt / Dot1Q(vlan=vlan)
    if proto == 0x806:
        pkt = pkt / ARP()
    else:
        ip = IP(
            src=str(ipaddress.IPv4Address(src)), dst=str(ipaddress.IPv4Address(dst)), proto=proto
        )
        l4 = {6: TCP(sport=sport, dport=dport), 17: UDP(sport=sport, dport=dport)}.get(proto)
        pkt = pkt / ip / l4 if l4 is not None else pkt / ip / Raw(b"x" * 8)
    data = bytes(pkt)
    assert data[12:20] == pack_header(vport, vrule)  # the contract's layout, after the MACs
    p = parse_frame(data)
    assert p.complete and p.has_verify and (p.verify_port, p.verify_rule) == (vport, vrule)
    h = p.header
    assert (h["eth_dst"], h["eth_src"]) == macs
    assert h["vlan_vid"] == (0 if vlan is None else 0x1000 | vlan)
    if proto == 0x806:
        assert h["eth_type"] == 0x806
    else:
        assert (h["eth_type"], h["ipv4_src"], h["ipv4_dst"], h["ip_proto"]) == (
            0x800,
            src,
            dst,
            proto,
        )
        if proto in (6, 17):
            assert (h["tp_src"], h["tp_dst"]) == (sport, dport)
    # And back: scapy dissects what it built, and the layer's fields read the same.
    again = Ether(data)
    assert (again[Verify].port, again[Verify].rule) == (vport, vrule)


def test_pretagged_probes_carry_a_fresh_header_scapy_reads():
    c = Crafter(pretag=True)
    rng = random.Random(5)
    for h in _headers(200, seed=4):
        seq = rng.getrandbits(32)
        f = c.frame(h, seq)
        assert f[12:20] == pack_header(VERIFY_PORT_INIT, VERIFY_RULE_INIT)
        v = Ether(f)[Verify]
        assert (v.port, v.rule) == (VERIFY_PORT_INIT, VERIFY_RULE_INIT)
        p = parse_frame(f)
        assert p.has_verify
        for k in ("eth_type", "vlan_vid", "eth_dst", "eth_src"):
            assert p.header[k] == h.get(k, 0), (k, h)


@settings(max_examples=200, deadline=None)
@given(
    vport=st.integers(0, 2**32 - 1),
    vrule=st.integers(0, 2**16 - 1),
    vlan=st.one_of(st.none(), st.integers(0, 4095)),
    dst=st.integers(0, 2**32 - 1),
    dport=st.integers(0, 65535),
)
def test_the_marked_header_parses_like_the_unmarked_one(vport, vrule, vlan, dst, dport):
    """The probe mark (0x0821): scapy and the hot-path parser both read a Verify header with
    the same tags and fields as the unmarked one, and set `marked`; pack_header and
    build_frame write the same bytes."""
    frames = {}
    for mark in (False, True):
        eth = Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02")
        if mark:
            eth.type = VERIFY_ETHERTYPE_MARKED
        pkt = eth / Verify(port=vport, rule=vrule)
        if vlan is not None:
            pkt = pkt / Dot1Q(vlan=vlan)
        pkt = pkt / IP(src="10.0.0.1", dst=str(ipaddress.IPv4Address(dst))) / UDP(dport=dport)
        data = bytes(pkt)
        assert data[12:20] == pack_header(vport, vrule, marked=mark)
        again = Ether(data)
        assert is_marked(again) == mark and (again[Verify].port, again[Verify].rule) == (
            vport,
            vrule,
        )
        p = parse_frame(data)
        assert p.complete and p.has_verify and p.marked == mark
        assert (p.verify_port, p.verify_rule) == (vport, vrule)
        assert is_report(_Sample(data))  # a non-OVS agent's report: the shim at bytes 12-13
        assert data[:-8] == build_frame(p.header, (vport, vrule), 0, marked=mark)[: len(data) - 8]
        frames[mark] = (p.header, data)
    assert frames[True][0] == frames[False][0]  # the same header either way
    a, b = frames[False][1], frames[True][1]
    assert a[:13] == b[:13] and a[14:] == b[14:] and (a[13], b[13]) == (0x20, 0x21)


class _Sample:
    source_type = 0
    source_index = 1

    def __init__(self, header):
        self.header = header
