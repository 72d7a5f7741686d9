"""Header fields of the model, their widths and their BDD bit order.

Bit order (top of the BDD first), each field most significant bit first:

    ipv4_dst, ipv4_src, ip_proto, tp_dst, tp_src, eth_type, vlan_vid, eth_dst, eth_src

Why this order: destination-based forwarding dominates real rule sets, and a
prefix on the top field is a single short path from the root. With ipv4_dst on
top, the partition of the header space into classes is a trie on the
destination, so classifying a header tests only the destination bits it needs
and usually stops after the longest prefix. The fields that ACLs constrain
(source, protocol, ports) come next; L2 fields, which routed networks rarely
match, go last. Most significant bit first keeps every prefix and every masked
match linear in the number of its bits.

`tp_dst`/`tp_src` stand for the OpenFlow fields tcp_*, udp_* (and OpenFlow 1.0
tp_*): the model refuses transport fields without an ip_proto of 6 or 17, so the
shared bits are never ambiguous. `vlan_vid` is the 13-bit OpenFlow 1.3 value:
0x1000 (OFPVID_PRESENT) | VID for tagged packets and 0 for untagged ones.
"""

from __future__ import annotations

import ipaddress

FIELDS: tuple[tuple[str, int], ...] = (
    ("ipv4_dst", 32),
    ("ipv4_src", 32),
    ("ip_proto", 8),
    ("tp_dst", 16),
    ("tp_src", 16),
    ("eth_type", 16),
    ("vlan_vid", 13),
    ("eth_dst", 48),
    ("eth_src", 48),
)
WIDTH: dict[str, int] = dict(FIELDS)
FIELD_NAMES: tuple[str, ...] = tuple(name for name, _ in FIELDS)
assert FIELD_NAMES[0] == "ipv4_dst"  # cpc.tables.dst_prefix reads a match's first field
HEADER_BITS = sum(WIDTH.values())
# IPv4 prefix masks by length, and back (a mask that is no prefix is not in the dict).
PREFIX_MASKS: tuple[int, ...] = tuple((0xFFFFFFFF << (32 - n)) & 0xFFFFFFFF for n in range(33))
PREFIX_LENGTH: dict[int, int] = {mask: n for n, mask in enumerate(PREFIX_MASKS)}

ETH_TYPE_IPV4 = 0x0800
ETH_TYPE_ARP = 0x0806
OFPVID_PRESENT = 0x1000
IP_FIELDS = frozenset({"ipv4_dst", "ipv4_src", "ip_proto"})
TP_FIELDS = frozenset({"tp_dst", "tp_src"})
MAC_FIELDS = frozenset({"eth_dst", "eth_src"})
IPV4_FIELDS = frozenset({"ipv4_dst", "ipv4_src"})

# OpenFlow / ovs-ofctl names accepted in matches and set_field, mapped to model fields.
ALIASES: dict[str, str] = {
    "ipv4_dst": "ipv4_dst",
    "nw_dst": "ipv4_dst",
    "ip_dst": "ipv4_dst",
    "ipv4_src": "ipv4_src",
    "nw_src": "ipv4_src",
    "ip_src": "ipv4_src",
    "ip_proto": "ip_proto",
    "nw_proto": "ip_proto",
    "tcp_dst": "tp_dst",
    "udp_dst": "tp_dst",
    "tp_dst": "tp_dst",
    "tcp_src": "tp_src",
    "udp_src": "tp_src",
    "tp_src": "tp_src",
    "eth_type": "eth_type",
    "dl_type": "eth_type",
    "vlan_vid": "vlan_vid",
    "eth_dst": "eth_dst",
    "dl_dst": "eth_dst",
    "eth_src": "eth_src",
    "dl_src": "eth_src",
}
# Transport aliases that fix the protocol (tcp_dst implies ip_proto=6).
PROTO_OF_ALIAS = {"tcp_dst": 6, "tcp_src": 6, "udp_dst": 17, "udp_src": 17}
TRANSPORT_PROTOS = (6, 17)


