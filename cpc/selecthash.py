"""The bucket Open vSwitch 3.1's userspace datapath picks in an OpenFlow SELECT group.

For a group as a controller installs it (OpenFlow 1.3 group_mod type=select, no
selection_method property, buckets without watch port or group), bit for bit:

1. Method (ofproto-dpif.c group_set_selection_method). Without a selection_method OVS
   tries dp_hash: group_setup_dp_hash_table spreads n_hash = max(16, the power of 2 at or
   above ceil(total weight / smallest positive weight)) hash values over the buckets by
   the Webster method. If that takes more than 256 values (e.g. weights 150 and 1), or
   every weight is 0, the group falls back to the default method.
2. dp_hash (ofproto-dpif-xlate.c pick_dp_hash_select_group). Translation emits
   hash(sym_l4(0)) and a recirculation; the datapath (lib/odp-execute.c,
   OVS_ACTION_ATTR_HASH with OVS_HASH_ALG_SYM_L4) sets dp_hash to
   flow_hash_symmetric_l3l4(flow, 0, false) of the packet as it is at the group, and
   after the recirculation the bucket is hash_map[dp_hash & (n_hash - 1)]. Neither the
   RSS hash nor miniflow_hash_5tuple is used (only the L4 algorithm would take them).
3. Default (pick_default_select_group, group_best_live_bucket): rendezvous hashing, the
   bucket with the highest (hash_int(bucket_id, flow_hash_symmetric_l4(flow, 0)) &
   0xffff) * weight, the last one on a tie; bucket ids are 0, 1, ... in order.

Fields. IPv4: only the addresses, ip_proto and, for TCP and SCTP (not UDP, ICMP or
fragments), the ports enter dp_hash, each pair XORed (symmetric); not the MACs, VLAN or
EtherType. Other EtherTypes: the MACs, VLAN ID and EtherType (flow_hash_symmetric_l2).
The default method also hashes the MACs and VLAN ID of IPv4 packets.

Nothing per switch enters: the basis is 0 everywhere; no dpid, in_port, metadata or
recirculation id is hashed; the Verify shim is skipped by flow extraction (ovs-patches
0001, parse_vlan), so a packet picks the same index in every group with the same weights.
Two limits of a per-group function: a packet that meets a second SELECT group on the same
bridge after the first (or past a patch port) reuses the first group's dp_hash, as it was
computed before any later rewrite; a hash of 0 (1 in 2^32) makes OVS recirculate again.

The 32-bit hash functions are lib/hash.h's portable (murmur3) ones, which OVS uses when
built without SSE 4.2 (the Debian and the project's builds: gcc -O2, no -msse4.2); an
-msse4.2 build replaces hash_add and hash_finish by CRC32-C and picks other buckets.
EtherType 0x86DD: the model has no IPv6 fields; its frames are hashed as OVS hashes an
IPv6 frame whose header does not parse (the project's probes of that type): zero
addresses, protocol 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

from .rules import Group
from .tags import jhash_bytes

__all__ = [
    "MAX_HASH_VALUES",
    "default_scores",
    "dp_hash",
    "dp_hash_table",
    "hash_add",
    "hash_finish",
    "hash_int",
    "group_bucket",
    "ovs_select_bucket",
    "pick_known",
]

M32 = 0xFFFFFFFF
ETH_IPV4, ETH_IPV6 = 0x0800, 0x86DD
PORT_HASHED = (6, 132)  # TCP, SCTP
MAX_HASH_VALUES = 256  # MAX_SELECT_GROUP_HASH_VALUES


def _rot(x: int, k: int) -> int:
    return ((x << k) | (x >> (32 - k))) & M32


def hash_add(h: int, data: int) -> int:
    """lib/hash.h mhash_add: one murmur3 round (a zero word skips the mixing step)."""
    if data:
        data = _rot((data * 0xCC9E2D51) & M32, 15) * 0x1B873593 & M32
        h ^= data
    return (_rot(h, 13) * 5 + 0xE6546B64) & M32


def hash_finish(h: int, final: int) -> int:
    """lib/hash.h hash_finish: mhash_finish(h ^ final), the murmur3 finaliser."""
    h ^= final
    h ^= h >> 16
    h = h * 0x85EBCA6B & M32
    h ^= h >> 13
    h = h * 0xC2B2AE35 & M32
    return h ^ (h >> 16)


def hash_int(x: int, basis: int) -> int:
    """lib/hash.h hash_int = hash_2words(x, basis)."""
    return hash_finish(hash_add(hash_add(x, 0), basis), 8)


# struct flow keeps addresses and ports in network byte order and the hash reads them as
# native (little-endian x86) integers: hence the byte swaps.
def _le32(be: int) -> int:
    return int.from_bytes(be.to_bytes(4, "big"), "little")


def _le16(be: int) -> int:
    return int.from_bytes(be.to_bytes(2, "big"), "little")


def _vid(h: dict[str, int]) -> int:
    # flow->vlans[].tci & VLAN_VID_MASK: the 12-bit VID, 0 when untagged.
    return h.get("vlan_vid", 0) & 0x0FFF


def _mac_xor(h: dict[str, int]) -> bytes:
    return (h.get("eth_src", 0) ^ h.get("eth_dst", 0)).to_bytes(6, "big")


def dp_hash(h: dict[str, int]) -> int:
    """flow_hash_symmetric_l3l4(flow, 0, false) (lib/flow.c): the datapath's sym_l4 hash."""
    et = h.get("eth_type", 0)
    if et == ETH_IPV4:
        proto = h.get("ip_proto", 0)
        ports = h.get("tp_src", 0) ^ h.get("tp_dst", 0) if proto in PORT_HASHED else None
        return _l3l4_hash(h.get("ipv4_src", 0) ^ h.get("ipv4_dst", 0), proto, ports)
    if et == ETH_IPV6:
        return _l3l4_hash(None, 0, None)
    return _l2_hash(et, _vid(h), h.get("eth_src", 0) ^ h.get("eth_dst", 0))


