"""cpc.selecthash against the patched Open vSwitch: the bucket each real packet took.

One bridge per group (tests/ovs/select_oracle.py): 2, 3, 4 and 5 buckets of weight 1;
weights 2, 5, 1, 3 (dp_hash, 16 values) and 3, 50, 60 (dp_hash, 64 values); weights 150,
120, 1 (too unequal for 256 hash values: the default method). Random TCP, UDP, ICMP,
SCTP, ARP, other-EtherType and VLAN-tagged frames go in three times: by packet-out
(translated per packet), then twice from port 1's tap (the datapath's path, the second
time through the flows the first installed). Every frame is seen leaving by exactly one
bucket, the one cpc.selecthash computes. Then the same through a second switch: frames
that cross a veth link from a verify-tagging bridge, so they carry the Verify shim.
"""

from __future__ import annotations

import json
import random
import socket
import time
from pathlib import Path

import pytest

from cpc.rules import Group
from cpc.selecthash import ovs_select_bucket
from tests.ovs.ovsenv import VethPair, run, unique_name
from tests.ovs.select_oracle import (
    Listener,
    SelectBridge,
    add_tap,
    collect_vectors,
    frame,
    packet_out,
)

pytestmark = pytest.mark.ovs

VECTORS = Path(__file__).resolve().parents[1] / "vectors" / "select_hash.json"
GROUPS = {
    "shg2": (1, 1),
    "shg3": (1, 1, 1),
    "shg4": (1, 1, 1, 1),
    "shg5": (1, 1, 1, 1, 1),
    "shw16": (2, 5, 1, 3),
    "shw64": (3, 50, 60),
    "shdef": (150, 120, 1),
}
N = 160  # headers; each is sent three times to every bridge


def random_headers(rng: random.Random, n: int) -> list[dict[str, int]]:
    """Mostly TCP and UDP, some ICMP and SCTP, a few non-IPv4 frames; 1 in 6 tagged."""
    out = []
    for _ in range(n):
        kind = rng.choices(("tcp", "udp", "icmp", "sctp", "arp", "other", "ipv6"),
                           (40, 40, 6, 3, 5, 3, 3))[0]  # fmt: skip
        h = {
            "eth_src": rng.getrandbits(48) & ~(1 << 40),  # unicast
            "eth_dst": rng.getrandbits(48),
            "vlan_vid": 0x1000 | rng.randrange(1, 4095) if rng.random() < 1 / 6 else 0,
            "eth_type": 0x0800,
            "ipv4_src": 0,
            "ipv4_dst": 0,
            "ip_proto": 0,
            "tp_src": 0,
            "tp_dst": 0,
        }
        if kind in ("arp", "other", "ipv6"):
            h["eth_type"] = {"arp": 0x0806, "other": 0x88B5, "ipv6": 0x86DD}[kind]
        else:
            h["ipv4_src"] = rng.choice((0x0A000000, 0xC0A80000)) | rng.getrandbits(16)
            h["ipv4_dst"] = rng.getrandbits(32)
            h["ip_proto"] = {"tcp": 6, "udp": 17, "icmp": 1, "sctp": 132}[kind]
            if kind != "icmp":
                h["tp_src"] = rng.randrange(1024, 65536)
                h["tp_dst"] = rng.choice((22, 53, 80, 443, rng.randrange(1, 65536)))
        out.append(h)
    return out


def _group(weights) -> Group:
    return Group(1, 1, "select", tuple((("output", p),) for p in range(2, len(weights) + 2)))


def _send_from_tap(ifname: str, frames: list[bytes]) -> None:
    """Frames into OVS on the tap's port: the host transmits them on the tap device."""
    with socket.socket(socket.AF_PACKET, socket.SOCK_RAW) as s:
        s.bind((ifname, 0))
        for i, f in enumerate(frames):
            s.send(f)
            if i % 40 == 39:
                time.sleep(0.005)


