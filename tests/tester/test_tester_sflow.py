"""The sFlow v5 decoder: round trips, tshark as an independent decoder, malformed input."""

from __future__ import annotations

import contextlib
import json
import random
import shutil
import subprocess

import pytest

from tester.packet import build_frame, is_report, parse_frame
from tester.sflow import (
    IF_FORMAT_MULTIPLE,
    CounterSample,
    FlowSample,
    IfCounters,
    SflowError,
    decode,
    encode_datagram,
)


def _frame(i: int, verify: bool) -> bytes:
    hdr = {
        "eth_dst": 0x0200000000AA,
        "eth_src": 0x0200000000BB + i,
        "eth_type": 0x0800,
        "ipv4_src": 0x0A000001 + i,
        "ipv4_dst": 0x0A000102,
        "ip_proto": 6 if i % 2 else 17,
        "tp_src": 1000 + i,
        "tp_dst": 80,
        "vlan_vid": 0x1000 | 7 if i % 3 == 0 else 0,
    }
    return build_frame(hdr, (0x12345678 ^ i, 0xBEEF ^ i) if verify else None)


def sample_datagrams(agent: str = "192.0.2.1") -> list[bytes]:
    out = []
    for d in range(4):
        samples = []
        for i in range(3):
            samples.append(
                FlowSample(
                    seq=100 * d + i,
                    source_type=0,
                    source_index=5 + i,
                    sampling_rate=64 << i,
                    sample_pool=1000 * d + 7 * i,
                    drops=i,
                    input_format=0,
                    input=5 + i,
                    output_format=0 if i < 2 else IF_FORMAT_MULTIPLE,
                    output=9 + d,
                    header_protocol=1,
                    frame_length=60 + i,
                    stripped=4,
                    header=_frame(i + d, verify=bool(i & 1)),
                    expanded=(d % 2 == 1),
                )
            )
        samples.append(
            CounterSample(
                seq=d,
                source_type=0,
                source_index=5,
                generic=IfCounters(
                    5,
                    6,
                    10**9,
                    1,
                    3,
                    123456789012,
                    1,
                    2,
                    3,
                    4,
                    5 + d,
                    6,
                    98765,
                    7,
                    8,
                    9,
                    10,
                    11 + d,
                    0,
                ),
                expanded=(d == 3),
            )
        )
        out.append(encode_datagram(agent, 3, 1000 + d, 5000 + d, samples))
    return out


def test_round_trip() -> None:
    for raw in sample_datagrams() + sample_datagrams("2001:db8::1"):
        dg = decode(raw)
        assert dg.sub_agent == 3
        assert (
            encode_datagram(dg.agent, dg.sub_agent, dg.seq, dg.uptime, dg.flows + dg.counters)
            == raw
        )


def test_fields() -> None:
    dg = decode(sample_datagrams()[1])
    assert dg.agent == "192.0.2.1" and dg.seq == 1001 and dg.uptime == 5001
    f = dg.flows[2]
    assert (f.seq, f.sampling_rate, f.input, f.output_format, f.output) == (102, 256, 7, 2, 10)
    assert f.expanded and dg.flows[0].header[12:14] != b"\x08 "
    assert is_report(dg.flows[1]) and not is_report(dg.flows[0])
    c = dg.counters[0].generic
    assert c.oper_up and c.admin_up and c.in_errors == 6 and c.out_errors == 12


def test_parse_frame() -> None:
    hdr = {
        "eth_dst": 1,
        "eth_src": 2,
        "eth_type": 0x0800,
        "vlan_vid": 0x1005,
        "ipv4_src": 0x0A000001,
        "ipv4_dst": 0x0A000002,
        "ip_proto": 6,
        "tp_src": 1234,
        "tp_dst": 80,
    }
    p = parse_frame(build_frame(hdr, (0xDEADBEEF, 0x1234)))
    assert p.header == hdr and p.complete and p.has_verify
    assert (p.verify_port, p.verify_rule) == (0xDEADBEEF, 0x1234)
    p = parse_frame(build_frame(dict(hdr, vlan_vid=0)))
    assert p.header == dict(hdr, vlan_vid=0) and not p.has_verify
    raw = build_frame(hdr, (1, 2))
    for cut in range(len(raw)):
        parse_frame(raw[:cut])  # never raises


def test_parse_frame_against_scapy() -> None:
    from scapy.layers.inet import IP, TCP
    from scapy.layers.l2 import Dot1Q, Ether

    hdr = {
        "eth_dst": 0x0A0B0C0D0E0F,
        "eth_src": 0x020304050607,
        "eth_type": 0x0800,
        "vlan_vid": 0x1009,
        "ipv4_src": 0xC0A80001,
        "ipv4_dst": 0xC0A80102,
        "ip_proto": 6,
        "tp_src": 4321,
        "tp_dst": 443,
    }
    raw = build_frame(hdr)
    pkt = Ether(raw)
    assert pkt[Dot1Q].vlan == 9 and pkt[IP].dst == "192.168.1.2" and pkt[TCP].dport == 443
    assert pkt[IP].chksum == IP(bytes(pkt[IP]))[IP].chksum
    ref = bytes(
        Ether(dst="0a:0b:0c:0d:0e:0f", src="02:03:04:05:06:07")
        / Dot1Q(vlan=9)
        / IP(src="192.168.0.1", dst="192.168.1.2")
        / TCP(sport=4321, dport=443)
    )
    assert parse_frame(ref).header == hdr


