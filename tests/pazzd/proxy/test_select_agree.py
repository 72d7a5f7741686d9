"""The entries a MODIFY or DELETE selects (OpenFlow 1.3 section 6.4) are computed twice: by
the proxy's IntendedTable on raw bytes (every entry the controller sent) and by the model's
cpc.flowmod.select on its own representation. For random tables and random FlowMods built
by os-ken, both must select the same entries (each entry has its own cookie)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

import ofwire as of
from cpc.model import Model
from cpc.topology import Topology
from pazzd.proxy.table import IntendedTable
from tests.pazzd.proxy.ofhelpers import flow_mod, ofp, ofpp, out

DPID = 7
COOKIE_BASE = 0x100  # entry i has cookie COOKIE_BASE + i
MODIFY = (ofp.OFPFC_MODIFY, ofp.OFPFC_MODIFY_STRICT)


def _match(in_port, proto, dst_len, tp_dst):
    kw = {}
    if in_port is not None:
        kw["in_port"] = in_port
    if proto is not None or dst_len is not None:
        kw["eth_type"] = 0x800
    if dst_len is not None:
        mask = (0xFFFFFFFF << (32 - dst_len)) & 0xFFFFFFFF
        kw["ipv4_dst"] = ("10.0.0.0", ".".join(str(mask >> s & 0xFF) for s in (24, 16, 8, 0)))
    if proto is not None:
        kw["ip_proto"] = proto
        if tp_dst is not None:
            kw["tcp_dst" if proto == 6 else "udp_dst"] = tp_dst
    return ofpp.OFPMatch(**kw)


matches = st.builds(
    _match,
    st.sampled_from([None, 1, 2]),
    st.sampled_from([None, 6, 17]),
    st.sampled_from([None, 8, 16, 24]),
    st.sampled_from([None, 80]),
)
entries = st.lists(
    st.tuples(
        st.sampled_from([0, 1]), st.sampled_from([10, 20]), matches, st.sampled_from([1, 2, 3])
    ),
    max_size=12,
)
selectors = st.tuples(
    st.sampled_from(
        [ofp.OFPFC_MODIFY, ofp.OFPFC_MODIFY_STRICT, ofp.OFPFC_DELETE, ofp.OFPFC_DELETE_STRICT]
    ),
    st.sampled_from([0, 1, ofp.OFPTT_ALL]),
    st.sampled_from([10, 20]),
    matches,
    st.sampled_from([(0, 0), (0x100, 0xFFFFFFFFFFFFFFFF), (0x100, 0x100), (0x1, 0x1)]),
    st.sampled_from([ofp.OFPP_ANY, 1, 2]),
)


@settings(max_examples=300, deadline=None)
@given(entries, selectors)
def test_proxy_and_model_select_the_same_entries(ents, sel) -> None:
    topo = Topology()
    topo.add_switch(DPID, ports=[1, 2, 3])
    model = Model(topo)
    model.build()
    table = IntendedTable()
    for i, (tid, prio, match, port) in enumerate(ents):
        raw = of.parse_flow_mod(
            flow_mod(
                i,
                table=tid,
                priority=prio,
                match=match,
                actions=[out(port)],
                cookie=COOKIE_BASE + i,
            )
        )
        table.apply(raw, 0)
        model.apply(of.flowmod_to_cpc(DPID, raw))
    cmd, tid, prio, match, (cookie, mask), out_port = sel
    if cmd in MODIFY and tid == ofp.OFPTT_ALL:
        tid = 0  # a switch refuses it: OFPTT_ALL is for deletes only (OpenFlow 1.2+)
    raw = of.parse_flow_mod(
        flow_mod(
            99,
            command=cmd,
            table=tid,
            priority=prio,
            match=match,
            cookie=cookie,
            cookie_mask=mask,
            out_port=out_port,
            actions=[out(1), out(2), out(3)] if cmd in MODIFY else None,
        )
    )
    strict = cmd in (ofp.OFPFC_MODIFY_STRICT, ofp.OFPFC_DELETE_STRICT)
    by_proxy = sorted(e.cookie for e in table.select(raw, strict))
    before = {e.cookie for e in model.entries(DPID)}
    assert before == {e.cookie for e in table.entries.values()}  # same tables to start with
    model.apply(of.flowmod_to_cpc(DPID, raw))
    after = model.entries(DPID)
    if cmd in MODIFY:  # the modified entries output to 1, 2 and 3: no entry did before
        by_model = sorted(e.cookie for e in after if e.instructions.outputs() == {1, 2, 3})
    else:
        by_model = sorted(before - {e.cookie for e in after})
    assert by_proxy == by_model