def full_mask(field: str) -> int:
    return (1 << WIDTH[field]) - 1


def parse_value(field: str, text: str) -> tuple[int, int]:
    """Parse 'VALUE[/MASK]' for a model field into (value, mask). Raises ValueError."""
    text = text.strip()
    width = WIDTH[field]
    full = (1 << width) - 1
    value_text, _, mask_text = text.partition("/")
    if field in IPV4_FIELDS:
        value = int(ipaddress.IPv4Address(value_text))
        if not mask_text:
            mask = full
        elif "." in mask_text:
            mask = int(ipaddress.IPv4Address(mask_text))
        else:
            length = int(mask_text)
            if not 0 <= length <= 32:
                raise ValueError(f"prefix length {length} is out of range 0..32")
            mask = (full << (32 - length)) & full
    elif field in MAC_FIELDS:
        value = _parse_mac(value_text)
        mask = _parse_mac(mask_text) if mask_text else full
    else:
        value = int(value_text, 0)
        mask = int(mask_text, 0) if mask_text else full
    if not 0 <= value <= full or not 0 <= mask <= full:
        raise ValueError(f"{text!r} does not fit the {width}-bit field {field}")
    return value & mask, mask


def _parse_mac(text: str) -> int:
    parts = text.split(":")
    if len(parts) != 6 or not all(1 <= len(p) <= 2 for p in parts):
        raise ValueError(f"{text!r} is not a MAC address")
    return int("".join(p.zfill(2) for p in parts), 16)


# The I/G bit of a MAC address (bit 0 of its first octet): set in a group (multicast or
# broadcast) address, which is never a frame's source; switches drop such frames.
MAC_GROUP_BIT = 1 << 40


def parse_mac(mac: int | str) -> int:
    """A MAC address as an int, from an int or "aa:bb:cc:dd:ee:ff"."""
    if isinstance(mac, int):
        value = mac
    else:
        parts = str(mac).split(":")
        if len(parts) != 6 or not all(len(p) == 2 for p in parts):
            raise ValueError(f"{mac!r} is not a MAC address (aa:bb:cc:dd:ee:ff)")
        value = int("".join(parts), 16)
    if not 0 <= value < 1 << 48:
        raise ValueError(f"{mac!r} is not a 48-bit MAC address")
    return value


def format_value(field: str, value: int, mask: int | None = None) -> str:
    """Human form of a field value, with '/mask' or '/len' when partially masked."""
    full = full_mask(field)
    if field in IPV4_FIELDS:
        text = str(ipaddress.IPv4Address(value))
        if mask is not None and mask != full:
            inv = ~mask & full
            if inv & (inv + 1) == 0:
                return f"{text}/{32 - inv.bit_length()}"
            return f"{text}/{ipaddress.IPv4Address(mask)}"
        return text
    if field in MAC_FIELDS:
        text = ":".join(f"{(value >> s) & 0xFF:02x}" for s in range(40, -8, -8))
        if mask is not None and mask != full:
            text += "/" + format_value(field, mask)
        return text
    text = f"0x{value:04x}" if field in ("eth_type", "vlan_vid") else str(value)
    if mask is not None and mask != full:
        text += f"/0x{mask:x}"
    return text


def parse_header(text: str) -> dict[str, int]:
    """A header dict from ovs-ofctl match syntax with exact values ('tcp,nw_dst=10.0.1.5,
    tp_dst=80' or 'ipv4_dst=10.0.1.5,tcp_dst=80'); unset fields are 0, and transport and
    IP fields imply their prerequisites. The parser is cpc.ofctl's (one for flows and
    headers); ValueError naming the item."""
    from .ofctl import parse_header as parse  # ofctl imports this module

    return parse(text)


def format_header(header: dict[str, int]) -> str:
    """'field=value,...' for the non-zero fields of a header."""
    return ",".join(f"{f}={format_value(f, header[f])}" for f in FIELD_NAMES if header.get(f))
