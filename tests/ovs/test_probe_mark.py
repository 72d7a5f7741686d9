"""The probe mark on real patched OVS (docs/verify-header.md, "The probe mark").

    h1 --probe edge(1)-- br1 ==(2) l12 (1)== br2 --edge(2)-- h2      sFlow on br2 at 1/N
    h3 --edge(3)------/

h1's port has other_config:verify-probe=true (a prober's port), h3's is an ordinary host's.
The oracles: tshark decodes the sFlow reports (sampling rate, source id, sampled bytes),
tcpdump captures what crosses the link and what the host gets, cpc.tags computes the tags
and binomial tails bound the counts of the packets sampled at 1/N.
"""

from __future__ import annotations

import math
import re
import shutil
import subprocess
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from scapy.all import IP, UDP, Dot1Q, Ether, Raw

from cpc import tags
from pazzd.wiring import unmarked_injection
from tester.ifmap import IfMap
from tests.ovs.ovsenv import Netns, VethPair, unique_name
from tests.ovs.test_datapath import Capture, SflowCollector

pytestmark = pytest.mark.ovs

H1_MAC, H2_MAC, H3_MAC = "02:00:00:00:00:01", "02:00:00:00:00:02", "02:00:00:00:00:03"
H1_IP, H2_IP, H3_IP = "10.0.0.1", "10.0.0.2", "10.0.0.3"
COOKIE = {"br1": 0x11, "br2": 0x12}
RULE_ID = {"br1": 101, "br2": 102}
PRIO = 100
MARKED = tags.pack_header(tags.VERIFY_PORT_INIT, tags.VERIFY_RULE_INIT, marked=True)
PLAIN = tags.pack_header(tags.VERIFY_PORT_INIT, tags.VERIFY_RULE_INIT)

# Reads "HEX COUNT" lines; sends each frame COUNT times, in chunks of 50 with a short pause
# (so that the veth and the switch's receive queue do not overflow).
SENDER = (
    "import socket,sys,time\n"
    "s=socket.socket(socket.AF_PACKET,socket.SOCK_RAW)\n"
    "s.bind((sys.argv[1],0))\n"
    "for line in sys.stdin.read().splitlines():\n"
    "    h,n=line.split(); f=bytes.fromhex(h)\n"
    "    for i in range(int(n)):\n"
    "        s.send(f)\n"
    "        if i % 50 == 49: time.sleep(0.005)\n"
)


def udp_frame(
    src_mac: str, src_ip: str, sport: int, shim: bytes = b"", vlan: int | None = None
) -> bytes:
    eth = Ether(src=src_mac, dst=H2_MAC)
    if vlan is not None:
        eth = eth / Dot1Q(vlan=vlan)
    f = bytes(eth / IP(src=src_ip, dst=H2_IP) / UDP(sport=sport, dport=9) / Raw(b"probe-mark" * 2))
    return f[:12] + shim + f[12:]


def udp_sport(frame: bytes) -> int | None:
    off = 12
    if frame[12:14] in (b"\x08\x20", b"\x08\x21"):
        off += 8
    if frame[off : off + 2] == b"\x81\x00":
        off += 4
    if frame[off : off + 2] != b"\x08\x00" or frame[off + 2 + 9] != 17:
        return None
    ihl = (frame[off + 2] & 0x0F) * 4
    return int.from_bytes(frame[off + 2 + ihl : off + 4 + ihl], "big")


def binomial_range(n: int, p: float, tail: float = 1e-6) -> tuple[int, int]:
    """[lo, hi] with P(X < lo) and P(X > hi) each below `tail` for X ~ Binomial(n, p)."""

    def pmf1(k):
        return math.exp(
            math.lgamma(n + 1)
            - math.lgamma(k + 1)
            - math.lgamma(n - k + 1)
            + k * math.log(p)
            + (n - k) * math.log1p(-p)
        )

    pmf = [pmf1(k) for k in range(min(n, 200) + 1)]
    lo, acc = 0, 0.0
    while acc + pmf[lo] < tail:
        acc += pmf[lo]
        lo += 1
    hi, acc = len(pmf) - 1, 0.0
    while hi > lo and acc + pmf[hi] < tail:
        acc += pmf[hi]
        hi -= 1
    return lo, hi


