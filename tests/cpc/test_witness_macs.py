"""Witness MACs: the hosts' own where the caller knows them and the set allows them,
otherwise two different locally administered unicast addresses; never a group source
while the set holds an individual one. Host MACs found in the model's rules are those the
hand-written rules below name."""

from __future__ import annotations

from cpc.model import Model
from cpc.ofctl import parse_flow
from cpc.topology import Topology
from cpc.witness import host_macs, representative, witness_from

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


def test_the_models_table_takes_the_configured_macs_over_the_rules_and_follows_updates():
    m = _model([(1, f"priority=10,dl_dst={_mac(A)},actions=output:2")])
    m.build()
    assert m.host_macs() == {(1, 2): A}
    m.set_host_macs({(1, 2): B, (1, 3): "0a:00:00:00:00:33"})
    assert m.host_macs() == {(1, 2): B, (1, 3): 0x0A0000000033}
    m.set_host_macs({})
    m.apply(parse_flow(f"priority=10,in_port=2,dl_src={_mac(B)},actions=output:1", 2, "add"))
    assert m.host_macs() == {(1, 2): A, (2, 2): B}  # the new rule's host, after the update
    try:
        m.set_host_macs({(1, 2): "01:00:5e:00:00:01"})
    except ValueError as e:
        assert "group" in str(e)
    else:
        raise AssertionError("a group address was taken as a host's MAC")


def test_a_witness_goes_from_the_ingress_hosts_mac_to_the_delivering_hosts():
    """witness_from against the model's own trace: every witness is in the set, carries
    the source MAC of the host behind its ingress, and the destination MAC of the host
    behind the port the trace delivers it to."""
    m = _model(
        [
            (1, "priority=10,ip,nw_dst=10.0.2.0/24,actions=output:1"),
            (2, "priority=10,ip,nw_dst=10.0.2.0/24,actions=output:2"),
            (1, "priority=10,ip,nw_dst=10.0.3.0/24,actions=output:3"),
        ]
    )
    m.build()
    macs = {(1, 2): A, (1, 3): 0x0A0000000013, (2, 2): B}
    m.set_host_macs(macs)
    sp = m.space
    for net, out in ((0x0A000200, (2, 2)), (0x0A000300, (1, 3))):
        u = sp.field_bdd("ipv4_dst", net, 0xFFFFFF00)
        hdr, paths = witness_from(m, (1, 2), u)
        assert sp.contains(u, hdr)
        assert [tuple(d.egress) for d in paths if d.kind == "egress"] == [out]
        assert (hdr["eth_src"], hdr["eth_dst"]) == (A, macs[out])
    # a set that fixes another destination MAC keeps it (the witness stays in the set)
    u = sp.field_bdd("ipv4_dst", 0x0A000200, 0xFFFFFF00) & sp.field_bdd(
        "eth_dst", 0x0C0000000001, (1 << 48) - 1
    )
    hdr, _ = witness_from(m, (1, 2), u)
    assert (hdr["eth_src"], hdr["eth_dst"]) == (A, 0x0C0000000001)
