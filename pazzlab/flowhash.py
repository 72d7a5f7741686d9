"""The bucket an Open vSwitch SELECT group sends a packet down, for the simulations.

`select_bucket` is Open vSwitch 3.1's own pick in the userspace datapath, bit for bit
(cpc.selecthash, checked packet by packet against the patched OVS in
tests/ovs/test_select_hash.py), for groups as the workloads and controllers install them:
OpenFlow 1.3 select groups, no selection method, every bucket of weight 1. OVS then uses
dp_hash: the datapath hashes the packet's IPv4 addresses, protocol and, for TCP and SCTP
only (not UDP), ports, each pair XORed, with basis 0 (flow_hash_symmetric_l3l4), and the
bucket is a fixed table of 16 or more hash values spread over the buckets. So a flow
takes one bucket; the same index in every group with as many buckets, on every switch
(pazzdata.workloads rotates the buckets per switch for that reason); swapping source and
destination changes nothing; in_port, dpid and the Verify shim do not enter.
"""

from __future__ import annotations

from cpc.rules import Group
from cpc.selecthash import group_bucket

__all__ = ["select_bucket"]


def select_bucket(dpid: int, group: Group, header: dict[str, int]) -> int:
    """The index of the bucket `group` picks for `header` (cpc.refdp's `select`), as
    Open vSwitch 3.1 picks it (the group's bucket weights too). `dpid` is not used:
    nothing per switch enters the pick."""
    return group_bucket(group, header)
