"""Whatever a controller sends, the commit path contains its errors:
the switch session stays, and the model holds exactly the representable entries of the
intended table."""

from __future__ import annotations

import struct

import ofwire as of
from cpc.model import Model
from cpc.topology import Topology
from pazzd.proxy import Proxy, ProxyConfig
from tests.pazzd.proxy.ofhelpers import flow_mod, ofp, ofpp, out
from tests.pazzd.proxy.test_robustness import connected, frames


def _model() -> Model:
    t = Topology()
    t.add_switch(7, ports=[1, 2, 3])
    m = Model(t)
    m.build()
    return m


def _bad_set_field_fm(xid: int, oxm_len: int) -> bytes:
    """A FlowMod whose APPLY_ACTIONS holds a set_field whose OXM length is inconsistent
    (well-framed TLVs, so it passes the receive-time checks)."""
    good = flow_mod(xid, match=ofpp.OFPMatch(eth_type=0x800, ipv4_dst="10.0.0.9"), actions=[out(2)])
    fm = of.parse_flow_mod(good)
    # set_field: type 25, len 16, OXM eth_dst (class 0x8000, field 3) with a bad length.
    oxm_hdr = (0x8000 << 16) | (3 << 9) | oxm_len
    act = struct.pack("!HHI", ofp.OFPAT_SET_FIELD, 16, oxm_hdr) + bytes(8)
    instr = struct.pack("!HH4x", ofp.OFPIT_APPLY_ACTIONS, 8 + len(act)) + act
    return of.flow_mod_with_instructions(good, fm, instr)


def _keys_of_model(m: Model, dpid: int) -> set:
    return {(e.table, e.priority, e.cookie) for e in m.entries(dpid)}


def test_malformed_set_field_is_contained():
    model = _model()
    proxy = Proxy(ProxyConfig(audit_delay=-1, audit_interval=0), model=model)
    try:
        s, sw, up = connected(proxy)
        msgs = [
            flow_mod(
                1,
                match=ofpp.OFPMatch(eth_type=0x800, ipv4_dst="10.0.0.1"),
                actions=[out(1)],
                cookie=1,
            ),
            _bad_set_field_fm(2, 0x30),
            _bad_set_field_fm(3, 0),
            flow_mod(
                4,
                match=ofpp.OFPMatch(eth_type=0x800, ipv4_dst="10.0.0.2"),
                actions=[out(2)],
                cookie=4,
            ),
        ]
        s.from_controller(b"".join(msgs))
        sent = frames(bytes(sw.data))
        barrier = [m for m in sent if m[1] == of.OFPT_BARRIER_REQUEST]
        assert len(barrier) == 1
        s.from_switch(of.message(4, of.OFPT_BARRIER_REPLY, of.header(barrier[0])[3]))
        assert not s.closed and not sw.closed  # the switch session survived
        table = proxy.tables[7].entries
        assert len(table) == 3  # the two malformed FlowMods share a key; the last stays
        representable = set()
        for e in table.values():
            try:
                of.cpc_instructions(e.instr)
                of.cpc_match(e.mkey)
            except Exception:
                continue
            representable.add((e.table, e.priority, e.cookie))
        assert representable == {(0, 100, 1), (0, 100, 4)}
        assert _keys_of_model(model, 7) == representable
    finally:
        proxy.store.close()


def test_malformed_group_bucket_is_contained():
    model = _model()
    proxy = Proxy(ProxyConfig(audit_delay=-1, audit_interval=0), model=model)
    try:
        s, sw, up = connected(proxy)
        oxm_hdr = (0x8000 << 16) | (3 << 9) | 0x30
        act = struct.pack("!HHI", ofp.OFPAT_SET_FIELD, 16, oxm_hdr) + bytes(8)
        bucket = struct.pack("!HHII4x", 16 + len(act), 0, ofp.OFPP_ANY, ofp.OFPG_ANY) + act
        bad = of.message(4, of.OFPT_GROUP_MOD, 5, struct.pack("!HBxI", 0, 0, 11) + bucket)
        good_bucket = struct.pack("!HHII4x", 32, 0, ofp.OFPP_ANY, ofp.OFPG_ANY)
        good_bucket += struct.pack("!HHIH6x", ofp.OFPAT_OUTPUT, 16, 2, 0)
        good = of.message(4, of.OFPT_GROUP_MOD, 6, struct.pack("!HBxI", 0, 0, 12) + good_bucket)
        s.from_controller(bad + good)
        barrier = [m for m in frames(bytes(sw.data)) if m[1] == of.OFPT_BARRIER_REQUEST]
        s.from_switch(of.message(4, of.OFPT_BARRIER_REPLY, of.header(barrier[0])[3]))
        assert not s.closed and not sw.closed
        assert set(proxy.groups[7]) == {11, 12}
        assert set(k for k in model._groups if k[0] == 7) == {(7, 12)}
    finally:
        proxy.store.close()
