"""pazzlab.dpactions: what a packet becomes from the datapath actions of ofproto/trace
(strings as Open vSwitch 3.1 prints them, stock and patched)."""

from pazzlab.dpactions import dp_ports, outcomes

PORTS = {1: "LOCAL", 2: 1, 3: 2, 4: 3, 5: 4}


def test_stock_and_patched_forms_agree():
    stock = "3,push_vlan(vid=5,pcp=0),4"
    patched = (
        "verify_push,verify_port(0x08102000),verify_rule(0xe8ea),clone(verify_push,verify_pop,3),"
        "push_vlan(vid=5,pcp=0),verify_push,verify_pop,4"
    )
    assert outcomes(stock, PORTS) == outcomes(patched, PORTS) == [(2, ()), (3, (("vlans", (5,)),))]
    # The probe mark's actions (ovs-patches 0006, 0008) at edge ingress and egress.
    probes = (
        "verify_unmark,verify_push,verify_port(0x08102000),verify_rule(0xe8ea),"
        "clone(verify_push,verify_sample(sample=0.1%,actions(userspace(pid=0,sFlow(vid=0,"
        "pcp=0,output=7,verify_report))),marked(meter(0),userspace(pid=0,sFlow(vid=0,pcp=0,"
        "output=7,verify_probe_report)))),verify_drop_marked,verify_pop,3),push_vlan(vid=5,pcp=0),"
        "verify_push_marked,verify_pop,4"
    )
    assert outcomes(probes, PORTS) == outcomes(stock, PORTS)


def test_sets_clone_and_controller():
    acts = (
        "set(eth(src=02:00:00:00:00:01)),clone(set(ipv4(dst=10.1.1.1)),2),"
        "pop_vlan,userspace(pid=0,controller(reason=1)),1"
    )
    mac = ("eth.src", 0x020000000001)
    assert outcomes(acts, PORTS) == [
        (1, (mac, ("ipv4.dst", 0x0A010101))),
        ("CONTROLLER", (mac, ("vlans", (-1,)))),
        ("LOCAL", (mac, ("vlans", (-1,)))),
    ]
    assert outcomes("drop", PORTS) == []


def test_dp_ports():
    show = "netdev@ovs-netdev: hit:0 missed:0\n  br0:\n    br0 65534/1: (tap)\n    p1 1/2: (tap)\n"
    assert dp_ports(show, "br0") == {1: "LOCAL", 2: 1}
