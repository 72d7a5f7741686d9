"""The userspace datapath after a route is deleted and added again while megaflows overlap
(ovs-patches 0007).

One bridge, routes in one table: 10.0.2.0/24 and 10.0.3.0/24 out of port 2, the host route
10.0.2.77/32 out of port 3. The sequence that broke stock OVS 3.1:
1. a packet to 10.0.3.5 (a megaflow with a /24 mask: its subtable comes first);
2. a packet to 10.0.2.77 (an exact-match megaflow, out 3);
3. the /32 deleted: the revalidator changes that megaflow to out 2;
4. packets to 10.0.2.78: a /24-mask megaflow for 10.0.2.0/24 (out 2) that overlaps it;
5. the /32 added again.
In 5 the revalidator modifies the exact-match megaflow. Stock OVS found the flow to modify
by a classifier lookup of its key, which returned the /24 one: that one got out 3 and the
exact-match flow kept out 2, so every packet to 10.0.2.77 left by port 2 until the flow
expired, while ofproto/trace said port 3.

Oracles, each round on a fresh OVS: where the next packets to 10.0.2.77 and 10.0.2.78 leave
(port counters) against `ofproto/trace`, and every datapath megaflow's actions against
`ofproto/trace` of the flow's own key.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import time

import pytest
from scapy.all import IP, UDP, Ether, raw

from pazzlab.dpactions import dp_ports
from tests.ovs.ovsenv import Netns, VethPair, unique_name

pytestmark = pytest.mark.ovs

ROUTES = (
    "priority=24,ip,nw_dst=10.0.2.0/24,actions=output:2",
    "priority=24,ip,nw_dst=10.0.3.0/24,actions=output:2",
)
HOST_ROUTE = "priority=32,ip,nw_dst=10.0.2.77,actions=output:3"
SENDER = (
    "import socket,sys,time\n"
    "s=socket.socket(socket.AF_PACKET,socket.SOCK_RAW)\n"
    "s.bind(('eth0',0))\n"
    "f=bytes.fromhex(sys.argv[1])\n"
    "for _ in range(int(sys.argv[2])):\n"
    "    s.send(f); time.sleep(0.002)\n"
)


def _frame(dst: str, sport: int) -> bytes:
    eth = Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02")
    return raw(eth / IP(src="10.0.9.1", dst=dst) / UDP(sport=sport, dport=2000))


def _trace_actions(ovs, flow: str) -> str:
    out = ovs.appctl("ofproto/trace", "br1", flow)
    return re.search(r"^Datapath actions: (.*)$", out, re.M).group(1).strip()


def _stale_megaflows(ovs) -> list[str]:
    """The datapath flows whose actions differ from ofproto/trace of their own key (in_port
    and IPv4 destination: all that these routes match)."""
    ofport = dp_ports(ovs.appctl("dpif/show"), "br1")
    bad = []
    for line in ovs.appctl("dpctl/dump-flows").splitlines():
        m = re.match(r"recirc_id\(0\),in_port\((\d+)\),.*ipv4\(dst=([\d.]+).*actions:(.*)$", line)
        if not m:
            continue
        want = _trace_actions(ovs, f"in_port={ofport[int(m.group(1))]},ip,nw_dst={m.group(2)}")
        if want != m.group(3).strip():
            bad.append(f"{line.strip()}  (ofproto/trace: {want})")
    return bad


def _one_round(ovs, h1: Netns) -> dict:
    def send(dst: str, n: int = 5, sport: int = 1000) -> None:
        h1.run(shutil.which("python3") or "python3", "-c", SENDER, _frame(dst, sport).hex(), str(n))

    def tx() -> tuple[int, int]:
        st = ovs.port_stats("br1")
        return st[2]["tx_packets"], st[3]["tx_packets"]

    def settle() -> None:
        ovs.appctl("revalidator/wait")
        ovs.appctl("revalidator/wait")

    for r in ROUTES:
        ovs.ofctl("add-flow", "br1", r)
    send("10.0.3.5")
    ovs.ofctl("add-flow", "br1", HOST_ROUTE)
    settle()
    send("10.0.2.77")
    ovs.ofctl("del-flows", "br1", "--strict", HOST_ROUTE.partition(",actions")[0])
    settle()
    send("10.0.2.78", n=200, sport=2000)
    ovs.ofctl("add-flow", "br1", HOST_ROUTE)
    settle()
    out = {"stale": _stale_megaflows(ovs)}
    for dst in ("10.0.2.77", "10.0.2.78"):
        a = tx()
        send(dst, n=10, sport=3000)
        time.sleep(0.3)
        b = tx()
        out[dst] = (b[0] - a[0], b[1] - a[1])
    out["trace_77"] = ovs.appctl("ofproto/trace", "br1", "in_port=1,ip,nw_dst=10.0.2.77")
    out["megaflows"] = ovs.appctl("dpctl/dump-flows")
    return out


@pytest.mark.parametrize("attempt", range(3))
def test_route_deleted_and_added_again_with_overlapping_megaflows(
    ovs_factory, cleanup, attempt
) -> None:
    ovs = ovs_factory()
    ovs.add_bridge("br1", dpid=1)
    hosts = []
    for i in (1, 2, 3):
        ns = Netns(unique_name("h"))
        cleanup.push(ns.delete)
        link = VethPair.host(ns, "eth0", f"10.0.9.{i}/24", mac=f"02:00:00:00:00:0{i}")
        cleanup.push(link.delete)
        ovs.add_port("br1", link.outer, ofport=i)
        hosts.append(ns)
    try:
        got = _one_round(ovs, hosts[0])
    except subprocess.CalledProcessError as e:
        raise AssertionError(f"{e.cmd}: {e.stderr}\n{ovs.log_tail()}") from e
    assert "output:3" in got["trace_77"], got["trace_77"]
    assert got["stale"] == [], got["stale"]
    assert got["10.0.2.77"] == (0, 10), got  # by the /32, as ofproto/trace says
    assert got["10.0.2.78"] == (10, 0), got  # by the /24
