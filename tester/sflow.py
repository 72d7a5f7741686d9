"""A compact sFlow version 5 decoder and encoder (sflow.org/sflow_version_5.txt).

Only what the tester needs is decoded in full:

- flow samples (format 1) and expanded flow samples (format 3), with their
  raw packet header records (record format 1); other flow records are skipped;
- counter samples (format 2) and expanded counter samples (format 4), with their
  generic interface counters (counter record format 1); other counter
  records are skipped.

Everything is XDR: big-endian 32-bit words, opaque data padded to 4 bytes.
`decode()` raises `SflowError` (a ValueError) on anything malformed or
truncated, and nothing else. The encoder exists for tests and benchmarks.
"""

from __future__ import annotations

import ipaddress
import struct

__all__ = [
    "SflowError",
    "Datagram",
    "FlowSample",
    "CounterSample",
    "IfCounters",
    "decode",
    "encode_datagram",
    "encode_flow_sample",
    "encode_counter_sample",
    "IF_FORMAT_SINGLE",
    "IF_FORMAT_DISCARD",
    "IF_FORMAT_MULTIPLE",
]

SFLOW_VERSION = 5
ADDR_IPV4 = 1
ADDR_IPV6 = 2
SAMPLE_FLOW = 1
SAMPLE_COUNTER = 2
SAMPLE_FLOW_EXPANDED = 3
SAMPLE_COUNTER_EXPANDED = 4
RECORD_RAW_HEADER = 1
RECORD_GENERIC_IF = 1
HEADER_PROTO_ETHERNET = 1
IF_FORMAT_SINGLE = 0
IF_FORMAT_DISCARD = 1
IF_FORMAT_MULTIPLE = 2

# Sanity limits against hostile counts: a datagram fits one UDP payload.
MAX_DATAGRAM = 65535

_u32 = struct.Struct(">I")
_u32x2 = struct.Struct(">II")
_u32x3 = struct.Struct(">III")
_u32x4 = struct.Struct(">IIII")
_flow = struct.Struct(">IIIIIIII")  # seq, source_id, rate, pool, drops, input, output, nrec
_flow_x = struct.Struct(
    ">IIIIIIIIIII"
)  # expanded: seq, type, index, rate, pool, drops, in_f, in_v, out_f, out_v, nrec
# ifIndex ifType ifSpeed ifDirection ifStatus ifInOctets inUcast inMcast inBcast
# inDiscards inErrors inUnknownProtos ifOutOctets outUcast outMcast outBcast
# outDiscards outErrors promiscuous
_GENERIC_IF = struct.Struct(">IIQIIQIIIIIIQIIIIII")
assert _GENERIC_IF.size == 88


class SflowError(ValueError):
    """A malformed or truncated sFlow datagram."""


class FlowSample:
    """One (expanded or compact) flow sample with its raw packet header, if any."""

    __slots__ = (
        "seq",
        "source_type",
        "source_index",
        "sampling_rate",
        "sample_pool",
        "drops",
        "input_format",
        "input",
        "output_format",
        "output",
        "header_protocol",
        "frame_length",
        "stripped",
        "header",
        "expanded",
    )

    def __init__(
        self,
        seq: int,
        source_type: int,
        source_index: int,
        sampling_rate: int,
        sample_pool: int,
        drops: int,
        input_format: int,
        input: int,  # noqa: A002
        output_format: int,
        output: int,
        header_protocol: int = 0,
        frame_length: int = 0,
        stripped: int = 0,
        header: bytes = b"",
        expanded: bool = False,
    ) -> None:
        self.seq = seq
        self.source_type = source_type
        self.source_index = source_index
        self.sampling_rate = sampling_rate
        self.sample_pool = sample_pool
        self.drops = drops
        self.input_format = input_format
        self.input = input
        self.output_format = output_format
        self.output = output
        self.header_protocol = header_protocol
        self.frame_length = frame_length
        self.stripped = stripped
        self.header = header
        self.expanded = expanded

    def __repr__(self) -> str:
        return (
            f"FlowSample(seq={self.seq}, src={self.source_type}:{self.source_index}, "
            f"rate={self.sampling_rate}, in={self.input_format}:{self.input}, "
            f"out={self.output_format}:{self.output}, header={self.header.hex()})"
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, FlowSample):
            return NotImplemented
        return all(getattr(self, s) == getattr(other, s) for s in self.__slots__)

    __hash__ = None  # type: ignore[assignment]


