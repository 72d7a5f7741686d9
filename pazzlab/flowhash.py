"""The bucket an Open vSwitch SELECT group sends a packet down, for the simulations.

Open vSwitch picks a SELECT bucket per flow, not per packet: by the symmetric L4 hash of
the packet's Ethernet addresses, VLAN, Ethernet type, IPv4 addresses and protocol, and its
transport ports for TCP and SCTP only (not UDP). A group without a selection_method
uses it through dp_hash (since 2.10: a table of hash values split over the buckets) or,
where dp_hash does not fit, by rendezvous hashing over the bucket ids. Either way the
hash's basis is 0 on every switch and the pick depends only on the hash and the bucket
list, so a flow takes the same bucket index in every group with as many buckets
(pazzdata.workloads rotates the buckets per switch for that reason).

This keeps those properties, not OVS's hash function: the same header picks the same
bucket; equal-sized groups on different switches pick the same index; fields outside
the hash (UDP ports, in_port) do not change the pick; over many flows the buckets are
used evenly.
"""

from __future__ import annotations

import hashlib
import struct

from cpc.rules import Group

__all__ = ["flow_hash", "select_bucket"]

ETH_IPV4 = 0x0800
PORT_HASHED = (6, 132)  # TCP, SCTP


def flow_hash(h: dict[str, int]) -> int:
    """A 64-bit hash of the fields OVS's symmetric L4 hash reads, each pair XORed (so
    that swapping source and destination gives the same hash, as in OVS)."""
    eth_type = h.get("eth_type", 0)
    ip = proto = ports = 0
    if eth_type == ETH_IPV4:
        ip = h.get("ipv4_src", 0) ^ h.get("ipv4_dst", 0)
        proto = h.get("ip_proto", 0)
        if proto in PORT_HASHED:
            ports = h.get("tp_src", 0) ^ h.get("tp_dst", 0)
    mac = h.get("eth_src", 0) ^ h.get("eth_dst", 0)
    key = struct.pack(">QHHIBH", mac, eth_type, h.get("vlan_vid", 0), ip, proto, ports)
    return int.from_bytes(hashlib.blake2b(key, digest_size=8).digest(), "big")


def select_bucket(dpid: int, group: Group, header: dict[str, int]) -> int:
    """The index of the bucket `group` picks for `header` (cpc.refdp's `select`): the one
    whose index scores highest with the flow's hash. `dpid` is not used: OVS's hash is
    the same on every switch."""
    fh = flow_hash(header).to_bytes(8, "big")
    scores = [
        hashlib.blake2b(i.to_bytes(4, "big") + fh, digest_size=8).digest()
        for i in range(len(group.buckets))
    ]
    return scores.index(max(scores))
