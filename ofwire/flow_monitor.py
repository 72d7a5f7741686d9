"""Flow-monitor replies (Nicira / ONF extension) with the proxy's rule ID taken out.

A controller that monitors flows (NXFMF_ACTIONS / ONFFMF_ACTIONS) gets every added,
modified and deleted entry with its actions; those carry the proxy's set_verify_rule:ID and
must be given back as the controller sent them. os-ken can build the ONF request but does
not parse the replies, so this is done with struct, on exactly what is needed.

On an OpenFlow 1.3 connection the replies are experimenter multipart replies
(OFPMP_EXPERIMENTER), body = experimenter (4) + exp_type (4) + updates:
- ONF EXT-187 (0x4f4e4600, 1870). Open vSwitch 3.1 speaks only this one on 1.3 (it
  rejects NXST_FLOW_MONITOR there) and encodes a full update as nx/onf_flow_update_full
  (24 bytes), an ofp_match of `match_len` bytes padded to 8, then *instructions*.
- Nicira NXST_FLOW_MONITOR (0x2320, 2), as older Open vSwitch sends it on 1.3: the same
  24-byte header, an NXM match of `match_len` bytes padded to 8, then *actions*.
An update is `length` (2) + `event` (2) + ...: events 0-2 (added, deleted, modified) are
full updates, 3 is abbreviated (length 8, the xid of the FlowMod that made the change).
"""

from __future__ import annotations

import struct

from ofwire.actions import check_instructions, walk_tlvs
from ofwire.consts import NX_VENDOR_ID, OFPMP_EXPERIMENTER, VERIFY_ACTION_LEN
from ofwire.framing import HDR, ProtocolError, header
from ofwire.verify_action import is_verify_rule_action, strip_rule_id

ONF_VENDOR_ID = 0x4F4E4600
ONFST_FLOW_MONITOR = 1870
NXST_FLOW_MONITOR = 2
EVENT_ABBREV = 3
FULL_LEN = 24  # nx_flow_update_full / onf_flow_update_full

# (experimenter, exp_type) -> what follows the match in a full update
MONITOR_REPLIES = {
    (ONF_VENDOR_ID, ONFST_FLOW_MONITOR): "instructions",
    (NX_VENDOR_ID, NXST_FLOW_MONITOR): "actions",
}


def monitor_kind(msg: bytes) -> str | None:
    """ "instructions" / "actions" if msg (an OpenFlow 1.3 MULTIPART_REPLY) is a flow-monitor
    reply of the ONF / Nicira kind, else None."""
    if len(msg) < 24 or struct.unpack_from("!H", msg, 8)[0] != OFPMP_EXPERIMENTER:
        return None
    return MONITOR_REPLIES.get(struct.unpack_from("!II", msg, 16))


def strip_actions(acts: bytes) -> tuple[bytes, int | None]:
    """(action list without its first set_verify_rule:ID, ID or None)."""
    for _t, off, ln in walk_tlvs(acts, "action"):
        rid = is_verify_rule_action(acts, off) if ln == VERIFY_ACTION_LEN else None
        if rid is not None:
            return acts[:off] + acts[off + ln :], rid
    return acts, None


def strip_updates(body: bytes, kind: str, drop_xids=()) -> tuple[bytes, int]:
    """The updates of a flow-monitor reply body (after experimenter and exp_type) with the
    rule ID taken out of every full update, and abbreviated updates whose xid is in
    drop_xids (the proxy's own FlowMods) left out. Returns (body, IDs removed).

    Raises ProtocolError on a malformed update (the switch is then disconnected)."""
    parts = []
    removed = 0
    off, n = 0, len(body)
    while off < n:
        if n - off < 4:
            raise ProtocolError("truncated flow-monitor update")
        ln, event = struct.unpack_from("!HH", body, off)
        if ln < 8 or ln % 8 or off + ln > n:
            raise ProtocolError(f"flow-monitor update with a bad length {ln}")
        upd = body[off : off + ln]
        off += ln
        if event == EVENT_ABBREV:
            if ln != 8:
                raise ProtocolError(f"abbreviated flow-monitor update of {ln} bytes")
            if struct.unpack_from("!I", upd, 4)[0] not in drop_xids:
                parts.append(upd)
            continue
        if event > EVENT_ABBREV:
            raise ProtocolError(f"flow-monitor update event {event}")
        if ln < FULL_LEN:
            raise ProtocolError(f"full flow-monitor update of {ln} bytes")
        mlen = struct.unpack_from("!H", upd, 12)[0]
        start = FULL_LEN + (mlen + 7) // 8 * 8
        if start > ln:
            raise ProtocolError(f"flow-monitor update match of {mlen} bytes overruns")
        tail = bytes(upd[start:])
        if kind == "instructions":
            check_instructions(tail)
            tail2, rid = strip_rule_id(tail)
        else:
            tail2, rid = strip_actions(tail)
        if rid is not None:
            removed += 1
            upd = struct.pack("!H", start + len(tail2)) + upd[2:start] + tail2
        parts.append(upd)
    return b"".join(parts), removed


def strip_reply(msg: bytes, kind: str, drop_xids=()) -> bytes | None:
    """The flow-monitor reply msg as the controller must see it; None when it carried only
    updates to leave out and is an unsolicited one (xid 0), so there is nothing to send."""
    body, removed = strip_updates(msg[24:], kind, drop_xids)
    if len(body) == len(msg) - 24:
        return msg
    if not body and len(msg) > 24 and header(msg)[3] == 0:
        return None
    return HDR.pack(msg[0], msg[1], 24 + len(body), header(msg)[3]) + msg[8:24] + body
