"""The tester on real patched OVS: a 2x2 grid of verify-tagging userspace bridges.

    h1 -5- s1 -2====4- s2 -5- h2        ports 1..4 = N, E, S, W links (pazzdata.workloads.grid(2)),
           3          3                  port 5 = the host (verify-edge), one namespace each
           |          |
           1          1
    h3 -5- s3 -2====4- s4 -5- h4

One ovs-vswitchd with four netdev bridges, veth links (MTU 1508 for the Verify shim), sFlow
at sampling 1 from every bridge to the tester's SflowCollector on 127.0.0.1, the IfMap read
from OVSDB. The rules are a generated routing workload with ACLs (pazzdata.workloads), installed
with ovs-ofctl and loaded into the model. Frames sent with raw sockets from the host
namespaces are judged by the Tester; every fault class is injected with ovs-ofctl, one at
a time, and the intended flow tables are restored between tests.
"""

from __future__ import annotations

import asyncio
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
from scapy.all import IP, TCP, UDP, Dot1Q, Ether, Raw

from cpc.model import Model
from cpc.ofctl import format_flow, format_group, parse_flow, split_top
from cpc.results import RuleRef
from pazzd.wiring import netns_packet_socket
from pazzdata import workloads
from pazzlab.ovs import wire_links
from tester.collector import SflowCollector
from tester.detect import BLACKHOLE, TYPE_A, TYPE_P_ACTION, TYPE_P_MATCH, hop_bits
from tester.engine import Tester
from tester.ifmap import IfMap
from tester.packet import OVS_REPORT_INDEX_BASE, is_report, parse_frame
from tester.sflow import decode
from tester.store import FaultStore
from tester.timers import BlackholeMonitor, CriticalFlow
from tests.ovs.ovsenv import Cleanup, Netns, OvsInstance, VethPair, unique_name

pytestmark = pytest.mark.ovs

AGENT = "127.0.0.1"  # sFlow agent=lo
HIDDEN_COOKIE = 0xBAD
FLUSH_S = 1.3  # OVS sends sFlow datagrams about once a second


def host_mac(dpid: int) -> str:
    return f"02:00:00:00:00:{dpid:02x}"


def host_ip(dpid: int) -> str:
    # Prefix i (10.0.i.0/24) belongs to host h(i % 4 + 1): h<dpid> owns 10.0.<dpid-1>.0/24.
    return f"10.0.{dpid - 1}.1"


def dotted(ip: int) -> str:
    return socket.inet_ntoa(ip.to_bytes(4, "big"))