# Kept per flow: one packet meets a group at every switch of its path, and the model asks
# for every group on the paths it follows for one header (cpc.flowpaths).
@lru_cache(maxsize=4096)
def _l3l4_hash(addr: int | None, proto: int, ports: int | None) -> int:
    """addr: the XOR of the IPv4 addresses, None for IPv6 (all-zero addresses); ports:
    their XOR, None when the protocol's ports are not hashed."""
    if addr is not None:
        x = hash_add(0, _le32(addr))
    else:
        x = 0
        for _ in range(4):  # hash_add64 twice over the XOR of all-zero addresses
            x = hash_add(x, 0)
    x = hash_add(x, proto)
    if ports is not None:
        x = hash_add(x, _le16(ports))
    return hash_finish(x, 0)


@lru_cache(maxsize=4096)
def _l2_hash(et: int, vid: int, mac_xor: int) -> int:
    """flow_hash_symmetric_l2: three words of {eth_type, vlan_tci, eth_addr, pad}."""
    raw = et.to_bytes(2, "big") + vid.to_bytes(2, "big") + mac_xor.to_bytes(6, "big") + b"\0\0"
    x = 0
    for i in range(0, 12, 4):
        x = hash_add(x, int.from_bytes(raw[i : i + 4], "little"))
    return hash_finish(x, 0)


def flow_hash_symmetric_l4(h: dict[str, int]) -> int:
    """flow_hash_symmetric_l4(flow, 0) (lib/flow.c): jhash of a 32-byte struct {16-byte
    address XOR, eth_type, vlan_tci, tp_port, eth_addr XOR, ip_proto, padding}."""
    et = h.get("eth_type", 0)
    addr, port, proto = 0, 0, 0
    if et == ETH_IPV4:
        addr = h.get("ipv4_src", 0) ^ h.get("ipv4_dst", 0)
        proto = h.get("ip_proto", 0)
        if proto in PORT_HASHED:
            port = h.get("tp_src", 0) ^ h.get("tp_dst", 0)
    raw = (
        addr.to_bytes(4, "big")
        + bytes(12)
        + et.to_bytes(2, "big")
        + _vid(h).to_bytes(2, "big")
        + port.to_bytes(2, "big")
        + _mac_xor(h)
        + bytes((proto, 0, 0, 0))
    )
    return jhash_bytes(raw, 0)


