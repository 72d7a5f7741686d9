"""Real packets through three patched userspace bridges in a chain.

    h1 --edge-- br1 ==l12== br2 ==l23== br3 --edge-- h2
                 \\=============l13=====//             (alternative path for the path change)

Checks that the tags on every inter-switch link equal cpc.tags for the path, that hosts get
untagged packets, that hidden rules and path changes change the tags, that the exit bridge
reports the tagged header over sFlow (decoded by tshark), and VLAN-tagged traffic.
"""

from __future__ import annotations

import json
import shutil
import signal
import struct
import subprocess
import time
from pathlib import Path

import pytest
from scapy.all import IP, TCP, UDP, Dot1Q, Ether, Raw, rdpcap, wrpcap

from cpc import tags
from tests.ovs.ovsenv import Netns, SflowSink, VethPair, unique_name

pytestmark = pytest.mark.ovs

H1_MAC, H2_MAC = "02:00:00:00:00:01", "02:00:00:00:00:02"
H1_IP, H2_IP = "10.0.0.1", "10.0.0.2"
DPID = {"br1": 1, "br2": 2, "br3": 3}
COOKIE = {"br1": 0x11, "br2": 0x12, "br3": 0x13}
RULE_ID = {"br1": 101, "br2": 102, "br3": 103}
PRIO = 100
VLAN_COOKIE, VLAN_ID, VLAN_PRIO = 0x21, 201, 110

SENDER = (
    "import socket,sys\n"
    "s=socket.socket(socket.AF_PACKET,socket.SOCK_RAW)\n"
    "s.bind((sys.argv[1],0))\n"
    "[s.send(bytes.fromhex(x)) for x in sys.stdin.read().split()]\n"
)


def intended_flow(br: str, out_port: int) -> str:
    return (
        f"priority={PRIO},cookie={COOKIE[br]:#x},tcp,nw_dst={H2_IP},tp_dst=80,"
        f"actions=set_verify_rule:{RULE_ID[br]},output:{out_port}"
    )


def vlan_flow(br: str) -> str:
    return (
        f"priority={VLAN_PRIO},cookie={VLAN_COOKIE:#x},dl_vlan=10,tcp,nw_dst={H2_IP},"
        f"tp_dst=81,actions=set_verify_rule:{VLAN_ID},output:2"
    )


def expected(hops):
    """[(dpid, in_port, priority, cookie, rule_id)] -> tags (port, rule) after each hop."""
    vp, vr, out = tags.VERIFY_PORT_INIT, tags.VERIFY_RULE_INIT, []
    for dpid, in_port, prio, cookie, rule_id in hops:
        vp = tags.set_verify_port(vp, dpid, in_port)
        vr = tags.set_verify_rule(vr, dpid, 0, prio, cookie, rule_id)
        out.append((vp, vr))
    return out


class Capture:
    """tcpdump on an interface (optionally in a namespace), stopped by pid."""

    def __init__(self, ifname: str, path: Path, ns: Netns | None = None):
        cmd = ["tcpdump", "-i", ifname, "-U", "-n", "-s", "512", "-w", str(path)]
        if ns is not None:
            cmd = ["ip", "netns", "exec", ns.name, *cmd]
        self.path = path
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    def wait_ready(self, timeout=5.0):
        # tcpdump prints "listening on ..." once the socket is open.
        deadline = time.monotonic() + timeout
        line = b""
        while b"listening" not in line and time.monotonic() < deadline:
            line = self.proc.stderr.readline()
            if not line and self.proc.poll() is not None:
                raise RuntimeError("tcpdump exited")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def frames(self) -> list[bytes]:
        if not self.path.exists() or self.path.stat().st_size == 0:
            return []
        return [bytes(p) for p in rdpcap(str(self.path))]


class SflowCollector(SflowSink):
    """The sink, plus the datagrams written as a pcap for tshark."""

    def write_pcap(self, path: Path):
        pkts = [
            Ether()
            / IP(src="127.0.0.1", dst="127.0.0.1")
            / UDP(sport=6343, dport=self.port)
            / Raw(d)
            for d in self.datagrams
        ]
        wrpcap(str(path), pkts)


