"""pazzlab.lab on real patched OVS: the 4-switch grid is a Mininet network whose bridges,
ports and hosts are what the demo and the daemon's integration test rely on, traffic
crosses it on the generator's rules, and stop() removes exactly what the lab created,
also after a failed start."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from pazzd.wiring import netns_packet_socket
from pazzlab.lab import Lab
from pazzlab.ovs import LINK_MTU

from .helpers import lab_leftovers, lab_prefix

pytestmark = pytest.mark.ovs


@pytest.fixture
def prefix():
    return lab_prefix()


def _get(lab: Lab, table: str, record: str, column: str) -> str:
    return lab.ovs.vsctl("--if-exists", "get", table, record, column).strip().strip('"')


def test_the_lab_is_a_mininet_network_of_patched_bridges(prefix, tmp_path):
    from mininet.net import Mininet

    lab = Lab(prefix, tmp_path / "lab", kind="grid", size=2, rules=100, acls=2)
    try:
        lab.start()
        assert isinstance(lab.net, Mininet)
        assert sorted(s.name for s in lab.net.switches) == [lab.br(d) for d in (1, 2, 3, 4)]
        for d in lab.topo.switches:
            br = lab.br(d)
            assert _get(lab, "bridge", br, "datapath_type") == "netdev"
            assert _get(lab, "bridge", br, "fail_mode") == "secure"
            assert _get(lab, "bridge", br, "other_config:datapath-id") == f"{d:016x}"
            assert _get(lab, "bridge", br, "other_config:verify-tagging") == "true"
            assert lab.ovs.vsctl("get", "bridge", br, "sflow").strip() != "[]"
        assert f"127.0.0.1:{lab.sflow_port}" in lab.ovs.vsctl("list", "sflow")
        edge = set(lab.wl.hosts.values())
        assert set(lab.ports) == set(lab.topo.links) | edge
        for (d, p), ifname in lab.ports.items():
            assert len(ifname) <= 15
            assert _get(lab, "interface", ifname, "ofport") == str(p)
            is_edge = _get(lab, "interface", ifname, "other_config:verify-edge") == "true"
            assert is_edge == ((d, p) in edge), ifname
            if (d, p) not in edge:
                assert _get(lab, "interface", ifname, "mtu") == str(LINK_MTU)
                assert Path(f"/sys/class/net/{ifname}/mtu").read_text().strip() == str(LINK_MTU)
        for name, h in lab.hosts.items():
            ns = h["ns"]
            assert ns.name == lab.net[lab.host_node(name)].name
            assert Path("/run/netns", ns.name).exists()
            addr = ns.run("ip", "-o", "-4", "addr", "show", "dev", "eth0")
            assert f"inet {lab.host_ip(name)}/8" in addr
            assert ns.run("cat", "/sys/class/net/eth0/address").strip() == lab.host_mac(name)
            assert ns.run("sysctl", "-n", "net.ipv6.conf.eth0.disable_ipv6").strip() == "1"

        # h1 -> h2 across the grid on the generator's rules.
        assert lab.install_rules() == len(lab.wl.entries)
        h1, h2 = lab.hosts["h1"], lab.hosts["h2"]
        h2net = sorted(n for n, o in lab.wl.prefixes.items() if o == "h2")[0]
        dst = ".".join(str((h2net + 9) >> s & 0xFF) for s in (24, 16, 8, 0))

        def rx():
            return int(h2["ns"].run("cat", "/sys/class/net/eth0/statistics/rx_packets"))

        before = rx()
        pkt = bytes(
            Ether(src=h1["mac"], dst=h2["mac"])
            / IP(src=h1["ip"], dst=dst)
            / UDP(sport=7000, dport=80)
            / (b"x" * 32)
        )
        with netns_packet_socket(h1["ns"].name, "eth0") as s:
            for _ in range(5):
                s.send(pkt)
        deadline = time.monotonic() + 5
        while rx() < before + 5 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert rx() >= before + 5
    finally:
        lab.stop()
    assert lab_leftovers(lab.tag) == []


def test_stop_after_a_failed_start_removes_what_the_lab_made(prefix, tmp_path, monkeypatch):
    def fail(self):
        raise RuntimeError("injected")

    monkeypatch.setattr(Lab, "_check_ports", fail)
    lab = Lab(prefix, tmp_path / "lab", kind="grid", size=2, rules=100, acls=2)
    try:
        with pytest.raises(RuntimeError, match="injected"):
            lab.start()
        assert lab_leftovers(lab.tag)  # hosts, links and bridges were up when it failed
    finally:
        lab.stop()
    assert lab_leftovers(lab.tag) == []