class IfCounters:
    """Generic interface counters (counter record format 1)."""

    __slots__ = (
        "if_index",
        "if_type",
        "if_speed",
        "if_direction",
        "if_status",
        "in_octets",
        "in_ucast",
        "in_mcast",
        "in_bcast",
        "in_discards",
        "in_errors",
        "in_unknown_protos",
        "out_octets",
        "out_ucast",
        "out_mcast",
        "out_bcast",
        "out_discards",
        "out_errors",
        "promiscuous",
    )

    def __init__(self, *values: int) -> None:
        for name, value in zip(self.__slots__, values, strict=True):
            setattr(self, name, value)

    @property
    def admin_up(self) -> bool:
        return bool(self.if_status & 1)

    @property
    def oper_up(self) -> bool:
        return bool(self.if_status & 2)

    def values(self) -> tuple[int, ...]:
        return tuple(getattr(self, s) for s in self.__slots__)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, IfCounters) and self.values() == other.values()

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"IfCounters(if_index={self.if_index}, status={self.if_status}, in_errors={self.in_errors}, out_errors={self.out_errors})"


class CounterSample:
    __slots__ = ("seq", "source_type", "source_index", "generic", "expanded")

    def __init__(
        self,
        seq: int,
        source_type: int,
        source_index: int,
        generic: IfCounters | None,
        expanded: bool = False,
    ) -> None:
        self.seq = seq
        self.source_type = source_type
        self.source_index = source_index
        self.generic = generic
        self.expanded = expanded

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, CounterSample):
            return NotImplemented
        return all(getattr(self, s) == getattr(other, s) for s in self.__slots__)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"CounterSample(seq={self.seq}, src={self.source_type}:{self.source_index}, generic={self.generic!r})"


class Datagram:
    __slots__ = ("agent", "sub_agent", "seq", "uptime", "flows", "counters")

    def __init__(
        self,
        agent: str,
        sub_agent: int,
        seq: int,
        uptime: int,
        flows: list[FlowSample],
        counters: list[CounterSample],
    ) -> None:
        self.agent = agent
        self.sub_agent = sub_agent
        self.seq = seq
        self.uptime = uptime
        self.flows = flows
        self.counters = counters

    def __repr__(self) -> str:
        return (
            f"Datagram(agent={self.agent}, sub={self.sub_agent}, seq={self.seq}, "
            f"flows={len(self.flows)}, counters={len(self.counters)})"
        )


def _records(data: bytes, off: int, end: int, n: int, kind: str):
    """(format, offset, length) of each of n records of a sample that ends at `end`."""
    for _ in range(n):
        if off + 8 > end:
            raise SflowError(f"{kind} record header truncated")
        fmt, length = _u32x2.unpack_from(data, off)
        off += 8
        if off + length > end or length & 3:
            raise SflowError(f"{kind} record length out of bounds")
        yield fmt, off, length
        off += length
    if off != end:
        raise SflowError(f"{kind} sample length does not match its records")


def _flow_records(data: bytes, off: int, end: int, n: int, fs: FlowSample) -> None:
    for fmt, at, length in _records(data, off, end, n, "flow"):
        if fmt == RECORD_RAW_HEADER:
            if length < 16:
                raise SflowError("raw header record too short")
            proto, flen, stripped, hlen = _u32x4.unpack_from(data, at)
            if 16 + hlen > length:
                raise SflowError("raw header bytes truncated")
            fs.header_protocol = proto
            fs.frame_length = flen
            fs.stripped = stripped
            fs.header = data[at + 16 : at + 16 + hlen]


def _counter_records(data: bytes, off: int, end: int, n: int) -> IfCounters | None:
    generic = None
    for fmt, at, length in _records(data, off, end, n, "counter"):
        if fmt == RECORD_GENERIC_IF:
            if length < 88:
                raise SflowError("generic interface counters too short")
            generic = IfCounters(*_GENERIC_IF.unpack_from(data, at))
    return generic


