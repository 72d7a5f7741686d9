"""The OpenFlow header and the messages every connection starts with: framing of a byte
stream into messages, HELLO with its version bitmap, and OFPT_ERROR.
"""

from __future__ import annotations

import struct

from ofwire.consts import OFPHET_VERSIONBITMAP, OFPT_ERROR, OFPT_HELLO, SUPPORTED_VERSIONS

__all__ = [
    "HDR",
    "ProtocolError",
    "header",
    "message",
    "set_xid",
    "split_messages",
    "complete_message",
    "hello",
    "hello_versions",
    "error_msg",
]

HDR = struct.Struct("!BBHI")  # version, type, length, xid


class ProtocolError(ValueError):
    """A message that is not well formed; the peer that sent it is disconnected."""


def header(data: bytes) -> tuple[int, int, int, int]:
    """(version, type, length, xid) of a message."""
    return HDR.unpack_from(data)


def message(version: int, mtype: int, xid: int, body: bytes = b"") -> bytes:
    return HDR.pack(version, mtype, 8 + len(body), xid) + body


def set_xid(data: bytes, xid: int) -> bytes:
    return data[:4] + struct.pack("!I", xid) + data[8:]


def split_messages(buf: bytearray, handle, stop=None) -> int:
    """Call handle(msg) for each complete OpenFlow message at the start of buf, until
    stop() (asked before each message after the first) says to stop there.

    Returns the number of bytes consumed; raises ProtocolError on a length below 8.
    """
    off, n = 0, len(buf)
    while n - off >= 8 and not (off and stop is not None and stop()):
        ln = buf[off + 2] << 8 | buf[off + 3]
        if ln < 8:
            raise ProtocolError(f"message length {ln} < 8")
        if n - off < ln:
            break
        msg = bytes(buf[off : off + ln])
        off += ln
        handle(msg)
    return off


def complete_message(buf) -> bool:
    """Does buf start with a whole OpenFlow message (or a length split_messages refuses)?"""
    return len(buf) >= 8 and len(buf) >= (buf[2] << 8 | buf[3])


def hello(versions=SUPPORTED_VERSIONS, xid: int = 0) -> bytes:
    """A HELLO with a version bitmap element (OpenFlow 1.3.1 section 7.5.1)."""
    bitmap = 0
    for v in versions:
        bitmap |= 1 << v
    body = struct.pack("!HHI", OFPHET_VERSIONBITMAP, 8, bitmap)
    return message(max(versions), OFPT_HELLO, xid, body)


def hello_versions(data: bytes) -> set[int]:
    """The versions a HELLO offers: its bitmap if it has one, else every version <= its own."""
    version = data[0]
    off = 8
    while off + 4 <= len(data):
        etype, elen = struct.unpack_from("!HH", data, off)
        if elen < 4 or off + elen > len(data):
            raise ProtocolError("HELLO element with a bad length")
        if etype == OFPHET_VERSIONBITMAP:
            out = set()
            for i in range((elen - 4) // 4):
                (word,) = struct.unpack_from("!I", data, off + 4 + 4 * i)
                out |= {32 * i + b for b in range(32) if word >> b & 1}
            return out
        off += (elen + 7) // 8 * 8
    return set(range(1, version + 1))


def error_msg(version: int, xid: int, etype: int, code: int, request: bytes) -> bytes:
    """An OFPT_ERROR answering request (its first 64 bytes as data, as the spec asks)."""
    return message(version, OFPT_ERROR, xid, struct.pack("!HH", etype, code) + request[:64])
