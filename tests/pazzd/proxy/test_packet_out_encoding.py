"""ofwire.packet_out is the one PACKET_OUT encoder (the proxy's own packet-outs, fuzz
probes through the proxy): its bytes must be os-ken's serialization of the same message."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

import ofwire as of
from tests.pazzd.proxy.ofhelpers import DPATH, ofp, ofpp, ser

ports = st.one_of(
    st.integers(1, 0xFFFFFF00), st.sampled_from([ofp.OFPP_CONTROLLER, ofp.OFPP_LOCAL])
)


@settings(max_examples=200, deadline=None)
@given(
    st.integers(0, 0xFFFFFFFF),
    ports,
    st.binary(min_size=0, max_size=200),
    # os-ken loses the data of a PACKET_OUT without actions (it writes the data where the
    # fixed part goes): at least one action
    st.one_of(st.none(), st.lists(st.integers(1, 64), min_size=1, max_size=4)),
)
def test_packet_out_is_os_kens(xid, in_port, data, outputs):
    if outputs is None:  # through the tables, as probes go
        mine = of.packet_out(xid, in_port, data)
        actions = [ofpp.OFPActionOutput(ofp.OFPP_TABLE, 0)]
    else:
        mine = of.packet_out(xid, in_port, data, b"".join(of.output_action(p, 0) for p in outputs))
        actions = [ofpp.OFPActionOutput(p, 0) for p in outputs]
    theirs = ofpp.OFPPacketOut(
        DPATH, buffer_id=ofp.OFP_NO_BUFFER, in_port=in_port, actions=actions, data=data
    )
    assert mine == ser(theirs, xid)
