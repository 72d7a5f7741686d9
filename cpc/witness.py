"""A concrete packet to show for a set of headers: a witness an operator can send.

`space.pick` returns the lowest header of a BDD: unconstrained bits are 0, which gives
EtherType 0, protocol 0 and the network address 10.0.0.0 of a /24. A witness should be a
packet a host could send: IPv4, TCP or UDP with real ports, untagged, unicast MACs and
host addresses (neither the network nor the broadcast address of a /24). `representative`
narrows the set by each of these preferences in turn, keeping a preference only while the
set stays non-empty, so the witness is always in the set.

MACs: a witness is sent from an ingress, and a real switch learns or polices its source
MAC there, so the caller passes the MACs of the hosts it knows (`src_mac`: the host behind
the ingress, `dst_mac`: the host the packet is for), tried first; `host_macs(model)` finds
the hosts' MACs that the model's rules name. Otherwise two different locally administered
unicast MACs, 02:00:00:00:00:01 from and 02:00:00:00:00:02 to (never a group address).
"""

from __future__ import annotations

from .fields import ETH_TYPE_IPV4, MAC_GROUP_BIT, WIDTH
from .space import HeaderSpace

__all__ = ["host_macs", "representative", "witness_from"]

_MAC = (1 << 48) - 1


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
    # locally administered unicast MACs, not all-zero, the source's and the destination's
    # different (a frame from a host to itself is no ordinary packet)
    for fld, low in (("eth_src", 0x020000000001), ("eth_dst", 0x020000000002)):
        prefs.append(f(fld, 0x020000000000, 0x030000000000))
        prefs.append(_exact(space, fld, low))
        prefs.append(~_exact(space, fld, 0x020000000000))
        prefs.append(~f(fld, 0x010000000000, 0x010000000000))
    space.derived["witness_preferences"] = prefs
    return prefs


def representative(
    space: HeaderSpace, u, src_mac: int | None = None, dst_mac: int | None = None
) -> dict[str, int] | None:
    """One header of u, as close to an ordinary host's packet as u allows (None: u is
    empty). Fields that do not apply (ports of a non-TCP/UDP packet) are 0. src_mac,
    dst_mac: the hosts' MACs, first of all where u allows them (a group address is not
    taken as a source)."""
    if u == space.false:
        return None
    known = []
    if src_mac is not None and not src_mac & MAC_GROUP_BIT:
        known.append(_exact(space, "eth_src", src_mac))
    if dst_mac is not None:
        known.append(_exact(space, "eth_dst", dst_mac))
    # an individual source first of all: a switch drops a frame from a group address
    for p in [
        ~space.field_bdd("eth_src", MAC_GROUP_BIT, MAC_GROUP_BIT),
        *known,
        *_preferences(space),
    ]:
        v = u & p
        if v != space.false:
            u = v
    return space.pick(u)


def witness_from(model, ingress, u) -> tuple[dict[str, int] | None, list]:
    """A witness of u sent from ingress, and its paths (model.trace): from the MAC of the
    host behind ingress, to the MAC of the host the model delivers it to, where the model
    knows them (Model.host_macs) and u allows them."""
    macs = model.host_macs()
    src = macs.get(tuple(ingress))
    hdr = representative(model.space, u, src_mac=src)
    if hdr is None:
        return None, []
    paths = model.trace(ingress, hdr)
    to = [tuple(d.egress) for d in paths if d.kind == "egress" and tuple(d.egress) in macs]
    if to and hdr.get("eth_dst") != macs[to[0]]:
        again = representative(model.space, u, src_mac=src, dst_mac=macs[to[0]])
        again_paths = model.trace(ingress, again)
        # kept only where it still reaches that host (a rule on eth_dst may send it away)
        if to[0] in {tuple(d.egress) for d in again_paths if d.kind == "egress"}:
            return again, again_paths
    return hdr, paths


def host_macs(model) -> dict[tuple[int, int], int]:
    """{edge port: MAC of the host behind it} as the model's rules name them: an entry
    that matches one exact eth_dst and only outputs to one edge port (the host's MAC is
    that eth_dst), or one that matches an exact individual eth_src on an edge port's
    in_port. A port two rules give different MACs is left out."""
    edges = set(model.topo.edge_ports())
    found: dict[tuple[int, int], set[int]] = {}
    for e in model.entries():
        m = {f: (v, k) for f, v, k in e.match.fields}
        ins = e.instructions
        dst = m.get("eth_dst")
        acts = ins.apply + ins.write
        if dst is not None and dst[1] == _MAC and acts and all(a[0] == "output" for a in acts):
            outs = ins.outputs()
            if (
                len(outs) == 1
                and (e.dpid, next(iter(outs))) in edges
                and not dst[0] & MAC_GROUP_BIT
            ):
                found.setdefault((e.dpid, next(iter(outs))), set()).add(dst[0])
        src = m.get("eth_src")
        port = (e.dpid, e.match.in_port)
        if src is not None and src[1] == _MAC and port in edges and not src[0] & MAC_GROUP_BIT:
            found.setdefault(port, set()).add(src[0])
    return {p: next(iter(macs)) for p, macs in found.items() if len(macs) == 1}