class Net:
    def __init__(self, ovs, cleanup, tmp_path):
        self.ovs, self.tmp = ovs, tmp_path
        for br, dpid in (("br1", 1), ("br2", 2)):
            ovs.add_bridge(br, dpid=dpid, other_config={"verify-tagging": "true"})
        self.h = {}
        for name, ip, mac in (("h1", H1_IP, H1_MAC), ("h2", H2_IP, H2_MAC), ("h3", H3_IP, H3_MAC)):
            ns = Netns(unique_name(name))
            cleanup.push(ns.delete)
            veth = VethPair.host(ns, "eth0", f"{ip}/24", mac=mac)
            cleanup.push(veth.delete)
            self.h[name] = (ns, veth)
        a, b = unique_name("l12a"), unique_name("l12b")
        pair = VethPair(a, b)
        cleanup.push(pair.delete)
        for end in (a, b):
            subprocess.run(["sysctl", "-qw", f"net.ipv6.conf.{end}.disable_ipv6=1"], check=False)
        ovs.add_port("br1", a, 2)
        ovs.add_port("br2", b, 1)
        self.link = a
        edge = {"verify-edge": "true"}
        ovs.add_port("br1", self.h["h1"][1].outer, 1, {**edge, "verify-probe": "true"})
        ovs.add_port("br1", self.h["h3"][1].outer, 3, edge)
        ovs.add_port("br2", self.h["h2"][1].outer, 2, edge)
        self.collector = SflowCollector()
        cleanup.push(self.collector.stop)
        self.sflow = ovs.vsctl(
            "--",
            "--id=@s",
            "create",
            "sflow",
            "agent=lo",
            f'target="127.0.0.1:{self.collector.port}"',
            "sampling=1000",
            "header=128",
            "polling=600",
            "--",
            "set",
            "bridge",
            "br2",
            "sflow=@s",
        ).strip()
        for br in ("br1", "br2"):
            ovs.ofctl(
                "add-flow",
                br,
                f"priority={PRIO},cookie={COOKIE[br]:#x},ip,nw_dst={H2_IP},"
                f"actions=set_verify_rule:{RULE_ID[br]},output:2",
            )

    def send(self, host: str, frames: list[tuple[bytes, int]]) -> None:
        ns = self.h[host][0]
        lines = "\n".join(f"{f.hex()} {n}" for f, n in frames)
        ns.popen(
            shutil.which("python3") or "python3", "-c", SENDER, "eth0", stdin=subprocess.PIPE
        ).communicate(lines.encode(), timeout=120)

    def delivered(self) -> int:
        """Packets br2 has output to h2's port so far (sent or dropped by the device)."""
        st = self.ovs.port_stats("br2")[2]
        return st["tx_packets"] + st["tx_dropped"]

    def marked(self) -> int:
        """Packets with the probe mark that have left an edge port of br2 so far."""
        return self.probe_stats()["marked"]

    def phase(self, host: str, frame: bytes, n: int) -> tuple[int, int]:
        """Send n copies of frame from host; return how many reached h2's port and how
        many left br2 for it with the probe mark (reported and dropped there)."""
        before = self.delivered(), self.marked()
        self.send(host, [(frame, n)])
        time.sleep(0.3)
        return self.delivered() - before[0], self.marked() - before[1]

    def reports(self) -> tuple[list[dict], list[dict]]:
        """(exit reports, all flow samples) as tshark decodes them: source id class and
        index, sampling rate, sampled header bytes."""
        time.sleep(1.5)  # sFlow datagrams go out once a second
        self.collector.stop()
        pcap = self.tmp / "sflow.pcap"
        self.collector.write_pcap(pcap)
        samples = tshark_samples(pcap, self.collector.port)
        return [s for s in samples if s["class"] == 2 and s["index"] >> 16 == 0x82], samples

    def probe_stats(self, br: str = "br2") -> dict[str, int]:
        line = self.ovs.appctl("ofproto/verify-probe-reports", br)
        return {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", line)}


def tshark_samples(pcap, port) -> list[dict]:
    """Every flow sample tshark decodes: class, index, sampling rate, header bytes."""
    fields = (
        "sflow.flow_sample.source_id_class",
        "sflow.flow_sample.index",
        "sflow.flow_sample.sampling_rate",
        "sflow_245.header",
    )
    cmd = ["tshark", "-r", str(pcap), "-d", f"udp.port=={port},sflow", "-T", "fields"]
    for f in fields:
        cmd += ["-e", f]
    cmd += ["-E", "occurrence=a", "-E", "aggregator=;"]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=60).stdout
    samples = []
    for line in out.splitlines():
        cols = [c.split(";") if c else [] for c in line.split("\t")]
        for cls, idx, rate, hdr in zip(*cols, strict=True):
            samples.append(
                {
                    "class": int(cls, 0),
                    "index": int(idx, 0),
                    "rate": int(rate),
                    "header": bytes.fromhex(hdr.replace(":", "")),
                }
            )
    return samples