def decode(data: bytes) -> Datagram:
    """Decode one sFlow v5 datagram. Raises SflowError on malformed input."""
    size = len(data)
    if size < 28 or size > MAX_DATAGRAM:
        raise SflowError(f"datagram size {size} out of range")
    version, atype = _u32x2.unpack_from(data, 0)
    if version != SFLOW_VERSION:
        raise SflowError(f"sFlow version {version} is not 5")
    if atype == ADDR_IPV4:
        agent = ".".join(map(str, data[8:12]))
        off = 12
    elif atype == ADDR_IPV6:
        if size < 40:
            raise SflowError("IPv6 agent datagram truncated")
        agent = str(ipaddress.IPv6Address(data[8:24]))
        off = 24
    else:
        raise SflowError(f"unknown agent address type {atype}")
    sub_agent, seq, uptime, nsamples = _u32x4.unpack_from(data, off)
    off += 16
    if nsamples > size // 8:
        raise SflowError("sample count exceeds datagram size")
    flows: list[FlowSample] = []
    counters: list[CounterSample] = []
    for _ in range(nsamples):
        if off + 8 > size:
            raise SflowError("sample header truncated")
        fmt, length = _u32x2.unpack_from(data, off)
        off += 8
        end = off + length
        if end > size or length & 3:
            raise SflowError("sample length out of bounds")
        if fmt == SAMPLE_FLOW:
            if length < 32:
                raise SflowError("flow sample too short")
            s, src, rate, pool, drops, inp, outp, nrec = _flow.unpack_from(data, off)
            if nrec > length // 8:
                raise SflowError("flow record count exceeds sample size")
            fs = FlowSample(
                s,
                src >> 24,
                src & 0xFFFFFF,
                rate,
                pool,
                drops,
                inp >> 30,
                inp & 0x3FFFFFFF,
                outp >> 30,
                outp & 0x3FFFFFFF,
            )
            _flow_records(data, off + 32, end, nrec, fs)
            flows.append(fs)
        elif fmt == SAMPLE_FLOW_EXPANDED:
            if length < 44:
                raise SflowError("expanded flow sample too short")
            s, stype, sidx, rate, pool, drops, inf, inv, outf, outv, nrec = _flow_x.unpack_from(
                data, off
            )
            if nrec > length // 8:
                raise SflowError("flow record count exceeds sample size")
            fs = FlowSample(s, stype, sidx, rate, pool, drops, inf, inv, outf, outv, expanded=True)
            _flow_records(data, off + 44, end, nrec, fs)
            flows.append(fs)
        elif fmt == SAMPLE_COUNTER:
            if length < 12:
                raise SflowError("counter sample too short")
            s, src, nrec = _u32x3.unpack_from(data, off)
            if nrec > length // 8:
                raise SflowError("counter record count exceeds sample size")
            generic = _counter_records(data, off + 12, end, nrec)
            counters.append(CounterSample(s, src >> 24, src & 0xFFFFFF, generic))
        elif fmt == SAMPLE_COUNTER_EXPANDED:
            if length < 16:
                raise SflowError("expanded counter sample too short")
            s, stype, sidx, nrec = _u32x4.unpack_from(data, off)
            if nrec > length // 8:
                raise SflowError("counter record count exceeds sample size")
            generic = _counter_records(data, off + 16, end, nrec)
            counters.append(CounterSample(s, stype, sidx, generic, expanded=True))
        # Other formats (enterprise samples) are skipped by their length.
        off = end
    if off != size:
        raise SflowError(f"{size - off} trailing bytes after the last sample")
    return Datagram(agent, sub_agent, seq, uptime, flows, counters)


# ---------------------------------------------------------------- encoder


def _pad(b: bytes) -> bytes:
    return b + b"\0" * (-len(b) & 3)


def encode_flow_sample(fs: FlowSample) -> bytes:
    """One flow sample (compact or expanded per fs.expanded) with a raw header record."""
    hdr = fs.header
    rec = _u32x4.pack(
        fs.header_protocol or HEADER_PROTO_ETHERNET, fs.frame_length, fs.stripped, len(hdr)
    ) + _pad(hdr)
    records = _u32x2.pack(RECORD_RAW_HEADER, len(rec)) + rec
    if fs.expanded:
        body = (
            _flow_x.pack(
                fs.seq,
                fs.source_type,
                fs.source_index,
                fs.sampling_rate,
                fs.sample_pool,
                fs.drops,
                fs.input_format,
                fs.input,
                fs.output_format,
                fs.output,
                1,
            )
            + records
        )
        return _u32x2.pack(SAMPLE_FLOW_EXPANDED, len(body)) + body
    body = (
        _flow.pack(
            fs.seq,
            (fs.source_type << 24) | fs.source_index,
            fs.sampling_rate,
            fs.sample_pool,
            fs.drops,
            (fs.input_format << 30) | fs.input,
            (fs.output_format << 30) | fs.output,
            1,
        )
        + records
    )
    return _u32x2.pack(SAMPLE_FLOW, len(body)) + body


def encode_counter_sample(cs: CounterSample) -> bytes:
    recs = b""
    n = 0
    if cs.generic is not None:
        g = _GENERIC_IF.pack(*cs.generic.values())
        recs = _u32x2.pack(RECORD_GENERIC_IF, len(g)) + g
        n = 1
    if cs.expanded:
        body = _u32x4.pack(cs.seq, cs.source_type, cs.source_index, n) + recs
        return _u32x2.pack(SAMPLE_COUNTER_EXPANDED, len(body)) + body
    body = _u32x3.pack(cs.seq, (cs.source_type << 24) | cs.source_index, n) + recs
    return _u32x2.pack(SAMPLE_COUNTER, len(body)) + body


def encode_datagram(
    agent: str,
    sub_agent: int,
    seq: int,
    uptime: int,
    samples: list[FlowSample | CounterSample] | list[bytes],
) -> bytes:
    """A whole datagram; samples are records or already encoded sample bytes."""
    addr = ipaddress.ip_address(agent)
    atype = ADDR_IPV4 if addr.version == 4 else ADDR_IPV6
    parts = []
    for s in samples:
        if isinstance(s, bytes):
            parts.append(s)
        elif isinstance(s, FlowSample):
            parts.append(encode_flow_sample(s))
        else:
            parts.append(encode_counter_sample(s))
    return (
        _u32x2.pack(SFLOW_VERSION, atype)
        + addr.packed
        + _u32x4.pack(sub_agent, seq, uptime, len(parts))
        + b"".join(parts)
    )
