"""Message types per OpenFlow version (1.0 and 1.3): the known types, the fixed length of
each, and the replies; `check` is what the proxy asks of every relayed message.

Types and sizes come from os-ken's constants (`os_ken.ofproto.ofproto_v1_3`, `_v1_0`;
importing them does not pull in eventlet). The rest of ofwire keeps its own constants
(ofwire.consts): pazzd imports it at start-up, before it knows whether the proxy runs, and
os-ken's ofproto package takes about 0.4 s to import; import this module on its own.
"""

from __future__ import annotations

from os_ken.ofproto import ofproto_v1_0 as of10
from os_ken.ofproto import ofproto_v1_3 as of13

from ofwire.consts import OFP10, OFP13
from ofwire.framing import ProtocolError

# Messages of the switch that can answer a request of the proxy's own.
REPLY_TYPES = {
    OFP13: {
        of13.OFPT_ERROR,
        of13.OFPT_ECHO_REPLY,
        of13.OFPT_FEATURES_REPLY,
        of13.OFPT_GET_CONFIG_REPLY,
        of13.OFPT_MULTIPART_REPLY,
        of13.OFPT_BARRIER_REPLY,
        of13.OFPT_ROLE_REPLY,
        of13.OFPT_GET_ASYNC_REPLY,
    },
    OFP10: {
        of10.OFPT_ERROR,
        of10.OFPT_ECHO_REPLY,
        of10.OFPT_FEATURES_REPLY,
        of10.OFPT_GET_CONFIG_REPLY,
        of10.OFPT_STATS_REPLY,
        of10.OFPT_BARRIER_REPLY,
    },
}
MAX_TYPE = {OFP13: of13.OFPT_METER_MOD, OFP10: of10.OFPT_QUEUE_GET_CONFIG_REPLY}
BARRIER_REQ = {OFP13: of13.OFPT_BARRIER_REQUEST, OFP10: of10.OFPT_BARRIER_REQUEST}
# Replies in parts (the flags' low byte at offset 11 says more follow).
STATS_REPLY = {OFP13: of13.OFPT_MULTIPART_REPLY, OFP10: of10.OFPT_STATS_REPLY}

# The fixed part of each type: a shorter message is malformed (8: the header alone).
MIN_LEN = {
    OFP13: {
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
    OFP10: {
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
        raise ProtocolError(f"version 0x{ver:02x}, negotiated 0x{version:02x}")
    if t > MAX_TYPE[version]:
        raise ProtocolError(f"unknown message type {t}")
    if ln < MIN_LEN[version].get(t, 8):
        raise ProtocolError(f"type {t} message of {ln} bytes is truncated")
