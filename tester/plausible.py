"""Is a sample that disagrees with the model plausible evidence of a fault?

A bit flipped in a datagram (or a forged one) that still decodes becomes a sample whose
tags or header disagree with the model: a fault sample. These checks are what such a
sample is held to before it counts as fault evidence; they run only on samples the model
disallows, so the path of consistent samples costs nothing more. Each returns why the
sample is implausible, or None:

- the raw-header record: Ethernet (header protocol 1), a frame length at least the
  sampled bytes;
- the IPv4 header (when sampled whole): version 4, a header length of 20 bytes or more,
  and a correct header checksum (switches write it; one flipped bit anywhere in the 20
  bytes breaks it); and no other EtherType in front of a valid IPv4 header (an IPv4
  packet whose EtherType had a bit flipped);
- Verify_Port: every set bit must come from the Bloom bits of a (switch, in-port) of the
  network that are all set (docs/verify-header.md): set_verify_port only ever ORs in a
  port's bits, so a filter with a bit no such port explains was not written by a switch.

Verify_Rule is a CRC chain and takes any 16-bit value: a flipped bit there is caught by
the corroboration rule (a fault needs two distinct packets), not here.
"""

from __future__ import annotations

from collections.abc import Iterable

from cpc.fields import ETH_TYPE_IPV4
from cpc.results import Port
from cpc.tags import VERIFY_ETHERTYPE, VERIFY_ETHERTYPE_MARKED

from .detect import hop_bits
from .packet import ip_checksum
from .sflow import HEADER_PROTO_ETHERNET

__all__ = ["bloom_explained", "implausible", "port_masks"]

OFPP_LOCAL, OFPP_CONTROLLER = 0xFFFFFFFE, 0xFFFFFFFD
_VERIFY = (VERIFY_ETHERTYPE, VERIFY_ETHERTYPE_MARKED)
_VLAN = (0x8100, 0x88A8)


def port_masks(ports: Iterable[Port]) -> tuple[int, ...]:
    """The distinct Bloom masks set_verify_port can OR in: the ports', and each switch's
    LOCAL and CONTROLLER (a packet-out's in_port)."""
    ports = list(ports)
    dpids = {d for d, _ in ports}
    masks = {hop_bits(d, p) for d, p in ports}
    masks |= {hop_bits(d, p) for d in dpids for p in (OFPP_LOCAL, OFPP_CONTROLLER)}
    return tuple(sorted(masks))


def bloom_explained(verify_port: int, masks: Iterable[int]) -> bool:
    """Is verify_port the union of masks that it holds whole?"""
    covered = 0
    for m in masks:
        if verify_port & m == m:
            covered |= m
    return covered == verify_port


def _payload(raw: bytes) -> tuple[int | None, int]:
    """(where the payload starts, its EtherType) in an Ethernet [+ Verify] [+ VLAN] frame;
    (None, 0) when the frame ends first."""
    if len(raw) < 14:
        return None, 0
    off = 12
    etype = raw[12] << 8 | raw[13]
    if etype in _VERIFY:
        off = 20
        if len(raw) < 22:
            return None, 0
        etype = raw[20] << 8 | raw[21]
    if etype in _VLAN:
        off += 4
        if len(raw) < off + 2:
            return None, 0
        etype = raw[off] << 8 | raw[off + 1]
    return off + 2, etype


def _checksum_ok(raw: bytes, off: int) -> bool:
    """The header's checksum over its whole length (options included)."""
    return ip_checksum(raw[off : off + (raw[off] & 15) * 4]) == 0


def _ipv4_problem(raw: bytes) -> str | None:
    off, etype = _payload(raw)
    if off is None or len(raw) < off + 20 or len(raw) < off + (raw[off] & 15) * 4:
        return None  # not sampled whole: nothing to check
    vihl = raw[off]
    if etype != ETH_TYPE_IPV4:
        # One flipped bit in an IPv4 packet's EtherType leaves an IPv4 header behind it.
        if vihl >> 4 == 4 and vihl & 15 >= 5 and _checksum_ok(raw, off):
            return f"EtherType {etype:#06x} carries an IPv4 header"
        return None
    if vihl >> 4 != 4 or vihl & 15 < 5:
        return f"IPv4 version/header length byte {vihl:#04x}"
    if not _checksum_ok(raw, off):
        return "IPv4 header checksum wrong"
    return None


def implausible(sample, raw: bytes, verify_port: int, masks: tuple[int, ...]) -> str | None:
    """Why a disallowed sample (sFlow FlowSample, None when judged without one) cannot be
    fault evidence, or None. masks: port_masks() of the network (empty: not checked)."""
    if sample is not None:
        if sample.header_protocol != HEADER_PROTO_ETHERNET:
            return f"header protocol {sample.header_protocol} is not Ethernet"
        if sample.frame_length < len(sample.header):
            return (
                f"frame length {sample.frame_length} shorter than its {len(sample.header)} "
                "sampled bytes"
            )
    why = _ipv4_problem(raw)
    if why is not None:
        return why
    if masks and not bloom_explained(verify_port, masks):
        return f"Verify_Port {verify_port:#010x} has bits no switch port sets"
    return None