def tshark_flow_samples(pcap: Path, port: int) -> list[dict]:
    """Flow samples decoded by tshark: source_id class/index, output ifIndex, header bytes."""
    out = subprocess.run(
        ["tshark", "-r", str(pcap), "-d", f"udp.port=={port},sflow", "-T", "json"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    samples = []

    def walk(node):
        if isinstance(node, dict):
            if "sflow.flow_sample.source_id_class" in node:
                hdr = None

                def find_hdr(n):
                    nonlocal hdr
                    if isinstance(n, dict):
                        for k, v in n.items():
                            if k == "sflow_245.header" and isinstance(v, str):
                                hdr = bytes.fromhex(v.replace(":", ""))
                            else:
                                find_hdr(v)
                    elif isinstance(n, list):
                        for x in n:
                            find_hdr(x)

                find_hdr(node)
                samples.append(
                    {
                        "class": int(node["sflow.flow_sample.source_id_class"], 0),
                        "index": int(node["sflow.flow_sample.index"], 0),
                        # Compact format: 2 format bits + 30-bit value (format 0: an ifIndex).
                        "output": int(node["sflow.flow_sample.output_interface"], 0),
                        "header": hdr,
                    }
                )
                return
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for x in node:
                walk(x)

    walk(json.loads(out or "[]"))
    return samples


def tcp_sport(frame: bytes) -> int | None:
    """TCP source port of an (optionally Verify- and VLAN-tagged) IPv4/TCP frame."""
    off = 12
    etype = struct.unpack_from(">H", frame, off)[0]
    if etype == tags.VERIFY_ETHERTYPE:
        off += 8
        etype = struct.unpack_from(">H", frame, off)[0]
    if etype == 0x8100:
        off += 4
        etype = struct.unpack_from(">H", frame, off)[0]
    if etype != 0x0800 or frame[off + 2 + 9] != 6:
        return None
    ihl = (frame[off + 2] & 0x0F) * 4
    return struct.unpack_from(">H", frame, off + 2 + ihl)[0]


def tag_of(frame: bytes) -> tuple[int, int] | None:
    try:
        return tags.unpack_header(frame[12:20])
    except ValueError:
        return None


@pytest.fixture
def chain(ovs, cleanup):
    """Three verify-enabled bridges, two hosts, sFlow on the exit bridge."""
    for br in ("br1", "br2", "br3"):
        ovs.add_bridge(br, dpid=DPID[br], other_config={"verify-tagging": "true"})
    h1, h2 = Netns(unique_name("h1")), Netns(unique_name("h2"))
    cleanup.push(h1.delete)
    cleanup.push(h2.delete)
    e1 = VethPair.host(h1, "eth0", f"{H1_IP}/24", mac=H1_MAC)
    cleanup.push(e1.delete)
    e2 = VethPair.host(h2, "eth0", f"{H2_IP}/24", mac=H2_MAC)
    cleanup.push(e2.delete)
    links = {}
    for name, (ba, pa), (bb, pb) in (
        ("l12", ("br1", 2), ("br2", 1)),
        ("l23", ("br2", 2), ("br3", 1)),
        ("l13", ("br1", 3), ("br3", 3)),
    ):
        a, b = unique_name(name + "a"), unique_name(name + "b")
        pair = VethPair(a, b)
        cleanup.push(pair.delete)
        for end in (a, b):
            subprocess.run(["sysctl", "-qw", f"net.ipv6.conf.{end}.disable_ipv6=1"], check=False)
        ovs.add_port(ba, a, pa)
        ovs.add_port(bb, b, pb)
        links[name] = a  # capture on the upstream end
    ovs.add_port("br1", e1.outer, 1, {"verify-edge": "true"})
    ovs.add_port("br3", e2.outer, 2, {"verify-edge": "true"})

    collector = SflowCollector()
    cleanup.push(collector.stop)
    ovs.vsctl(
        "--",
        "--id=@s",
        "create",
        "sflow",
        "agent=lo",
        f'target="127.0.0.1:{collector.port}"',
        "sampling=1",
        "header=128",
        "polling=600",
        "--",
        "set",
        "bridge",
        "br3",
        "sflow=@s",
    )
    ovs.ofctl("add-flow", "br1", intended_flow("br1", 2))
    ovs.ofctl("add-flow", "br2", intended_flow("br2", 2))
    ovs.ofctl("add-flow", "br3", intended_flow("br3", 2))
    for br in ("br1", "br2", "br3"):
        ovs.ofctl("add-flow", br, vlan_flow(br))
    egress_ifindex = int(ovs.vsctl("get", "interface", e2.outer, "ifindex").strip())
    return {
        "ovs": ovs,
        "h1": h1,
        "h2": h2,
        "links": links,
        "collector": collector,
        "ifindex": egress_ifindex,
    }


def send(ns: Netns, frames: list[bytes]):
    ns.popen(
        shutil.which("python3") or "python3", "-c", SENDER, "eth0", stdin=subprocess.PIPE
    ).communicate("\n".join(f.hex() for f in frames).encode(), timeout=30)


def tcp_frame(sport: int, dport: int = 80, vlan: int | None = None) -> bytes:
    eth = Ether(src=H1_MAC, dst=H2_MAC)
    if vlan is not None:
        eth = eth / Dot1Q(vlan=vlan)
    return bytes(
        eth / IP(src=H1_IP, dst=H2_IP) / TCP(sport=sport, dport=dport, flags="S") / Raw(b"pazz" * 4)
    )


def test_tags_reports_hidden_rules_path_change_vlan(chain, tmp_path):
    ovs, h1, h2, links = chain["ovs"], chain["h1"], chain["h2"], chain["links"]
    caps = {name: Capture(ifn, tmp_path / f"{name}.pcap") for name, ifn in links.items()}
    caps["h2"] = Capture("eth0", tmp_path / "h2.pcap", ns=h2)
    try:
        for c in caps.values():
            c.wait_ready()

        def phase(sport, **kw):
            ovs.appctl("revalidator/purge")
            send(h1, [tcp_frame(sport, **kw)] * 3)
            time.sleep(0.3)

        phase(1001)  # intended path br1 -> br2 -> br3
        ovs.ofctl("add-flow", "br2", f"priority=200,tcp,nw_dst={H2_IP},tp_dst=80,actions=output:2")
        phase(1002)  # hidden higher-priority rule on br2
        ovs.ofctl("del-flows", "--strict", "br2", f"priority=200,tcp,nw_dst={H2_IP},tp_dst=80")
        ovs.ofctl(  # same match, priority and cookie, but no rule ID: replaces the intended one
            "add-flow",
            "br2",
            f"priority={PRIO},cookie={COOKIE['br2']:#x},tcp,nw_dst={H2_IP},tp_dst=80,"
            "actions=output:2",
        )
        phase(1003)
        ovs.ofctl("add-flow", "br2", intended_flow("br2", 2))
        ovs.ofctl("add-flow", "br1", intended_flow("br1", 3))  # path change: br1 -> br3
        phase(1004)
        ovs.ofctl("add-flow", "br1", intended_flow("br1", 2))
        phase(1005, dport=81, vlan=10)
        time.sleep(1.5)  # sFlow datagrams are flushed once a second
    finally:
        for c in caps.values():
            c.stop()

    def by_sport(name):
        out = {}
        for f in caps[name].frames():
            sp = tcp_sport(f)
            if sp is not None:
                out.setdefault(sp, []).append(f)
        return out

    l12, l23, l13, rx = by_sport("l12"), by_sport("l23"), by_sport("l13"), by_sport("h2")

    def hop(br, in_port, rule_id=None, prio=PRIO, cookie=None):
        return (
            DPID[br],
            in_port,
            prio,
            COOKIE[br] if cookie is None else cookie,
            RULE_ID[br] if rule_id is None else rule_id,
        )

    base = expected([hop("br1", 1), hop("br2", 1), hop("br3", 1)])
    # (a) tags on every inter-switch link equal the Python reference.
    assert {tag_of(f) for f in l12[1001]} == {base[0]}
    assert {tag_of(f) for f in l23[1001]} == {base[1]}
    # (b) the host gets the packet untagged, byte for byte as sent.
    assert rx[1001] and all(f == tcp_frame(1001) for f in rx[1001])

    # (c) a hidden higher-priority rule changes Verify_Rule ...
    hidden = expected([hop("br1", 1), hop("br2", 1, rule_id=0, prio=200, cookie=0)])
    assert {tag_of(f) for f in l23[1002]} == {hidden[1]}
    assert hidden[1][1] != base[1][1]
    # ... and so does a rule with the same priority and cookie but no rule ID.
    no_id = expected([hop("br1", 1), hop("br2", 1, rule_id=0)])
    assert {tag_of(f) for f in l23[1003]} == {no_id[1]}
    assert no_id[1][1] != base[1][1] and no_id[1][0] == base[1][0]

    # (d) a path change changes Verify_Port.
    direct = expected([hop("br1", 1), hop("br3", 3)])
    assert {tag_of(f) for f in l13[1004]} == {direct[0]}
    assert 1004 not in l12 and 1004 not in l23
    assert rx[1004] and all(tag_of(f) is None for f in rx[1004])

    # (f) VLAN traffic: Verify header in front of the 802.1Q tag, host gets the VLAN frame.
    vhops = [
        (DPID[b], p, VLAN_PRIO, VLAN_COOKIE, VLAN_ID)
        for b, p in (("br1", 1), ("br2", 1), ("br3", 1))
    ]
    vexp = expected(vhops)
    for f in l12[1005] + l23[1005]:
        assert struct.unpack_from(">H", f, 20)[0] == 0x8100
        assert struct.unpack_from(">H", f, 22)[0] & 0x0FFF == 10
    assert {tag_of(f) for f in l12[1005]} == {vexp[0]}
    assert {tag_of(f) for f in l23[1005]} == {vexp[1]}
    assert rx[1005] and all(f == tcp_frame(1005, dport=81, vlan=10) for f in rx[1005])

    # (e) sFlow reports from the exit bridge, decoded by tshark.
    chain["collector"].stop()
    pcap = tmp_path / "sflow.pcap"
    chain["collector"].write_pcap(pcap)
    samples = tshark_flow_samples(pcap, chain["collector"].port)
    reports = [s for s in samples if s["class"] == 2 and (s["index"] >> 16) == 0x82]
    ingress = [s for s in samples if s not in reports]
    assert ingress, "ordinary ingress samples are still sent"

    def report_tags(sport):
        return {
            tag_of(s["header"]) for s in reports if s["header"] and tcp_sport(s["header"]) == sport
        }

    full = {
        1001: base[2],
        1002: expected(
            [hop("br1", 1), hop("br2", 1, rule_id=0, prio=200, cookie=0), hop("br3", 1)]
        )[2],
        1003: expected([hop("br1", 1), hop("br2", 1, rule_id=0), hop("br3", 1)])[2],
        1004: direct[1],
        1005: vexp[2],
    }
    for sport, tag in full.items():
        assert report_tags(sport) == {tag}, sport
    assert all(s["output"] == chain["ifindex"] for s in reports)