@pytest.mark.parametrize("bad", [b"", b"\0" * 27, b"\0\0\0\x04" + b"\0" * 40])
def test_rejects(bad: bytes) -> None:
    with pytest.raises(SflowError):
        decode(bad)


def test_truncations_and_flips_fast() -> None:
    rng = random.Random(1)
    raws = sample_datagrams() + sample_datagrams("2001:db8::2")
    for raw in raws:
        for cut in range(len(raw)):
            with pytest.raises(SflowError):
                decode(raw[:cut])
    for _ in range(20000):
        raw = bytearray(rng.choice(raws))
        for _ in range(rng.randint(1, 4)):
            i = rng.randrange(len(raw))
            raw[i] ^= 1 << rng.randrange(8)
        with contextlib.suppress(SflowError):
            decode(bytes(raw))


# ------------------------------------------------------------------ tshark


def _pcap(datagrams: list[bytes], path) -> None:
    from scapy.layers.inet import IP, UDP
    from scapy.layers.l2 import Ether
    from scapy.utils import wrpcap

    wrpcap(
        str(path),
        [
            Ether() / IP(src="192.0.2.1", dst="192.0.2.9") / UDP(sport=50000, dport=6343) / d
            for d in datagrams
        ],
    )


def _walk(node, key, out):
    if isinstance(node, dict):
        for k, v in node.items():
            if k == key:
                out.append(v)
            _walk(v, key, out)
    elif isinstance(node, list):
        for v in node:
            _walk(v, key, out)
    return out


@pytest.mark.skipif(shutil.which("tshark") is None, reason="tshark not installed")
def test_against_tshark(tmp_path) -> None:
    raws = sample_datagrams()
    path = tmp_path / "s.pcap"
    _pcap(raws, path)
    res = subprocess.run(
        ["tshark", "-r", str(path), "-T", "json", "-d", "udp.port==6343,sflow"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    packets = json.loads(res.stdout)
    assert len(packets) == len(raws)
    for pkt, raw in zip(packets, raws, strict=True):
        dg = decode(raw)
        layer = pkt["_source"]["layers"]["sflow"]
        assert _walk(layer, "sflow_245.sequence_number", []) == [str(dg.seq)]
        assert _walk(layer, "sflow_245.agent", []) == [dg.agent]
        assert _walk(layer, "sflow_245.sub_agent_id", []) == [str(dg.sub_agent)]
        assert _walk(layer, "sflow.flow_sample.sequence_number", []) == [
            str(f.seq) for f in dg.flows
        ]
        assert _walk(layer, "sflow.flow_sample.sampling_rate", []) == [
            str(f.sampling_rate) for f in dg.flows
        ]
        assert _walk(layer, "sflow.flow_sample.sample_pool", []) == [
            str(f.sample_pool) for f in dg.flows
        ]
        assert _walk(layer, "sflow.flow_sample.dropped_packets", []) == [
            str(f.drops) for f in dg.flows
        ]
        ins = _walk(layer, "sflow.flow_sample.input_interface", []) + _walk(
            layer, "sflow.flow_sample.input_interface_value", []
        )
        assert sorted(ins) == sorted(str(f.input) for f in dg.flows)
        hdrs = [h.replace(":", "") for h in _walk(layer, "sflow_245.header", [])]
        assert hdrs == [f.header.hex() for f in dg.flows]
        lens = _walk(layer, "sflow_245.header.frame_length", [])
        assert lens == [str(f.frame_length) for f in dg.flows]
        assert _walk(layer, "sflow.counters_sample.sequence_number", []) == [
            str(c.seq) for c in dg.counters
        ]
        assert _walk(layer, "sflow_245.ifinerr", []) == [
            str(c.generic.in_errors) for c in dg.counters
        ]
        assert _walk(layer, "sflow_245.ifouterr", []) == [
            str(c.generic.out_errors) for c in dg.counters
        ]
        assert _walk(layer, "sflow_245.ifoper_status", []) == ["1"] * len(dg.counters) or _walk(
            layer, "sflow_245.ifoper_status", []
        ) == ["True"] * len(dg.counters)


def test_ovs_report_marking() -> None:
    from tester.emit import ReferenceEmitter

    em = ReferenceEmitter(ovs_marking=True)
    tagged = {"eth_type": 0x0800, "ipv4_dst": 1, "ip_proto": 6}
    rep = decode(
        encode_datagram("192.0.2.1", 0, 1, 0, [em.report_sample((1, 2), tagged, 5, 6)])
    ).flows[0]
    assert (rep.source_type, rep.source_index) == (2, 0x820000) and is_report(rep)
    # An OVS ingress sample on an inter-switch port carries the Verify header but is no report.
    ing = em.ingress_sample((1, 3), tagged)
    ing.header = build_frame(tagged, (5, 6))
    assert (ing.source_type, ing.source_index) == (2, 1000) and not is_report(ing)