class Grid:
    """The running network, the intended rules, and the model built from the same entries."""

    def __init__(self, ovs: OvsInstance, wl, model: Model, ifmap: IfMap, sflow_port: int):
        self.ovs, self.wl, self.model, self.ifmap, self.sflow_port = (
            ovs,
            wl,
            model,
            ifmap,
            sflow_port,
        )
        self.topo = wl.topo
        self.sockets: dict[int, socket.socket] = {}
        self.ifindex: dict[tuple[int, int], int] = {}  # (dpid, port) -> kernel ifindex
        self.flow_files: dict[int, Path] = {}

    @staticmethod
    def br(dpid: int) -> str:
        return f"br{dpid}"

    def restore(self) -> None:
        """Put back exactly the intended flow entries on every bridge."""
        for dpid, path in self.flow_files.items():
            self.ovs.ofctl("replace-flows", self.br(dpid), str(path))
        self.ovs.appctl("revalidator/purge")

    def frame(
        self, src: int, dst_ip: int, sport: int, dport: int = 80, vlan=None, size: int = 0
    ) -> bytes:
        """A UDP frame from host src (its MAC and address) to dst_ip, to the owner's MAC;
        optionally 802.1Q-tagged, and padded to `size` bytes of Ethernet frame."""
        dst_host = self.wl.hosts[self.wl.prefixes[dst_ip & 0xFFFFFF00]][0]
        eth = Ether(src=host_mac(src), dst=host_mac(dst_host))
        if vlan is not None:
            eth = eth / Dot1Q(vlan=vlan)
        pkt = eth / IP(src=host_ip(src), dst=dotted(dst_ip)) / UDP(sport=sport, dport=dport)
        pad = max(16, size - len(pkt))
        return bytes(pkt / Raw(b"pazz" * (pad // 4) + b"z" * (pad % 4)))

    def send(self, src: int, frames) -> None:
        s = self.sockets[src]
        for f in frames:
            s.send(f)

    def route(self, dpid: int, net: int):
        for e in self.model.entries(dpid):
            if e.priority == workloads.ROUTE_PRIORITY and e.match.get("ipv4_dst") == (
                net,
                0xFFFFFF00,
            ):
                return e
        raise LookupError((dpid, net))

    def egress_of(self, dst_ip: int):
        return self.wl.hosts[self.wl.prefixes[dst_ip & 0xFFFFFF00]]

    def rules_at(self):
        by: dict[int, list[RuleRef]] = {}
        for e in self.model.entries():
            by.setdefault(e.dpid, []).append(RuleRef(e.table, e.priority, e.cookie, e.rule_id))
        return lambda dpid: by.get(dpid, ())

    def poll(self, dpid: int, header: dict) -> list[str]:
        """What a flow-table poller finds: entries of the switch that the model does not
        know (by identity) and that match the header."""
        known = {e.identity() for e in self.model.entries(dpid)}
        found = []
        for line in self.ovs.dump_flows(self.br(dpid), "--no-names").splitlines():
            if "actions=" not in line:
                continue
            e = parse_flow(line, dpid).entry()
            if e.identity() not in known and e.match.contains(header, 0):
                found.append(line.strip())
        return found


def _free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind((AGENT, 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def grid(ovs_prefix):
    # OvsInstance.start waits its turn for the userspace datapath (pazzlab.ovs.DatapathLock).
    t0 = time.monotonic()
    c = Cleanup()
    try:
        rundir = tempfile.mkdtemp(prefix="pazz-tester-")
        c.push(shutil.rmtree, rundir, True)
        ovs = OvsInstance(ovs_prefix, rundir, name="tester")
        c.push(ovs.stop)
        ovs.start()
        wl = workloads.generate("grid", 2, 100, rule_ids=True, acls=2)
        topo = wl.topo
        for d in sorted(topo.switches):
            ovs.add_bridge(Grid.br(d), dpid=d, other_config={"verify-tagging": "true"})
        ports = wire_links(ovs, topo, Grid.br, c)
        namespaces = {}
        for d in sorted(topo.switches):
            ns = Netns(unique_name(f"h{d}"))
            c.push(ns.delete)
            namespaces[d] = ns
            link = VethPair.host(ns, "eth0", f"{host_ip(d)}/24", mac=host_mac(d))
            c.push(link.delete)
            ovs.add_port(Grid.br(d), link.outer, 5, {"verify-edge": "true"})
            ports[(d, 5)] = link.outer
        sflow_port = _free_udp_port()
        cmd = ["--", "--id=@s", "create", "sflow", "agent=lo", f'target="{AGENT}:{sflow_port}"']
        cmd += ["sampling=1", "header=128", "polling=1"]
        for d in sorted(topo.switches):
            cmd += ["--", "set", "bridge", Grid.br(d), "sflow=@s"]
        ovs.vsctl(*cmd)

        model = Model(topo)
        model.add_entries(wl.entries, wl.groups)
        model.build()
        ifmap = IfMap()
        vsctl = str(Path(ovs_prefix) / "bin/ovs-vsctl")

        def run_vsctl(argv, **kw):
            return subprocess.run([vsctl, *argv[1:]], **kw)

        ifmap.load_ovsdb(AGENT, f"unix:{ovs.db_sock}", run=run_vsctl)
        g = Grid(ovs, wl, model, ifmap, sflow_port)
        for port, name in ports.items():
            g.ifindex[port] = int(Path(f"/sys/class/net/{name}/ifindex").read_text())
        for grp in wl.groups:
            ovs.ofctl("add-group", Grid.br(grp.dpid), format_group(grp))
        for d in sorted(topo.switches):
            path = Path(rundir) / f"flows-{d}.txt"
            path.write_text("".join(format_flow(e) + "\n" for e in wl.entries if e.dpid == d))
            g.flow_files[d] = path
            ovs.ofctl("add-flows", Grid.br(d), str(path))
        for d, ns in namespaces.items():
            s = netns_packet_socket(ns.name, "eth0")
            c.push(s.close)
            g.sockets[d] = s
        g.setup_s = time.monotonic() - t0
        yield g
    finally:
        c.run()


class Run:
    """One Tester (fresh fault store) behind an SflowCollector, inside an asyncio loop.

    Datagrams that OVS flushes for traffic of an earlier test are drained first.
    """

    def __init__(self, grid: Grid, tmp_path: Path, **kw):
        self.grid = grid
        self.store = FaultStore(str(tmp_path / "faults.db"))
        self.tester = Tester(grid.model, self.store, grid.ifmap, rules_at=grid.rules_at(), **kw)
        self.datagrams: list[bytes] = []
        self.live = False
        self.collector = SflowCollector(self._handle, hosts=(AGENT,), port=grid.sflow_port)

    def _handle(self, data: bytes) -> None:
        if self.live:
            self.datagrams.append(data)
            self.tester.process_datagram(data)

    async def __aenter__(self) -> Run:
        await self.collector.start()
        await asyncio.sleep(FLUSH_S)  # let reports of earlier traffic arrive and be dropped
        self.live = True
        return self

    async def __aexit__(self, *exc) -> None:
        self.collector.close()  # the store stays open for the test's checks

    async def until(self, pred, timeout: float = 6.0) -> bool:
        deadline = time.monotonic() + timeout
        while not pred():
            if time.monotonic() > deadline:
                return False
            await asyncio.sleep(0.05)
        return True

    async def reports(self, n: int, timeout: float = 6.0) -> None:
        """Wait until n more reports than now have been handled (and a little for extras)."""
        target = self.tester.stats.reports + n
        ok = await self.until(lambda: self.tester.stats.reports >= target, timeout)
        assert ok, (self.tester.stats.as_dict(), target)


def flows_between(grid: Grid, per_pair: int = 3):
    """(src dpid, dst ip) for every host to a few prefixes of every other host."""
    out = []
    nets = sorted(grid.wl.prefixes)
    for src in sorted(grid.topo.switches):
        for net in nets:
            dst = grid.egress_of(net)[0]
            if dst == src:
                continue
            if sum(1 for s, ip in out if s == src and grid.egress_of(ip)[0] == dst) < per_pair:
                out.append((src, net + 10 + src))
    return out


def test_no_fault_without_injection(grid, tmp_path):
    """Every host to prefixes of every other host: plain, 802.1Q-tagged (the Verify header
    goes in front of the VLAN tag) and full-size frames (1514 bytes, 1522 with the shim on
    the 1508-MTU links). Twice each: the second copy is answered from the cache."""
    pairs = flows_between(grid)
    frames = {}
    for i, (s, ip) in enumerate(pairs):
        frames[(s, ip, "plain")] = grid.frame(s, ip, 1000 + i)
        if i % 3 == 0:
            frames[(s, ip, "vlan")] = grid.frame(s, ip + 1, 1000 + i, vlan=10 + s)
        if i % 3 == 1:
            frames[(s, ip, "big")] = grid.frame(s, ip + 2, 1000 + i, size=1514)

    async def main():
        async with Run(grid, tmp_path) as r:
            for (s, _, _), f in frames.items():
                grid.send(s, [f, f])
            await r.reports(2 * len(frames))
            await asyncio.sleep(0.3)
            return r

    r = asyncio.run(main())
    st = r.tester.stats
    assert st.reports == 2 * len(frames), st.as_dict()
    assert st.consistent == st.reports and st.fault_samples == 0, st.as_dict()
    assert st.unknown_interface == 0 and st.undecodable_reports == 0 and st.malformed == 0
    assert st.lost_datagrams == 0 and st.agent_restarts == 0
    assert r.store.faults() == []
    # OVSDB's ifindex is the kernel's, for every link and host port.
    for port, ifindex in grid.ifindex.items():
        assert grid.ifmap.lookup(AGENT, 0, ifindex) == port
    # The second copy of every frame was answered from the per-class cache.
    assert st.cache_hits >= len(frames) and st.cache_misses <= len(frames)
    # Reports carry the data source 2:0x820000+sub_id and the egress port's ifIndex; the
    # ordinary ingress samples keep 2:1000+sub_id. One sub-agent per bridge.
    reports, ingress, subs = [], [], set()
    for data in r.datagrams:
        dg = decode(data)
        assert dg.agent == AGENT
        subs.add(dg.sub_agent)
        for s in dg.flows:
            (reports if is_report(s) else ingress).append((dg.sub_agent, s))
    assert len(reports) == st.reports and ingress
    vlans = set()
    for sub, s in reports:
        assert s.source_type == 2 and s.source_index == OVS_REPORT_INDEX_BASE + sub
        assert grid.ifmap.lookup(AGENT, sub, s.output)[1] == 5
        pf = parse_frame(s.header)
        assert pf.has_verify and pf.complete
        vlans.add(pf.header["vlan_vid"] & 0xFFF)
    assert vlans == {0} | {10 + s for (s, _, kind) in frames if kind == "vlan"}
    for sub, s in ingress:
        assert s.source_type == 2 and s.source_index == 1000 + sub
    assert len(subs) == 4


def _inject_and_judge(grid, tmp_path, inject, traffic, n_reports, while_injected=None, **kw):
    """Run the traffic before and after inject(); return (run, faults before, faults after).

    while_injected(run) runs before the intended flow tables are restored (a poller's view).
    """

    async def main():
        async with Run(grid, tmp_path, **kw) as r:
            for s, f in traffic:
                grid.send(s, [f])
            await r.reports(n_reports)
            await asyncio.sleep(0.3)
            before = r.store.faults()
            inject()
            grid.ovs.appctl("revalidator/purge")
            for s, f in traffic:
                grid.send(s, [f])
            await r.until(lambda: r.store.faults(), timeout=6.0)
            await asyncio.sleep(FLUSH_S)  # the rest of the traffic's reports
            faults = r.store.faults()
            if while_injected is not None:
                await while_injected(r)
            return r, before, faults

    try:
        return asyncio.run(main())
    finally:
        grid.restore()


def test_hidden_higher_priority_rule_is_type_p_match(grid, tmp_path):
    # h1 -> a prefix of h2: s1 -> s2 on one path. A hidden /32 rule on s1 with the same
    # output and another identity (priority 100, cookie 0xbad, no rule ID).
    net = next(n for n in sorted(grid.wl.prefixes) if grid.wl.prefixes[n] == "h2")
    target = net + 77
    x = 1
    route = grid.route(x, net)
    acts = ",".join(split_top(format_flow(route).partition(",actions=")[2])[1:])
    hidden = f"priority=100,cookie={HIDDEN_COOKIE:#x},ip,nw_dst={dotted(target)},actions={acts}"
    traffic = [(1, grid.frame(1, target, 2000 + i)) for i in range(3)]
    traffic += [(1, grid.frame(1, net + 5, 2100))]  # same prefix, not the hidden /32
    hdr = parse_frame(traffic[0][1]).header
    found = {}

    learned = {}

    async def poll_then_learn(r):
        # The poller's part: dump the candidates' flow tables while the fault is live.
        req = r.tester.localization_queue.get_nowait()
        assert req.kind == TYPE_P_MATCH
        found.update({d: grid.poll(d, hdr) for d in req.candidates})
        r.tester.answer_localization(req.fault_id, {"dpid": x, "entry": found[x]})
        learned["polled"] = req.fault_id
        # Then the model learns the entry as intended. It has the route's action, so the
        # /32 stays in its class and only the entry it matches (and its Verify_Rule)
        # changes, in a new model version. Its reports are consistent again and must
        # resolve the fault.
        grid.model.add_flow(x, hidden)
        try:
            for s, f in traffic[:3]:
                grid.send(s, [f])
            await r.reports(3)
            learned["consistent"] = r.tester.stats.consistent
            r.tester.tick(time.time() + 1.1)
            learned["resolved"] = r.store.faults("resolved")
        finally:
            grid.model.apply(
                parse_flow(f"priority=100,ip,nw_dst={dotted(target)}", x, "delete_strict")
            )

    r, before, faults = _inject_and_judge(
        grid,
        tmp_path,
        lambda: grid.ovs.ofctl("add-flow", grid.br(x), hidden),
        traffic,
        4,
        poll_then_learn,
        resolve_after=1.0,
    )
    assert before == []
    assert faults, r.tester.stats.as_dict()
    assert {f.kind for f in faults} == {TYPE_P_MATCH}
    every = faults
    # s2's per-hop sample of the packet (entered from s1) is a fault before s2: s1 alone
    # (its own record when it comes before the exit's report, else counted as explained).
    hop = [f for f in faults if f.localization.get("sampled_at") == "hop"]
    faults = [f for f in faults if f not in hop]
    st = r.tester.stats
    assert faults and st.hop_fault_samples + st.hop_explained >= 1, st.as_dict()
    # Patched OVS's reports of a real fault pass the plausibility checks (tester.plausible).
    assert st.samples_implausible == 0, st.as_dict()
    for f in hop:
        assert f.egress == (2, 4) and f.localization["candidates"] == [1]
        assert f.location == "path:1"
    for f in faults:
        assert f.header["ipv4_dst"] == target
        assert f.egress == (2, 5)
        # A hidden entry can't be reproduced from intended ones: the path's switches stay
        # candidates, and polling them finds the entry at s1 only.
        assert set(f.localization["candidates"]) == {1, 2}
        assert f.location == "path:1,2"
        assert (f.actual["verify_port"], f.actual["verify_rule"]) not in {
            (e["verify_port"], e["verify_rule"]) for e in f.expected
        }
    assert [d for d, lines in found.items() if lines] == [x]
    assert r.store.get(learned["polled"]).polled["dpid"] == x
    assert f"cookie={HIDDEN_COOKIE:#x}" in found[x][0]
    # The other header of the same prefix is still consistent.
    assert r.tester.stats.consistent >= 4 + 1
    # Once the model knows the entry, the /32's reports are consistent and the fault,
    # recorded under the class id of the older model version, resolves.
    assert learned["consistent"] >= 4 + 1 + 3
    assert sorted(f.id for f in learned["resolved"]) == sorted(f.id for f in every)


def test_changed_output_port_is_type_p_action(grid, tmp_path):
    """s2's route to h1 is output:4 (straight to s1); modified to output:3 it goes to s4,
    whose route to h1 is a SELECT group over s2 (port 1) and s3 (port 4). OVS picks the
    bucket by a hash of the packet's headers, not its in_port, so a header that s4 sends
    back to s2 would loop. The test first sends candidate frames in at h4 and keeps one
    that s4 sends on to s3.

    Then the model learns the change as intended (a new model version): the same traffic
    is consistent again, judged on fresh answers, and the fault resolves."""
    net = next(n for n in sorted(grid.wl.prefixes) if grid.wl.prefixes[n] == "h1")
    x = 2
    route = grid.route(x, net)
    assert route.instructions.apply == (("output", 4),)
    frames = {sp: grid.frame(2, net + 9, sp) for sp in range(3000, 3012)}
    s3_hop = hop_bits(3, 2)  # s3 entered from s4
    text = format_flow(route).replace("output:4", "output:3")

    async def main():
        async with Run(grid, tmp_path, resolve_after=1.0) as r:
            st = r.tester.stats
            for f in frames.values():
                grid.send(4, [f])  # probes: the same headers, in at h4
            await r.reports(len(frames))
            via_s3 = sorted(
                pf.header["tp_src"]
                for data in r.datagrams
                for smp in decode(data).flows
                if is_report(smp)
                for pf in (parse_frame(smp.header),)
                if pf.verify_port & s3_hop == s3_hop
            )
            assert via_s3, "s4's SELECT group sent every probe via s2"
            frame = frames[via_s3[0]]
            grid.send(2, [frame])
            await r.reports(1)
            assert st.fault_samples == 0 and r.store.faults() == []

            grid.ovs.ofctl("mod-flows", "--strict", grid.br(x), text)
            grid.ovs.appctl("revalidator/purge")
            grid.send(2, [frame])
            await r.reports(1)
            faults = r.store.faults()

            version, misses, consistent = grid.model.version, st.cache_misses, st.consistent
            try:
                grid.model.add_flow(x, text)  # the controller meant it after all
                assert grid.model.version > version
                grid.send(2, [frame])
                await r.reports(1)
                assert st.consistent == consistent + 1 and st.cache_misses == misses + 1
                t = time.time()
                r.tester.tick(t + 1.1)
                resolved = r.store.faults("resolved")
            finally:
                grid.model.add_flow(x, format_flow(route))
            return r, faults, resolved

    try:
        r, faults, resolved = asyncio.run(main())
    finally:
        grid.restore()
    # Further on (s3, then s1) the per-hop samples arrive where the model brings the header
    # only from other ingresses: Type-a there, the misrouting switch among the candidates
    # (or counted as explained once the class has a fault open).
    downstream = [f for f in faults if f.kind == TYPE_A]
    for f in downstream:
        assert f.location.startswith("hop:") and x in f.localization["candidates"], f
    faults = [f for f in faults if f.kind != TYPE_A]
    # The exit's report and s4's per-hop sample (s2 sent it down a link the model never
    # sends it down) are one fault: Type-p action at s2.
    assert faults and {f.kind for f in faults} == {TYPE_P_ACTION}, faults
    assert {f.location for f in faults} == {f"dpid:{x}"}
    assert r.tester.stats.samples_implausible == 0, r.tester.stats.as_dict()
    for f in faults:
        assert f.localization["culprit"] == x
        if f.egress == (1, 5):
            assert f.localization["missing_hop"] == 1  # s1 entered from s2 (in_port 2)
        else:
            assert f.egress == (4, 1)  # s4 entered from s2
    assert {f.id for f in faults} <= {f.id for f in resolved}


def test_hidden_rule_admitting_acl_dropped_traffic_is_type_a(grid, tmp_path):
    # An ACL at the destination's edge switch drops (src prefix, proto, port) to one of its
    # host's prefixes. Sent from the host that owns the ACL's source prefix.
    wl = grid.wl
    acl = next(
        e
        for e in grid.model.entries()
        if e.priority == workloads.ACL_PRIORITY
        and wl.prefixes[e.match.get("ipv4_src")[0]] != wl.prefixes[e.match.get("ipv4_dst")[0]]
    )
    src_net = acl.match.get("ipv4_src")[0]
    dst_net = acl.match.get("ipv4_dst")[0]
    proto = acl.match.get("ip_proto")[0]
    dport = acl.match.get("tp_dst")[0]
    src = wl.hosts[wl.prefixes[src_net]][0]
    x = acl.dpid
    assert wl.hosts[wl.prefixes[dst_net]][0] == x != src
    l4 = TCP(sport=4000, dport=dport, flags="S") if proto == 6 else UDP(sport=4000, dport=dport)
    dropped = bytes(
        Ether(src=host_mac(src), dst=host_mac(x))
        / IP(src=dotted(src_net + 3), dst=dotted(dst_net + 9))
        / l4
        / Raw(b"acl!" * 4)
    )
    allowed = grid.frame(src, dst_net + 9, 4001)  # same prefix, no ACL match
    # The hidden entry: the ACL's match above it, forwarding like the route.
    hidden = format_flow(acl).replace(
        f"priority={workloads.ACL_PRIORITY},cookie=0x20", f"priority=2000,cookie={HIDDEN_COOKIE:#x}"
    )
    hidden = hidden.replace(f"set_verify_rule:{acl.rule_id}", "output:5")
    traffic = [(src, dropped), (src, allowed)]
    r, before, faults = _inject_and_judge(
        grid,
        tmp_path,
        lambda: grid.ovs.ofctl("add-flow", grid.br(x), hidden),
        traffic,
        1,
    )
    assert before == []
    assert faults and {f.kind for f in faults} == {TYPE_A}, faults
    for f in faults:
        assert f.header["ipv4_src"] == src_net + 3 and f.header["tp_dst"] == dport
        assert f.egress == (x, 5) and f.location == f"egress:{x}:5"
        assert x in f.localization["candidates"] and src in f.localization["candidates"]
    assert r.tester.stats.consistent >= 2  # the allowed header, before and after
    assert r.tester.stats.samples_implausible == 0, r.tester.stats.as_dict()


def test_deleted_rule_is_a_blackhole(grid, tmp_path):
    net = next(n for n in sorted(grid.wl.prefixes) if grid.wl.prefixes[n] == "h2")
    dst_ip = net + 33
    src, x = 1, 1
    frame = grid.frame(src, dst_ip, 5000)
    hdr = parse_frame(frame).header
    flow = CriticalFlow("h1-h2", (src, 5), (2, 5), {"ipv4_dst": dst_ip}, timeout=2.5, header=hdr)
    route = grid.route(x, net)
    gone = f"priority={route.priority},ip,nw_dst={dotted(net)}/24"

    async def drive(r, seconds, ticks):
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            grid.send(src, [frame])
            ticks.append(time.monotonic())
            r.tester.tick()
            await asyncio.sleep(0.1)

    async def main():
        async with Run(grid, tmp_path, clock=time.monotonic) as r:
            r.tester.blackholes = BlackholeMonitor([flow], k=5.0, now=time.monotonic())
            ticks: list[float] = []
            await drive(r, 4.0, ticks)
            before = r.store.faults()
            n_before = r.tester.stats.reports
            grid.ovs.ofctl("del-flows", "--strict", grid.br(x), gone)
            grid.ovs.appctl("revalidator/purge")
            t_del = time.monotonic()
            await drive(r, 0.2, ticks)
            while not r.store.faults() and time.monotonic() - t_del < 8.0:
                await drive(r, 0.2, ticks)
            return r, before, n_before, time.monotonic() - t_del

    try:
        r, before, n_before, took = asyncio.run(main())
    finally:
        grid.restore()
    assert n_before >= 20 and before == []
    (f,) = r.store.faults()
    assert f.kind == BLACKHOLE and f.location == "flow:1:5->2:5"
    assert x in f.localization["candidates"]
    assert f.localization["detail"] == "ingress still sampled, no report at egress"
    assert took < 8.0
    # Counter samples (polling=1) of every link and host port: up, no errors.
    health = r.tester.interface_health()
    for ifindex in grid.ifindex.values():
        assert health[(AGENT, ifindex)] == (True, 0), ifindex
