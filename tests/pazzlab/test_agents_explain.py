"""The acceptance differences that follow from an entry only the switch holds (an ADD the
model refused, e.g. naming a fast-failover group): OVS checks a MODIFY's groups only when
it selects an entry, and an ADD with CHECK_OVERLAP against every entry of its priority.
The messages are the generator's own (sequences 5468 and 8339, pazzlab.agentgen)."""

from __future__ import annotations

from os_ken.ofproto import ofproto_v1_3 as ofp
from os_ken.ofproto import ofproto_v1_3_parser as p

from pazzlab.agentgen import DP, serialize
from pazzlab.agents import explain_acceptance, lose

BAD_OUT_GROUP, OVERLAP = (2, 9), (5, 3)


def _fm(command, match, actions, table=0, priority=100, flags=0, out_port=ofp.OFPP_ANY):
    ins = [p.OFPInstructionActions(ofp.OFPIT_APPLY_ACTIONS, actions)]
    m = p.OFPFlowMod(
        DP,
        table_id=table,
        command=command,
        priority=priority,
        match=p.OFPMatch(**match),
        instructions=ins,
        flags=flags,
        out_port=out_port,
        out_group=ofp.OFPG_ANY,
        buffer_id=ofp.OFP_NO_BUFFER,
    )
    return serialize(m, 1)


LOST = _fm(
    ofp.OFPFC_ADD,
    {"eth_type": 0x0800, "ipv4_dst": "192.168.0.1"},
    [p.OFPActionGroup(2), p.OFPActionOutput(3)],
    table=2,
)
MODIFY = _fm(
    ofp.OFPFC_MODIFY,
    {"eth_type": 0x0800, "ipv4_dst": "192.168.0.1"},
    [p.OFPActionGroup(1), p.OFPActionOutput(4)],
    table=2,
)


def _lost(*msgs):
    lost: list = []
    for m in msgs:
        lose(lost, m, refused=True)
    return lost


def test_modify_selecting_a_lost_entry_is_explained():
    assert explain_acceptance(BAD_OUT_GROUP, None, (), MODIFY, _lost(LOST)) == "not-modelled"


def test_modify_selecting_nothing_stays_unexplained():
    other = _fm(
        ofp.OFPFC_MODIFY,
        {"eth_type": 0x0800, "ipv4_dst": "192.168.0.2"},
        [p.OFPActionGroup(1)],
        table=2,
    )
    assert explain_acceptance(BAD_OUT_GROUP, None, (), other, _lost(LOST)) == "unexplained"
    assert explain_acceptance(BAD_OUT_GROUP, None, (), MODIFY, []) == "unexplained"


def test_lost_entry_deleted_no_longer_explains():
    lost = _lost(LOST)
    delete = _fm(ofp.OFPFC_DELETE, {}, [], table=2)
    lose(lost, delete, refused=False)
    assert lost == []
    assert explain_acceptance(BAD_OUT_GROUP, None, (), MODIFY, lost) == "unexplained"


def test_overlap_with_a_lost_entry_is_explained():
    lost = _lost(
        _fm(
            ofp.OFPFC_ADD,
            {"eth_type": 0x0800, "ip_proto": 6, "ipv4_src": "10.0.0.1"},
            [p.OFPActionGroup(2)],
        )
    )
    add = _fm(
        ofp.OFPFC_ADD,
        {
            "in_port": 9,
            "eth_type": 0x0800,
            "vlan_vid": (0x1000, 0x1000),
            "ipv4_dst": ("10.0.0.0", "255.255.0.0"),
        },
        [],
        flags=ofp.OFPFF_CHECK_OVERLAP,
    )
    assert explain_acceptance(OVERLAP, None, (), add, lost) == "not-modelled"
    # another priority does not overlap on the switch either
    lower = _fm(
        ofp.OFPFC_ADD,
        {"eth_type": 0x0800, "ipv4_dst": ("10.0.0.0", "255.255.0.0")},
        [],
        priority=10,
        flags=ofp.OFPFF_CHECK_OVERLAP,
    )
    assert explain_acceptance(OVERLAP, None, (), lower, lost) == "unexplained"
