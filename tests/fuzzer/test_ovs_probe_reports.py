"""The fuzzer's probes, injected from a host's namespace as the lab does, are reported 1/1
by real patched OVS while the network samples at 1/1000.

The 2x2 grid of tests/fuzzer/test_ovs_fuzz.py (the workload's flows, hosts on port 5), sFlow
at 1/1000 on every bridge, h1's port other_config:verify-probe=trust as pazzlab sets it.
The fuzzer probes h1 -> every other host through a raw socket in h1's namespace, with
confirmation copies of routed headers among its probes. Oracles: the switches' own counts
of marked packets that left an edge port (their probe-report meters), their edge ports'
counters (a probe ends at the exit, ovs-patches 0008: none is sent to a host) and the
model's tags.
"""

from __future__ import annotations

import re
import time

import pytest

from cpc.fields import parse_header
from cpc.model import Model
from fuzzer.craft import probe_seq
from fuzzer.engine import Fuzzer
from fuzzer.inject import RawSocketInjector
from pazzd.wiring import netns_packet_socket
from tester.packet import is_report, parse_frame
from tester.sflow import decode
from tests.fuzzer.test_ovs_fuzz import grid_net  # noqa: F401  (the fixture)

pytestmark = pytest.mark.ovs


def dotted(ip: int) -> str:
    return ".".join(str(ip >> s & 0xFF) for s in (24, 16, 8, 0))


def _edge_tx(ovs, bridges, hosts) -> int:
    return sum(
        ovs.port_stats(bridges[d])[p]["tx_packets"] + ovs.port_stats(bridges[d])[p]["tx_dropped"]
        for d, p in hosts
    )


def _marked(ovs, bridges) -> int:
    """Marked packets that left an edge port of any bridge (ofproto/verify-probe-reports)."""
    return sum(
        int(re.search(r"marked=(\d+)", ovs.appctl("ofproto/verify-probe-reports", br)).group(1))
        for br in sorted(set(bridges.values()))
    )


def test_namespace_injected_probes_are_reported_one_for_one(ovs, grid_net):  # noqa: F811
    wl, bridges, sflow, ifindex, of, hosts = grid_net
    (rec,) = ovs.vsctl("--bare", "--columns=_uuid", "list", "sflow").split()  # shared by all
    ovs.vsctl("set", "sflow", rec, "sampling=1000")
    ns, outer = hosts[(1, 5)]
    ovs.vsctl("set", "interface", outer, "other_config:verify-probe=trust")
    model = Model(wl.topo)
    model.add_entries(wl.entries, wl.groups)
    others = [h for h in sorted(hosts) if h != (1, 5)]
    fz = Fuzzer(model, pairs=[((1, 5), e) for e in others], seed=5, subscribe=False)
    # Fuzz probes mostly test space the network drops; confirmation copies of routed
    # headers (the workload's /24s of the other hosts) leave at an edge port.
    for net, host in list(wl.prefixes.items())[:40]:
        if wl.hosts[host] != (1, 5):
            assert fz.confirm((1, 5), parse_header(f"nw_dst={dotted(net + 9)},udp_dst=53"), 3)
    inj = RawSocketInjector(sockets={(1, 5): netns_packet_socket(ns.name, "eth0")})
    try:
        before = _edge_tx(ovs, bridges, hosts), _marked(ovs, bridges)
        sent = 0
        while sent < 600:
            probes = fz.next_probes(50)
            fz.record(probes)
            inj.inject((1, 5), [fz.crafter.frame(p.header, p.seq) for p in probes])
            sent += len(probes)
            time.sleep(0.02)
        time.sleep(0.5)
        delivered = _edge_tx(ovs, bridges, hosts) - before[0]
        left = _marked(ovs, bridges) - before[1]
    finally:
        inj.close()
    time.sleep(1.5)  # sFlow datagrams are flushed once a second
    sflow.stop()

    seqs = set()
    reports = []
    for d in sflow.datagrams:
        for s in decode(d).flows:
            if is_report(s) and s.header and probe_seq(s.header) is not None:
                reports.append(s)
    egress_of = {v: k for k, v in ifindex.items()}
    for s in reports:
        pf = parse_frame(s.header)
        assert pf.has_verify and pf.marked and s.sampling_rate == 1
        exp = model.expected(egress_of[s.output], pf.header)
        assert any(
            e.verify_port == pf.verify_port and e.verify_rule == pf.verify_rule for e in exp
        ), pf.header
        seqs.add(probe_seq(s.header))
    # Every probe that left an edge port was reported, once per edge port it left on, and
    # none of them was sent on to a host.
    assert fz.confirm_sent > 50 and left > 50, (fz.confirm_sent, left)
    assert delivered == 0, delivered
    assert left == len(reports), (left, len(reports), sent)
    print(f"{sent} probes sent, {left} left an edge port, {len(seqs)} distinct reported")