@pytest.fixture
def net(ovs, cleanup, tmp_path):
    return Net(ovs, cleanup, tmp_path)


def test_marked_probes_are_reported_every_time_and_never_delivered_unmarked_at_1_in_1000(net):
    caps = {
        "link": Capture(net.link, net.tmp / "link.pcap"),
        "h2": Capture("eth0", net.tmp / "h2.pcap", ns=net.h["h2"][0]),
    }
    try:
        for c in caps.values():
            c.wait_ready()
        phases = {
            # h1 is a probe port: a plain frame gets a marked header ...
            1000: net.phase("h1", udp_frame(H1_MAC, H1_IP, 1000), 400),
            # ... and a marked one keeps its mark.
            1001: net.phase("h1", udp_frame(H1_MAC, H1_IP, 1001, MARKED), 400),
            # h3 is an ordinary host: its traffic is sampled at 1/1000 ...
            2000: net.phase("h3", udp_frame(H3_MAC, H3_IP, 2000), 15000),
            # ... and so is its traffic with a forged mark, which the switch strips.
            2001: net.phase("h3", udp_frame(H3_MAC, H3_IP, 2001, MARKED), 15000),
        }
    finally:
        for c in caps.values():
            c.stop()
    stats = net.probe_stats()
    reports, samples = net.reports()
    # Frames may be lost before br2 on a loaded machine; n counts those that left br2 for
    # h2: probes by the meter's count of marked packets (none of them is output), the
    # rest by the port's counters (none of them carries the mark there).
    n = {1000: phases[1000][1], 1001: phases[1001][1], 2000: phases[2000][0], 2001: phases[2001][0]}
    assert phases[1000][0] == phases[1001][0] == phases[2000][1] == phases[2001][1] == 0, phases
    assert min(n[1000], n[1001]) > 100 and min(n[2000], n[2001]) > 5000, n

    by = {}
    for s in reports:
        by.setdefault(udp_sport(s["header"]), []).append(s)
    # Every marked packet is reported, each as it leaves br2: marked, with the tags of its path.
    assert len(by.get(1000, [])) == n[1000] and len(by.get(1001, [])) == n[1001]
    for sport in (1000, 1001):
        assert all(s["header"][12:14] == b"\x08\x21" for s in by[sport])
    # Unmarked and forged-mark packets: at 1/1000, each a binomial count.
    for sport in (2000, 2001):
        lo, hi = binomial_range(n[sport], 1 / 1000)
        assert lo <= len(by.get(sport, [])) <= hi, (sport, len(by.get(sport, [])), lo, hi)
        assert all(s["header"][12:14] == b"\x08\x20" for s in by.get(sport, []))
    # Together they are enough for a lower bound too: unmarked packets are sampled at all.
    lo, hi = binomial_range(n[2000] + n[2001], 1 / 1000)
    assert lo <= len(by.get(2000, [])) + len(by.get(2001, [])) <= hi
    # The samples say which is which: sampling_rate 1 for a probe report, 1000 otherwise.
    report_rates = {}
    for s in reports:
        report_rates.setdefault(s["header"][12:14], set()).add(s["rate"])
    assert report_rates[b"\x08\x21"] == {1}
    assert report_rates[b"\x08\x20"] == {1000}
    # br2's ordinary ingress samples (class 2, index 1000) are still at 1/1000.
    assert {s["rate"] for s in samples if s["index"] == 1000} <= {1000}
    # The meter's counts: every marked packet went through, none in excess.
    assert stats["marked"] == n[1000] + n[1001] and stats["excess"] == 0, stats
    assert stats["rate"] == 2000 and stats["burst"] == 2000

    # Between the switches the mark is kept for h1's probes and stripped from h3's frames.
    link = {}
    for f in caps["link"].frames():
        link.setdefault(udp_sport(f), set()).add(f[12:14])
    assert link[1000] == link[1001] == {b"\x08\x21"}
    assert link[2000] == link[2001] == {b"\x08\x20"}
    # A probe ends at the network's edge: h2 gets none of h1's frames. Neither the shim
    # nor the mark reaches a host: h2 gets every other frame clean.
    got = {}
    for f in caps["h2"].frames():
        assert f[12:14] not in (b"\x08\x20", b"\x08\x21"), f.hex()
        got.setdefault(udp_sport(f), set()).add(f)
    assert 1000 not in got and 1001 not in got, sorted(got)
    for sport in (2000, 2001):
        assert got[sport] == {udp_frame(H3_MAC, H3_IP, sport)}, sport


