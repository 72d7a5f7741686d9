"""How the patched Open vSwitch picks a SELECT bucket, against what pazzlab.flowhash assumes.

Real packets (packet-out, through the bridge's table) into select groups of 2 and 3
buckets on separate bridges; the bucket each packet took is read from the group's
per-bucket counters. pazzlab.flowhash models: one bucket per flow; the same index in
groups of the same size on every switch; UDP ports outside the hash, TCP ports inside;
swapping source and destination changes nothing.
"""

from __future__ import annotations

import itertools
import random
import re
import time
from ipaddress import IPv4Address

import pytest
from scapy.layers.inet import IP, TCP, UDP
from scapy.layers.l2 import Ether

from pazzlab.flowhash import flow_hash

pytestmark = pytest.mark.ovs

BRIDGES = {"br0": 2, "br1": 2, "br2": 3}  # bridge -> buckets


def _setup(ovs) -> None:
    for i, (br, n) in enumerate(BRIDGES.items()):
        ovs.add_bridge(br, dpid=i + 1)
        for p in range(1, n + 2):
            ovs.vsctl(
                "add-port", br, f"{br}p{p}", "--", "set", "interface", f"{br}p{p}",
                "type=internal", f"ofport_request={p}",
            )  # fmt: skip
        buckets = ",".join(f"bucket=output:{p}" for p in range(2, n + 2))
        ovs.ofctl("add-group", br, f"group_id=1,type=select,{buckets}")
        ovs.ofctl("add-flow", br, "priority=10,ip,actions=group:1")


def _counts(ovs, br: str) -> list[int]:
    out = ovs.ofctl("dump-group-stats", br)
    return [int(x) for x in re.findall(r"bucket\d+:packet_count=(\d+)", out)]


def _bucket(ovs, br: str, pkt) -> int:
    before = _counts(ovs, br)
    ovs.ofctl("packet-out", br, f"in_port=1,packet={bytes(pkt).hex()},actions=table")
    for _ in range(100):
        diff = [a - b for a, b in zip(_counts(ovs, br), before, strict=True)]
        if sum(diff) == 1:
            return diff.index(1)
        time.sleep(0.02)
    raise AssertionError(f"{br}: no bucket counted the packet")


def _pkt(h: dict):
    l4 = TCP if h["ip_proto"] == 6 else UDP
    return (
        Ether(src=f"02:00:00:00:00:{h['eth_src']:02x}", dst=f"02:00:00:00:00:{h['eth_dst']:02x}")
        / IP(src=str(IPv4Address(h["ipv4_src"])), dst=str(IPv4Address(h["ipv4_dst"])))
        / l4(sport=h["tp_src"], dport=h["tp_dst"])
    )


def _header(rng: random.Random, proto: int) -> dict:
    return {
        "eth_type": 0x0800,
        "eth_src": 2,
        "eth_dst": 1,
        "vlan_vid": 0,
        "ipv4_src": 0x0A000100 | rng.randrange(1, 255),
        "ipv4_dst": 0x0A000200 | rng.randrange(1, 255),
        "ip_proto": proto,
        "tp_src": rng.randrange(1024, 65536),
        "tp_dst": rng.choice((22, 80, 443)),
    }


def test_ovs_picks_a_bucket_per_flow_as_flowhash_assumes(ovs):
    _setup(ovs)
    rng = random.Random(1)
    h = _header(rng, 6)
    assert len({_bucket(ovs, "br0", _pkt(h)) for _ in range(8)}) == 1  # one flow, one bucket

    tcp = [_header(rng, 6) for _ in range(24)]
    picks = {br: [_bucket(ovs, br, _pkt(x)) for x in tcp] for br in BRIDGES}
    assert picks["br0"] == picks["br1"]  # equal-sized groups: the same index everywhere
    for br, n in BRIDGES.items():
        assert set(picks[br]) == set(range(n)), (br, picks[br])  # TCP flows spread

    u = _header(rng, 17)
    ports = [dict(u, tp_src=rng.randrange(1024, 65536), tp_dst=rng.randrange(1, 65536))]
    ports += [dict(u, tp_src=rng.randrange(1024, 65536)) for _ in range(5)]
    assert {_bucket(ovs, "br0", _pkt(x)) for x in ports} == {_bucket(ovs, "br0", _pkt(u))}
    assert len({flow_hash(x) for x in ports + [u]}) == 1  # UDP ports: outside both hashes

    swapped = dict(h, eth_src=h["eth_dst"], eth_dst=h["eth_src"])
    swapped.update(ipv4_src=h["ipv4_dst"], ipv4_dst=h["ipv4_src"])
    swapped.update(tp_src=h["tp_dst"], tp_dst=h["tp_src"])
    assert _bucket(ovs, "br2", _pkt(swapped)) == _bucket(ovs, "br2", _pkt(h))

    # flowhash never puts in one flow two headers OVS sends down different buckets.
    for (a, pa), (b, pb) in itertools.combinations(zip(tcp, picks["br2"], strict=True), 2):
        if pa != pb:
            assert flow_hash(a) != flow_hash(b)