def dp_hash_table(weights: Sequence[int]) -> list[int] | None:
    """group_setup_dp_hash_table(group, 256): the bucket index of each masked dp_hash
    value, or None when the group takes the default method instead."""
    total = sum(weights)
    if not weights or total == 0:
        return None
    least = min(w for w in weights if w > 0)
    slots = -(-total // least)  # DIV_ROUND_UP
    n_hash = max(16, 1 << (slots - 1).bit_length())  # ROUND_UP_POW2
    if n_hash > MAX_HASH_VALUES:
        return None
    # Webster (Sainte-Laguë): each value goes to the highest weight / divisor, divisors
    # 1, 3, 5, ...; a tie goes to the first bucket (strict '>'). C doubles = Python floats.
    value = [float(w) for w in weights]
    divisor = [1] * len(weights)
    table = []
    for _ in range(n_hash):
        win = 0
        for i in range(1, len(weights)):
            if value[i] > value[win]:
                win = i
        divisor[win] += 2
        value[win] = weights[win] / divisor[win]
        table.append(win)
    return table


def default_scores(weights: Sequence[int], h: dict[str, int]) -> list[int]:
    """group_best_live_bucket's score of each bucket; a weight-0 bucket is not live (-1)."""
    basis = flow_hash_symmetric_l4(h)
    return [(hash_int(i, basis) & 0xFFFF) * w if w else -1 for i, w in enumerate(weights)]


def ovs_select_bucket(
    group: Group, header: dict[str, int], weights: Sequence[int] | None = None
) -> int:
    """The index of the bucket Open vSwitch 3.1 (userspace datapath) sends `header` down.

    `weights`: the buckets' OpenFlow weights, 1 each by default (what ovs-ofctl and the
    project's controllers install; cpc.rules.Group does not keep them). Raises ValueError
    when no bucket has a positive weight: OVS drops the packet."""
    w = [1] * len(group.buckets) if weights is None else list(weights)
    if len(w) != len(group.buckets):
        raise ValueError(f"{len(w)} weights for {len(group.buckets)} buckets")
    if not any(w):
        raise ValueError("no bucket with a positive weight: Open vSwitch drops the packet")
    table = _table(tuple(w))
    if table is not None:
        return table[dp_hash(header) & (len(table) - 1)]
    scores = default_scores(w, header)
    return len(scores) - 1 - scores[::-1].index(max(scores))  # the last best: '>='


@lru_cache(maxsize=1024)
def _table(weights: tuple[int, ...]) -> list[int] | None:
    return dp_hash_table(weights)


def group_bucket(group: Group, header: dict[str, int]) -> int:
    """ovs_select_bucket with the group's own weights (cpc.rules.Group.weights): the
    model's picker (cpc.model.Model.select) for switches that are Open vSwitch."""
    return ovs_select_bucket(group, header, group.weights or None)


_L2 = ("eth_src", "eth_dst", "vlan_vid")
_L3 = ("ipv4_src", "ipv4_dst", "ip_proto")
_L4 = ("tp_src", "tp_dst")


def pick_known(group: Group, header: dict[str, int]) -> bool:
    """Whether header names every field group_bucket reads for this group: eth_type; for
    IPv4 the addresses and ip_proto, and the ports for TCP and SCTP; for other EtherTypes
    but IPv6 the MACs and VLAN ID, which the default method (a group whose weights
    dp_hash_table cannot spread) reads for IPv4 and IPv6 too. A header without one of them
    (elsewhere the model reads a missing field as 0) leaves the pick unknown: cpc.model
    then allows every bucket, as without the pick."""
    et = header.get("eth_type")
    if et is None:
        return False
    default = _table(tuple(group.weights or (1,) * len(group.buckets))) is None
    need: tuple[str, ...] = _L2 if default or et not in (ETH_IPV4, ETH_IPV6) else ()
    if et == ETH_IPV4:
        need += _L3 + _L4 if header.get("ip_proto") in PORT_HASHED else _L3
    return all(f in header for f in need)
