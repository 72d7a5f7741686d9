"""The scale-out messages in Thrift's compact protocol (tester/model.thrift, the tester's one
schema): sFlow datagrams as a collector checked them, model changes and fault evidence."""

from __future__ import annotations

from thriftpy2.protocol import TCompactProtocolFactory
from thriftpy2.utils import deserialize, serialize

from cpc import ofctl
from cpc.rules import FlowEntry, Group
from tester.remote import THRIFT
from tester.sflow import FlowSample

__all__ = [
    "THRIFT",
    "change_of_op",
    "changes_of_update",
    "decode",
    "encode",
    "sample_from_wire",
    "sample_to_wire",
]

_COMPACT = TCompactProtocolFactory()
_FLOW_FIELDS = FlowSample.__slots__


def encode(obj) -> bytes:
    return serialize(obj, _COMPACT)


def decode(cls, data: bytes):
    """A Thrift struct of class cls from bytes; ValueError when they do not parse."""
    try:
        return deserialize(cls(), data, _COMPACT)
    except Exception as e:  # thriftpy2 raises several kinds for truncated or foreign bytes
        raise ValueError(f"not a {cls.__name__} message: {e}") from None


def sample_to_wire(s: FlowSample):
    return THRIFT.WireFlowSample(*(getattr(s, f) for f in _FLOW_FIELDS))


def sample_from_wire(w) -> FlowSample:
    return FlowSample(*(getattr(w, f) for f in _FLOW_FIELDS))


def change_of_op(op: tuple):
    """A cpc Update.ops item as a ModelChange."""
    if op[0] == "group":
        g: Group = op[1]
        return THRIFT.ModelChange("group", g.dpid, ofctl.format_group(g))
    if op[0] == "ungroup":
        return THRIFT.ModelChange("ungroup", op[1], "", op[2])
    _, dpid, port, up = op
    return THRIFT.ModelChange("port_up" if up else "port_down", dpid, "", port)


def entry_change(kind: str, e: FlowEntry):
    return THRIFT.ModelChange(kind, e.dpid, ofctl.format_flow(e))


def changes_of_update(upd) -> list:
    """What a replica needs to make an update of its own copy: the group and port
    changes first, then the entries removed and added, in order."""
    out = [change_of_op(op) for op in upd.ops]
    for old, new in upd.changes:
        if old is not None:
            out.append(entry_change("remove", old))
        if new is not None:
            out.append(entry_change("add", new))
    return out