def _expected_tags():
    vp = tags.set_verify_port(tags.VERIFY_PORT_INIT, 1, 1)
    vr = tags.set_verify_rule(tags.VERIFY_RULE_INIT, 1, 0, PRIO, COOKIE["br1"], RULE_ID["br1"])
    vp = tags.set_verify_port(vp, 2, 1)
    vr = tags.set_verify_rule(vr, 2, 0, PRIO, COOKIE["br2"], RULE_ID["br2"])
    return vp, vr


def test_the_mark_never_changes_the_tags(net):
    """At sampling 1, the same header sent unmarked (a header h1 brings keeps no mark it
    does not have), marked, and marked by the switch: the three reports carry the tags
    cpc.tags computes for the path, and only the EtherType tells them apart."""
    net.ovs.vsctl("set", "sflow", net.sflow, "sampling=1")
    for shim in (PLAIN, MARKED, b""):
        net.phase("h1", udp_frame(H1_MAC, H1_IP, 3000, shim), 5)
    # A marked header stays in front of a VLAN tag; the tags are the same again.
    net.phase("h1", udp_frame(H1_MAC, H1_IP, 3001, MARKED, vlan=7), 5)
    reports, _ = net.reports()
    vlan = [s["header"] for s in reports if udp_sport(s["header"]) == 3001]
    assert len(vlan) == 5 and {(h[12:14], h[20:22], h[23]) for h in vlan} == {
        (b"\x08\x21", b"\x81\x00", 7)
    }
    assert {tags.unpack_header(h[12:20]) for h in vlan} == {_expected_tags()}
    seen = {}
    for s in reports:
        if udp_sport(s["header"]) == 3000:
            seen.setdefault(s["header"][12:14], set()).add(tags.unpack_header(s["header"][12:20]))
    want = _expected_tags()
    assert seen == {b"\x08\x20": {want}, b"\x08\x21": {want}}, seen
    # The marked ones are the 10 (marked and switch-marked) reports, the unmarked 5.
    n = {k: 0 for k in seen}
    for s in reports:
        if udp_sport(s["header"]) == 3000:
            n[s["header"][12:14]] += 1
    assert n == {b"\x08\x20": 5, b"\x08\x21": 10}


