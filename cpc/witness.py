"""A concrete packet to show for a set of headers: a witness an operator can send.

`space.pick` returns the lowest header of a BDD: unconstrained bits are 0, which gives
EtherType 0, protocol 0 and the network address 10.0.0.0 of a /24. A witness should be a
packet a host could send: IPv4, TCP or UDP with real ports, untagged, unicast MACs and
host addresses (neither the network nor the broadcast address of a /24). `representative`
narrows the set by each of these preferences in turn, keeping a preference only while the
set stays non-empty, so the witness is always in the set.
"""

from __future__ import annotations

from .fields import ETH_TYPE_IPV4, WIDTH
from .space import HeaderSpace

__all__ = ["representative"]


def _exact(space: HeaderSpace, field: str, value: int):
    return space.field_bdd(field, value, (1 << WIDTH[field]) - 1)


def _preferences(space: HeaderSpace) -> list:
    cached = space.derived.get("witness_preferences")
    if cached is not None:
        return cached
    f = space.field_bdd
    ipv4 = _exact(space, "eth_type", ETH_TYPE_IPV4)
    tcp_udp = _exact(space, "ip_proto", 6) | _exact(space, "ip_proto", 17)
    prefs = [ipv4, _exact(space, "vlan_vid", 0)]
    for fld in ("ipv4_dst", "ipv4_src"):
        zero = _exact(space, fld, 0)
        prefs.append((ipv4 & f(fld, 0x0A000000, 0xFF000000)) | (~ipv4 & zero))  # 10/8
        # the last octet neither 0 nor 255: not the network or broadcast address of a /24
        prefs.append((ipv4 & ~f(fld, 0, 0xFF) & ~f(fld, 0xFF, 0xFF)) | (~ipv4 & zero))
    prefs += [
        _exact(space, "ip_proto", 6) | ~ipv4,
        tcp_udp | ~ipv4,
        ipv4 | _exact(space, "ip_proto", 0),
    ]
    # TCP/UDP ports a client would use: a well-known server port, an ephemeral source;
    # no port bits in other packets
    no_ports = _exact(space, "tp_dst", 0) & _exact(space, "tp_src", 0)
    prefs += [
        (tcp_udp & _exact(space, "tp_dst", 80)) | (~tcp_udp & no_ports),
        (tcp_udp & ~_exact(space, "tp_dst", 0)) | (~tcp_udp & no_ports),
        (tcp_udp & f("tp_src", 0xC000, 0xC000)) | ~tcp_udp,
    ]
    # locally administered unicast MACs, not all-zero
    for fld in ("eth_src", "eth_dst"):
        prefs.append(f(fld, 0x020000000000, 0x030000000000) & ~_exact(space, fld, 0x020000000000))
        prefs.append(~f(fld, 0x010000000000, 0x010000000000))
    space.derived["witness_preferences"] = prefs
    return prefs


def representative(space: HeaderSpace, u) -> dict[str, int] | None:
    """One header of u, as close to an ordinary host's packet as u allows (None: u is
    empty). Fields that do not apply (ports of a non-TCP/UDP packet) are 0."""
    if u == space.false:
        return None
    for p in _preferences(space):
        v = u & p
        if v != space.false:
            u = v
    return space.pick(u)
