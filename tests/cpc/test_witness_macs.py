"""Witness MACs: the hosts' own where the caller knows them and the set allows them,
otherwise two different locally administered unicast addresses; never a group source
while the set holds an individual one. Host MACs found in the model's rules are those the
hand-written rules below name."""

from __future__ import annotations

from cpc.model import Model
from cpc.ofctl import parse_flow
from cpc.topology import Topology
from cpc.witness import host_macs, representative

A, B = 0x0A1B2C3D4E01, 0x0A1B2C3D4E02


def _model(rules: list[tuple[int, str]]) -> Model:
    topo = Topology()
    topo.add_switch(1, "s1", ports=(1, 2, 3))
    topo.add_switch(2, "s2", ports=(1, 2))
    topo.add_link((1, 1), (2, 1))
    for p in ((1, 2), (1, 3), (2, 2)):
        topo.add_edge(p)
    m = Model(topo)
    m.add_entries([parse_flow(text, dpid, "add").entry() for dpid, text in rules], [])
    return m


def test_witness_takes_the_hosts_macs_where_the_set_allows_them():
    m = _model([])
    sp = m.space
    u = sp.field_bdd("ipv4_dst", 0x0A000100, 0xFFFFFF00)
    h = representative(sp, u, src_mac=A, dst_mac=B)
    assert (h["eth_src"], h["eth_dst"]) == (A, B)
    d = representative(sp, u)
    assert (d["eth_src"], d["eth_dst"]) == (0x020000000001, 0x020000000002)
    # a set that fixes the source keeps it; a group address is never taken as a source
    fixed = u & sp.field_bdd("eth_src", 0x0C0000000009, (1 << 48) - 1)
    assert representative(sp, fixed, src_mac=A)["eth_src"] == 0x0C0000000009
    assert representative(sp, u, src_mac=0x01005E000001)["eth_src"] == 0x020000000001
    group_or_a = u & (
        sp.field_bdd("eth_src", 0x01005E000001, (1 << 48) - 1)
        | sp.field_bdd("eth_src", A, (1 << 48) - 1)
    )
    assert representative(sp, group_or_a)["eth_src"] == A
    only_group = u & sp.field_bdd("eth_src", 0x01005E000001, (1 << 48) - 1)
    assert representative(sp, only_group)["eth_src"] == 0x01005E000001  # still in the set


def _mac(v: int) -> str:
    return ":".join(f"{v:012x}"[i : i + 2] for i in range(0, 12, 2))


def test_host_macs_are_the_ones_the_rules_name():
    m = _model(
        [
            (1, f"priority=10,dl_dst={_mac(A)},actions=output:2"),  # host A behind s1:2
            (2, f"priority=10,in_port=2,dl_src={_mac(B)},actions=output:1"),  # B at s2:2
            (1, "priority=10,dl_dst=0a:00:00:00:00:07,actions=output:1"),  # a link, not a host
            (1, "priority=10,dl_dst=0a:00:00:00:00:08,actions=output:3"),  # two MACs on s1:3:
            (1, "priority=11,dl_dst=0a:00:00:00:00:09,actions=output:3"),  # left out
            (1, "priority=12,dl_dst=01:00:5e:00:00:01,actions=output:2"),  # a group address
            (2, "priority=13,dl_dst=0a:00:00:00:00:0a,actions=mod_vlan_vid:5,output:2"),
        ]
    )
    assert host_macs(m) == {(1, 2): A, (2, 2): B}