def _compare(got, headers, weights, offset: int, where: str) -> tuple[int, list]:
    """(packets compared, mismatches) of the picks `got` for frames offset + i."""
    g, bad = _group(weights), []
    for i, h in enumerate(headers):
        took = got.get(offset + i)
        assert took is not None and len(took) == 1, (where, i, h, took)
        want = ovs_select_bucket(g, h, weights)
        if took[0] != want:
            bad.append((where, i, h, took[0], want))
    return len(headers), bad


def test_every_packet_takes_the_bucket_selecthash_computes(ovs):
    headers = random_headers(random.Random(1), N)
    rounds = 3
    frames = [frame(h, r * N + i) for r in range(rounds) for i, h in enumerate(headers)]
    compared, bad = 0, []
    for k, (br, weights) in enumerate(GROUPS.items()):
        sb = SelectBridge(ovs, br, 0x40 + k, weights)
        lis = Listener(sb.ports)
        try:
            packet_out(ovs, br, 1, frames[:N])
            lis.wait(set(range(N)))
            for r in range(1, rounds):
                _send_from_tap(f"{br}p1", frames[r * N : (r + 1) * N])
                lis.wait(set(range(r * N, (r + 1) * N)))
        finally:
            lis.close()
        got = {i: [p - 2 for p in ports] for i, ports in lis.seen.items()}
        for r in range(rounds):
            n, b = _compare(got, headers, weights, r * N, br)
            compared, bad = compared + n, bad + b
        used = {got[i][0] for i in range(N)}
        # Not a trivial check: every bucket with a tenth of the weight or more was used.
        assert {i for i, w in enumerate(weights) if w * 10 >= sum(weights)} <= used, (br, used)
    assert compared == rounds * N * len(GROUPS)
    assert not bad, f"{len(bad)} of {compared} packets took another bucket: {bad[:5]}"


def test_packets_from_another_switch_with_the_verify_shim(ovs, cleanup):
    """sha (dpid 0x81) tags frames from its edge port 1 and sends them over a veth to shb
    (dpid 0x82), port 9, whose select group has 3 buckets: the frames on the link carry
    the Verify shim, shb's pick is still cpc.selecthash's (the same as on any switch)."""
    conf = {"verify-tagging": "true"}
    ovs.add_bridge("sha", dpid=0x81, other_config=conf)
    add_tap(ovs, "sha", 1, {"verify-edge": "true"})
    la, lb = unique_name("la"), unique_name("lb")
    pair = VethPair(la, lb)
    cleanup.push(pair.delete)
    for end in (la, lb):
        run("sysctl", "-qw", f"net.ipv6.conf.{end}.disable_ipv6=1", check=False)
    ovs.add_port("sha", la, ofport=2)
    ovs.ofctl("add-flow", "sha", "priority=10,actions=output:2")
    ovs.add_bridge("shb", dpid=0x82, other_config=conf)
    ovs.add_port("shb", lb, ofport=9)
    ports = {p: add_tap(ovs, "shb", p, {"verify-edge": "true"}) for p in (2, 3, 4)}
    ovs.ofctl("add-group", "shb", "group_id=1,type=select," + ",".join(
        f"bucket=output:{p}" for p in ports))  # fmt: skip
    ovs.ofctl("add-flow", "shb", "priority=10,actions=group:1")

    headers = random_headers(random.Random(2), N)
    link, out = Listener({9: lb}), Listener(ports)
    try:
        packet_out(ovs, "sha", 1, [frame(h, i) for i, h in enumerate(headers)])
        out.wait(set(range(N)))
        link.wait(set(range(N)), timeout=1)
    finally:
        link.close()
        out.close()
    assert set(link.frames) == set(range(N))
    assert {f[12:14] for f in link.frames.values()} == {b"\x08\x20"}  # the shim, first
    got = {i: [p - 2 for p in took] for i, took in out.seen.items()}
    compared, bad = _compare(got, headers, (1, 1, 1), 0, "shb")
    assert compared == N and not bad, bad[:5]


def test_real_ovs_gives_the_committed_vectors(ovs):
    """tests/vectors/select_hash.json (the known answers of tests/cpc/test_selecthash.py)
    is what this OVS computes: dp_hash values, dp_hash tables and default-method scores."""
    assert collect_vectors(ovs) == json.loads(VECTORS.read_text())
