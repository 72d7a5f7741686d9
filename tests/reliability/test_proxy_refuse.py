"""What the proxy cannot forward faithfully is answered with an
OFPT_ERROR, never with a disconnect, and never half-applied."""

from __future__ import annotations

import struct

import pytest

import ofwire as of
from pazzd.proxy import Proxy, ProxyConfig
from tests.pazzd.proxy.ofhelpers import flow_mod, ofp, ofpp
from tests.pazzd.proxy.test_robustness import connected, frames
from tests.reliability.test_proxy_commit import _model


@pytest.fixture
def proxy():
    p = Proxy(ProxyConfig(audit_delay=-1, audit_interval=0), model=_model())
    yield p
    p.store.close()


def _verify_action(sub: int, arg: int = 0) -> bytes:
    return struct.pack("!HHIH2xI", ofp.OFPAT_EXPERIMENTER, 16, of.NX_VENDOR_ID, sub, arg)


def _fm_with_actions(xid: int, acts: bytes, table: int = 0) -> bytes:
    base = flow_mod(xid, table=table, match=ofpp.OFPMatch(eth_type=0x800, ipv4_dst="10.0.0.5"))
    fm = of.parse_flow_mod(base)
    instr = struct.pack("!HH4x", ofp.OFPIT_APPLY_ACTIONS, 8 + len(acts)) + acts
    return of.flow_mod_with_instructions(base, fm, instr)


def _errors(up) -> list[tuple[int, int, int]]:
    out_ = []
    for f in frames(bytes(up.data)):
        if f[1] == of.OFPT_ERROR:
            out_.append((of.header(f)[3], *struct.unpack_from("!HH", f, 8)))
    return out_


@pytest.mark.parametrize("sub", sorted(of.VERIFY_SUBTYPES))
def test_controller_verify_actions_are_refused(proxy, sub):
    s, sw, up = connected(proxy)
    output = struct.pack("!HHIH6x", ofp.OFPAT_OUTPUT, 16, 1, 0)
    s.from_controller(_fm_with_actions(41, output + _verify_action(sub, 99)))
    assert not [f for f in frames(bytes(sw.data)) if f[1] == of.OFPT_FLOW_MOD]
    assert _errors(up) == [(41, of.OFPET_BAD_ACTION, of.OFPBAC_EPERM)]
    assert not s.closed and not up.closed and not sw.closed
    # The session goes on: a plain FlowMod is forwarded (with the proxy's ID).
    s.from_controller(_fm_with_actions(42, output))
    fms = [f for f in frames(bytes(sw.data)) if f[1] == of.OFPT_FLOW_MOD]
    assert len(fms) == 1
    assert of.strip_rule_id(of.parse_flow_mod(fms[0]).instr)[1] is not None


def test_verify_action_in_a_group_bucket_is_refused(proxy):
    s, sw, up = connected(proxy)
    acts = struct.pack("!HHIH6x", ofp.OFPAT_OUTPUT, 16, 2, 0) + _verify_action(62)
    bucket = struct.pack("!HHII4x", 16 + len(acts), 0, ofp.OFPP_ANY, ofp.OFPG_ANY) + acts
    s.from_controller(of.message(4, of.OFPT_GROUP_MOD, 43, struct.pack("!HBxI", 0, 0, 3) + bucket))
    assert not [f for f in frames(bytes(sw.data)) if f[1] == of.OFPT_GROUP_MOD]
    assert _errors(up) == [(43, of.OFPET_BAD_ACTION, of.OFPBAC_EPERM)]
    assert not up.closed


def _big_fm(xid: int, length: int, apply: bool = True) -> bytes:
    """A legal FlowMod of exactly `length` bytes (output actions, or a long WRITE list)."""
    base = _fm_with_actions(xid, b"")
    n = (length - len(base)) // 16
    acts = struct.pack("!HHIH6x", ofp.OFPAT_OUTPUT, 16, 1, 0) * n
    fm = of.parse_flow_mod(base)
    it = ofp.OFPIT_APPLY_ACTIONS if apply else ofp.OFPIT_WRITE_ACTIONS
    instr = struct.pack("!HH4x", it, 8 + len(acts)) + acts
    msg = of.flow_mod_with_instructions(base, fm, instr)
    assert len(msg) == length, (len(msg), length)
    return msg


def test_flowmod_without_room_for_the_rule_id_gets_an_error(proxy):
    s, sw, up = connected(proxy)
    base = len(_fm_with_actions(0, b""))
    top = base + 16 * ((0xFFFF - base) // 16)  # the largest legal FlowMod of this shape
    s.from_controller(_big_fm(51, top))
    assert _errors(up) == [(51, of.OFPET_BAD_REQUEST, of.OFPBRC_BAD_LEN)]
    assert not up.closed and not s.closed
    assert not [f for f in frames(bytes(sw.data)) if f[1] == of.OFPT_FLOW_MOD]
    # Without an APPLY_ACTIONS the ID needs 24 bytes.
    s.from_controller(_big_fm(52, top, apply=False))
    assert _errors(up)[-1] == (52, of.OFPET_BAD_REQUEST, of.OFPBRC_BAD_LEN)
    # Those that fit are forwarded with their ID, within 65,535 bytes.
    up.data.clear()
    s.from_controller(_big_fm(53, top - 16))
    s.from_controller(_big_fm(54, top - 16, apply=False))
    fms = [f for f in frames(bytes(sw.data)) if f[1] == of.OFPT_FLOW_MOD]
    assert [len(f) for f in fms] == [top, top - 16 + 24]
    assert top - 16 + 24 <= 0xFFFF
    assert not _errors(up) and not up.closed


def test_an_unknown_message_type_gets_an_error_and_the_session_stays(proxy):
    """As Open vSwitch answers it: OFPET_BAD_REQUEST / OFPBRC_BAD_TYPE with the message's
    xid, nothing forwarded, and the controller's next FlowMod still goes through."""
    s, sw, up = connected(proxy)
    sw.data.clear()
    s.from_controller(of.message(4, 200, 77, b"\x01\x02\x03\x04"))
    assert _errors(up) == [(77, of.OFPET_BAD_REQUEST, of.OFPBRC_BAD_TYPE)]
    assert s.up_ready and not up.closed and not sw.closed
    assert bytes(sw.data) == b""
    s.from_controller(flow_mod(78, match=ofpp.OFPMatch(eth_type=0x800, ipv4_dst="10.0.0.9")))
    assert [f[1] for f in frames(bytes(sw.data))][:1] == [of.OFPT_FLOW_MOD]