def test_packet_out_keeps_its_mark(net):
    """A packet-out from the controller, in_port h3's ordinary edge port, keeps its mark
    (h3's own frames lose it) and is reported 1/1 at 1/1000."""
    frame = udp_frame(H3_MAC, H3_IP, 4000, MARKED)
    for _ in range(20):
        net.ovs.ofctl("packet-out", "br1", f"in_port=3 packet={frame.hex()} actions=table")
    time.sleep(0.3)
    reports, _ = net.reports()
    mine = [s for s in reports if udp_sport(s["header"]) == 4000]
    assert len(mine) == 20 and all(s["header"][12:14] == b"\x08\x21" for s in mine)
    assert {s["rate"] for s in mine} == {1}
    assert {tags.unpack_header(s["header"][12:20]) for s in mine} == {
        (
            tags.set_verify_port(tags.set_verify_port(0, 1, 3), 2, 1),
            tags.set_verify_rule(
                tags.set_verify_rule(1, 1, 0, PRIO, COOKIE["br1"], RULE_ID["br1"]),
                2,
                0,
                PRIO,
                COOKIE["br2"],
                RULE_ID["br2"],
            ),
        )
    }


def test_a_probe_ends_only_at_the_edge_ports_it_leaves_by(net):
    """br1 sends h2's traffic down the link and out of h3's edge port. Packet-outs from h1's
    probe port keep their header: of a marked one, h3's copy is dropped (br1 has no sFlow)
    while the link's copy goes on, marked, to be reported 1/1 at br2 and dropped there; an
    unmarked one reaches h3, clean, and h2."""
    net.ovs.ofctl(
        "add-flow",
        "br1",
        f"priority={PRIO + 1},cookie={COOKIE['br1']:#x},udp,nw_dst={H2_IP},tp_src=7000/0xfffe,"
        f"actions=set_verify_rule:{RULE_ID['br1']},output:2,output:3",
    )
    caps = {
        "link": Capture(net.link, net.tmp / "link.pcap"),
        "h3": Capture("eth0", net.tmp / "h3.pcap", ns=net.h["h3"][0]),
        "h2": Capture("eth0", net.tmp / "h2.pcap", ns=net.h["h2"][0]),
    }
    try:
        for c in caps.values():
            c.wait_ready()
        time.sleep(1.0)  # tcpdump says it listens a little before it sees packets
        tx = {
            br: {p: st["tx_packets"] for p, st in net.ovs.port_stats(br).items()}
            for br in ("br1", "br2")
        }
        for sport, shim in ((7000, PLAIN), (7001, MARKED)):
            frame = udp_frame(H1_MAC, H1_IP, sport, shim)
            for _ in range(10):
                net.ovs.ofctl("packet-out", "br1", f"in_port=1 packet={frame.hex()} actions=table")
        time.sleep(1.0)
        sent = {
            (br, p): st["tx_packets"] - tx[br][p]
            for br in ("br1", "br2")
            for p, st in net.ovs.port_stats(br).items()
            if (br, p) in (("br1", 2), ("br1", 3), ("br2", 2))
        }
    finally:
        for c in caps.values():
            c.stop()
    # The switches' counters: all 20 down the link, the 10 unmarked ones to h3 and to h2.
    assert sent == {("br1", 2): 20, ("br1", 3): 10, ("br2", 2): 10}, sent
    reports, _ = net.reports()
    frames = {
        name: [f for f in c.frames() if udp_sport(f) in (7000, 7001)] for name, c in caps.items()
    }
    ports = {name: sorted({udp_sport(f) for f in fs}) for name, fs in frames.items()}
    assert ports == {"link": [7000, 7001], "h3": [7000], "h2": [7000]}, ports
    assert (
        {f for f in frames["h3"]} == {f for f in frames["h2"]} == {udp_frame(H1_MAC, H1_IP, 7000)}
    )
    assert sum(udp_sport(f) == 7001 for f in frames["link"]) == 10
    assert {f[12:14] for f in frames["link"] if udp_sport(f) == 7001} == {b"\x08\x21"}
    marked = [s for s in reports if udp_sport(s["header"]) == 7001]
    assert len(marked) == 10 and {s["rate"] for s in marked} == {1}


