"""What the proxy checks of every relayed message: framing, the negotiated version, known
types and the fixed length of each type, per OpenFlow version.

Types and sizes come from os-ken's constants (`os_ken.ofproto.ofproto_v1_3`, `_v1_0`;
importing them does not pull in eventlet). pazzd.openflow keeps its own few constants:
pazzd imports it at start-up, before it knows whether the proxy runs, and os-ken's
ofproto package takes about 0.4 s to import.
"""

from __future__ import annotations

from os_ken.ofproto import ofproto_v1_0 as of10
from os_ken.ofproto import ofproto_v1_3 as of13

from pazzd import openflow as of

# Messages of the switch that can answer a request of the proxy's own.
REPLY_TYPES = {
    of.OFP13: {
        of13.OFPT_ERROR,
        of13.OFPT_ECHO_REPLY,
        of13.OFPT_FEATURES_REPLY,
        of13.OFPT_GET_CONFIG_REPLY,
        of13.OFPT_MULTIPART_REPLY,
        of13.OFPT_BARRIER_REPLY,
        of13.OFPT_ROLE_REPLY,
        of13.OFPT_GET_ASYNC_REPLY,
    },
    of.OFP10: {
        of10.OFPT_ERROR,
        of10.OFPT_ECHO_REPLY,
        of10.OFPT_FEATURES_REPLY,
        of10.OFPT_GET_CONFIG_REPLY,
        of10.OFPT_STATS_REPLY,
        of10.OFPT_BARRIER_REPLY,
    },
}
MAX_TYPE = {of.OFP13: of13.OFPT_METER_MOD, of.OFP10: of10.OFPT_QUEUE_GET_CONFIG_REPLY}
BARRIER_REQ = {of.OFP13: of13.OFPT_BARRIER_REQUEST, of.OFP10: of10.OFPT_BARRIER_REQUEST}
# Replies in parts (the flags' low byte at offset 11 says more follow).
STATS_REPLY = {of.OFP13: of13.OFPT_MULTIPART_REPLY, of.OFP10: of10.OFPT_STATS_REPLY}

# The fixed part of each type: a shorter message is malformed (8: the header alone).
MIN_LEN = {
    of.OFP13: {
        of13.OFPT_ERROR: of13.OFP_ERROR_MSG_SIZE,
        of13.OFPT_EXPERIMENTER: of13.OFP_EXPERIMENTER_HEADER_SIZE,
        of13.OFPT_FEATURES_REPLY: of13.OFP_SWITCH_FEATURES_SIZE,
        # os-ken's size stops at the match header; two pad bytes follow the match
        of13.OFPT_PACKET_IN: of13.OFP_PACKET_IN_SIZE + 2,
        of13.OFPT_FLOW_REMOVED: of13.OFP_FLOW_REMOVED_SIZE,
        of13.OFPT_PORT_STATUS: of13.OFP_PORT_STATUS_SIZE,
        of13.OFPT_PACKET_OUT: of13.OFP_PACKET_OUT_SIZE,
        of13.OFPT_FLOW_MOD: of13.OFP_FLOW_MOD_SIZE,
        of13.OFPT_GROUP_MOD: of13.OFP_GROUP_MOD_SIZE,
        of13.OFPT_PORT_MOD: of13.OFP_PORT_MOD_SIZE,
        of13.OFPT_TABLE_MOD: of13.OFP_TABLE_MOD_SIZE,
        of13.OFPT_MULTIPART_REQUEST: of13.OFP_MULTIPART_REQUEST_SIZE,
        of13.OFPT_MULTIPART_REPLY: of13.OFP_MULTIPART_REPLY_SIZE,
        of13.OFPT_QUEUE_GET_CONFIG_REQUEST: of13.OFP_QUEUE_GET_CONFIG_REQUEST_SIZE,
        of13.OFPT_QUEUE_GET_CONFIG_REPLY: of13.OFP_QUEUE_GET_CONFIG_REPLY_SIZE,
        of13.OFPT_ROLE_REQUEST: of13.OFP_ROLE_REQUEST_SIZE,
        of13.OFPT_ROLE_REPLY: of13.OFP_ROLE_REQUEST_SIZE,
        of13.OFPT_GET_ASYNC_REPLY: of13.OFP_ASYNC_CONFIG_SIZE,
        of13.OFPT_SET_ASYNC: of13.OFP_ASYNC_CONFIG_SIZE,
        of13.OFPT_METER_MOD: of13.OFP_METER_MOD_SIZE,
    },
    of.OFP10: {
        of10.OFPT_ERROR: of10.OFP_ERROR_MSG_SIZE,
        of10.OFPT_FEATURES_REPLY: of10.OFP_SWITCH_FEATURES_SIZE,
        of10.OFPT_PACKET_IN: of10.OFP_PACKET_IN_SIZE,
        of10.OFPT_FLOW_REMOVED: of10.OFP_FLOW_REMOVED_SIZE,
        of10.OFPT_PORT_STATUS: of10.OFP_PORT_STATUS_SIZE,
        of10.OFPT_PACKET_OUT: of10.OFP_PACKET_OUT_SIZE,
        of10.OFPT_FLOW_MOD: of10.OFP_FLOW_MOD_SIZE,
    },
}


def check(version: int, ver: int, t: int, ln: int) -> None:
    """Raise ProtocolError for a message of another version, an unknown type or a
    length below its type's fixed part."""
    if ver != version:
        raise of.ProtocolError(f"version 0x{ver:02x}, negotiated 0x{version:02x}")
    if t > MAX_TYPE[version]:
        raise of.ProtocolError(f"unknown message type {t}")
    if ln < MIN_LEN[version].get(t, 8):
        raise of.ProtocolError(f"type {t} message of {ln} bytes is truncated")


def split_messages(buf: bytearray, handle) -> int:
    """Call handle(msg) for each complete OpenFlow message at the start of buf.

    Returns the number of bytes consumed; raises ProtocolError on a length below 8.
    """
    off, n = 0, len(buf)
    while n - off >= 8:
        ln = buf[off + 2] << 8 | buf[off + 3]
        if ln < 8:
            raise of.ProtocolError(f"message length {ln} < 8")
        if n - off < ln:
            break
        msg = bytes(buf[off : off + ln])
        off += ln
        handle(msg)
    return off


def abort(transport) -> None:
    """Close at once, dropping what is queued (a transport without abort just closes)."""
    (getattr(transport, "abort", None) or transport.close)()