def test_a_flood_of_marked_packets_is_rate_limited(net):
    rate, burst = 200, 50
    net.ovs.vsctl(
        "set",
        "bridge",
        "br2",
        f"other_config:verify-probe-report-rate={rate}",
        f"other_config:verify-probe-report-burst={burst}",
    )
    assert net.probe_stats()["rate"] == rate
    frame = udp_frame(H1_MAC, H1_IP, 5000, MARKED)
    before = net.delivered(), net.marked()
    t0 = time.monotonic()
    for i in range(3):  # three floods, 0.5 s apart
        if i:
            time.sleep(0.5)
        net.send("h1", [(frame, 4000)])
    elapsed = time.monotonic() - t0
    time.sleep(0.3)
    n = net.marked() - before[1]
    assert net.delivered() == before[0]  # reported or not, no probe reaches h2
    stats = net.probe_stats()
    reports, _ = net.reports()
    got = sum(1 for s in reports if udp_sport(s["header"]) == 5000)
    bound = burst + rate * elapsed + 1
    assert n > 4000, n
    assert got <= bound, (got, bound, elapsed)
    # The bucket is full again after burst / rate = 0.25 s idle: each flood gets a burst.
    assert got >= 3 * burst, (got, elapsed)
    assert stats["marked"] == n and stats["reported"] == got, (stats, n, got)
    assert stats["excess"] == n - got > 0


def test_a_trust_port_keeps_marks_and_adds_none(net):
    """verify-probe=trust (a host shared with a prober, as in the lab): its marked frames
    are reported 1/1, its plain frames get a plain header and stay at 1/1000."""
    net.ovs.vsctl("set", "interface", net.h["h3"][1].outer, "other_config:verify-probe=trust")
    cap = Capture(net.link, net.tmp / "link.pcap")
    try:
        cap.wait_ready()
        (none, n_marked) = net.phase("h3", udp_frame(H3_MAC, H3_IP, 6001, MARKED), 300)
        (n_plain, _) = net.phase("h3", udp_frame(H3_MAC, H3_IP, 6000), 6000)
    finally:
        cap.stop()
    reports, _ = net.reports()
    marked = [s for s in reports if udp_sport(s["header"]) == 6001]
    plain = [s for s in reports if udp_sport(s["header"]) == 6000]
    assert n_marked > 200 and len(marked) == n_marked and {s["rate"] for s in marked} == {1}
    assert none == 0  # the prober's marked frames end at br2, reported
    lo, hi = binomial_range(n_plain, 1 / 1000)
    assert lo <= len(plain) <= hi and all(s["rate"] == 1000 for s in plain)
    link = {}
    for f in cap.frames():
        link.setdefault(udp_sport(f), set()).add(f[12:14])
    assert link[6001] == {b"\x08\x21"} and link[6000] == {b"\x08\x20"}


def test_the_ovsdb_says_which_injection_ports_strip_the_mark(net, ovs_prefix):
    """pazzd reads each port's other_config:verify-probe from the switch's OVSDB (with the
    sFlow ifIndex map) and warns for a fuzz.inject port that strips the mark."""
    vsctl = str(Path(ovs_prefix) / "bin/ovs-vsctl")

    def run_vsctl(argv, **kw):
        return subprocess.run([vsctl, *argv[1:]], **kw)

    def read() -> IfMap:
        m = IfMap()
        assert m.load_ovsdb("127.0.0.1", f"unix:{net.ovs.db_sock}", run=run_vsctl) > 0
        return m

    cfg = SimpleNamespace(
        fuzz=SimpleNamespace(inject={(1, 1): "h1", (1, 3): "h3"}),
        sflow=SimpleNamespace(marked_reports=True, sampling_rate=1000),
        topology=SimpleNamespace(port_name=lambda p: f"s{p[0]}:{p[1]}"),
    )
    m = read()
    assert (m.verify_probe[(1, 1)], m.verify_probe[(1, 3)], m.verify_probe[(2, 2)]) == (
        "true",
        "",
        "",
    )
    (warning,) = unmarked_injection(cfg, m)
    assert warning.startswith("fuzz.inject s1:3:") and "verify-probe=(unset)" in warning
    net.ovs.vsctl("set", "interface", net.h["h3"][1].outer, "other_config:verify-probe=trust")
    m = read()
    assert m.verify_probe[(1, 3)] == "trust" and unmarked_injection(cfg, m) == []
