"""Real Open vSwitch as the oracle for cpc.selecthash: which bucket each packet took.

A `SelectBridge` is a netdev bridge whose ports are internal ports (tap devices): port 1
takes frames (packet-out with `actions=table`, or sent on its tap), ports 2.. are the
buckets of select group 1, `bucket=weight:W,actions=output:P`, and table 0 has
`priority=10,actions=group:1`. Every frame carries MAGIC and its 4-byte index at the end
of its payload; a `Listener` (raw sockets on the bucket taps) tells which port each index
left by. OVS never sees the model.

`collect_vectors(ovs)` reads the known-answer vectors of tests/vectors/select_hash.json
from a running OVS (`python -m tests.ovs.select_oracle` writes them; tests/ovs/
test_select_hash.py checks that OVS still gives them; tests/cpc/test_selecthash.py pins
cpc.selecthash to them without OVS):
- dp_hash: the full 32-bit dp_hash of a few packets, as OVS's datapath computed it for
  a select group whose bucket copies it into the low 32 bits of the source MAC
  (`move:NXM_NX_DP_HASH[0..31]->NXM_OF_ETH_SRC[0..31]`) before output;
- dp_hash_buckets: the bucket `ofproto/trace` reports for a flow with dp_hash = 256 + x,
  x = 0..63, in dp_hash groups with unequal weights (the Webster table and its mask);
- default_scores: the per-bucket scores `ofproto/trace` prints for packets through a
  group too unequal for dp_hash (weights 150, 120, 1: the default method).
"""

from __future__ import annotations

import json
import re
import socket
import time
from ipaddress import IPv4Address

from scapy.layers.inet import ICMP, IP, TCP, UDP
from scapy.layers.l2 import ARP, Dot1Q, Ether
from scapy.layers.sctp import SCTP
from scapy.packet import Raw

from pazzlab.ovs import run

MAGIC = b"PZSH"
PACKET_OUTGOING = 4  # sll_pkttype of a frame the host itself sends


def _mac(v: int) -> str:
    return ":".join(f"{(v >> s) & 0xFF:02x}" for s in range(40, -8, -8))


def frame(h: dict[str, int], idx: int) -> bytes:
    """The frame of model header h with MAGIC and idx at the end. EtherType 0x86DD gets
    nothing after the Ethernet header but the tail: too short to parse as IPv6."""
    tail = MAGIC + idx.to_bytes(4, "big")
    et = h["eth_type"]
    pkt = Ether(src=_mac(h["eth_src"]), dst=_mac(h["eth_dst"]))
    if h.get("vlan_vid", 0) & 0x1000:
        pkt = pkt / Dot1Q(vlan=h["vlan_vid"] & 0xFFF, type=et)
    else:
        pkt.type = et
    if et == 0x0800:
        ip = IP(src=str(IPv4Address(h["ipv4_src"])), dst=str(IPv4Address(h["ipv4_dst"])))
        ip.proto = proto = h["ip_proto"]
        sport, dport = h.get("tp_src", 0), h.get("tp_dst", 0)
        if proto == 6:
            pkt = pkt / ip / TCP(sport=sport, dport=dport)
        elif proto == 17:
            pkt = pkt / ip / UDP(sport=sport, dport=dport)
        elif proto == 132:
            pkt = pkt / ip / SCTP(sport=sport, dport=dport)
        elif proto == 1:
            pkt = pkt / ip / ICMP()
        else:
            pkt = pkt / ip
    elif et == 0x0806:
        pkt = pkt / ARP(psrc="10.9.0.1", pdst="10.9.0.2", hwsrc=_mac(h["eth_src"]))
    return bytes(pkt / Raw(tail))


def add_tap(ovs, br: str, ofport: int, other_config: dict[str, str] | None = None) -> str:
    """An internal port (a tap device in the root namespace) on ofport, up, no IPv6."""
    name = f"{br}p{ofport}"
    sets = [f"other_config:{k}={v}" for k, v in (other_config or {}).items()]
    ovs.vsctl(
        "add-port", br, name, "--", "set", "interface", name, "type=internal",
        f"ofport_request={ofport}", *sets,
    )  # fmt: skip
    run("sysctl", "-qw", f"net.ipv6.conf.{name}.disable_ipv6=1", check=False)
    run("ip", "link", "set", name, "up")
    return name


class Listener:
    """Raw sockets on some interfaces: {index: [port, ...]} of the MAGIC frames received."""

    def __init__(self, ports: dict[int, str]) -> None:
        self.socks = {}
        for port, ifname in ports.items():
            s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0003))
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
            s.bind((ifname, 0))
            s.setblocking(False)
            self.socks[port] = s
        self.seen: dict[int, list[int]] = {}
        self.frames: dict[int, bytes] = {}  # index -> the last frame received

    def drain(self) -> None:
        for port, s in self.socks.items():
            while True:
                try:
                    data, addr = s.recvfrom(65535)
                except BlockingIOError:
                    break
                k = data.rfind(MAGIC)
                if addr[2] == PACKET_OUTGOING or k < 0 or len(data) < k + 8:
                    continue
                idx = int.from_bytes(data[k + 4 : k + 8], "big")
                self.seen.setdefault(idx, []).append(port)
                self.frames[idx] = data

    def wait(self, want: set[int], timeout: float = 10.0) -> None:
        """Drain until every index in `want` was seen, then a little longer (duplicates)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.drain()
            if want <= set(self.seen):
                break
            time.sleep(0.02)
        time.sleep(0.1)
        self.drain()

    def close(self) -> None:
        for s in self.socks.values():
            s.close()


def packet_out(ovs, br: str, in_port: int, frames: list[bytes], chunk: int = 100) -> None:
    """One packet-out per frame (actions=table), `chunk` frames per ovs-ofctl call."""
    for i in range(0, len(frames), chunk):
        hexes = [f.hex() for f in frames[i : i + chunk]]
        ovs.ofctl("packet-out", br, str(in_port), "table", *hexes)


class SelectBridge:
    """A bridge with select group 1 over taps 2.. (one per weight), fed on port 1;
    `bucket_prefix`: actions each bucket applies before its output."""

    def __init__(self, ovs, br: str, dpid: int, weights: tuple[int, ...], bucket_prefix=""):
        ovs.add_bridge(br, dpid=dpid)
        add_tap(ovs, br, 1)
        self.ports = {p: add_tap(ovs, br, p) for p in range(2, len(weights) + 2)}
        buckets = ",".join(
            f"bucket=weight:{w},actions={bucket_prefix}output:{p}"
            for p, w in zip(self.ports, weights, strict=True)
        )
        ovs.ofctl("add-group", br, f"group_id=1,type=select,{buckets}")
        ovs.ofctl("add-flow", br, "priority=10,actions=group:1")


# Headers of the vectors: TCP, UDP, ICMP, SCTP, a VLAN-tagged TCP, ARP, a VLAN-tagged
# ARP, an unknown EtherType and a too-short IPv6 frame.
VECTOR_HEADERS = [
    dict(eth_type=0x0800, ip_proto=6, ipv4_src=0x0A000001, ipv4_dst=0x0A000102,
         tp_src=40000, tp_dst=80, eth_src=0x020000000001, eth_dst=0x020000000002, vlan_vid=0),
    dict(eth_type=0x0800, ip_proto=17, ipv4_src=0xC0A80107, ipv4_dst=0x08080808,
         tp_src=5353, tp_dst=53, eth_src=0x02AABBCCDDEE, eth_dst=0x021122334455, vlan_vid=0),
    dict(eth_type=0x0800, ip_proto=1, ipv4_src=0x0A0000FE, ipv4_dst=0xAC100001,
         tp_src=0, tp_dst=0, eth_src=0x020000000003, eth_dst=0x020000000004, vlan_vid=0),
    dict(eth_type=0x0800, ip_proto=132, ipv4_src=0x0A010203, ipv4_dst=0x0A040506,
         tp_src=2905, tp_dst=36412, eth_src=0x020000000005, eth_dst=0x020000000006, vlan_vid=0),
    dict(eth_type=0x0800, ip_proto=6, ipv4_src=0x0A000001, ipv4_dst=0x0A000102,
         tp_src=40000, tp_dst=80, eth_src=0x020000000001, eth_dst=0x020000000002,
         vlan_vid=0x1000 | 42),
    dict(eth_type=0x0806, ip_proto=0, ipv4_src=0, ipv4_dst=0, tp_src=0, tp_dst=0,
         eth_src=0x020000000007, eth_dst=0xFFFFFFFFFFFF, vlan_vid=0),
    dict(eth_type=0x0806, ip_proto=0, ipv4_src=0, ipv4_dst=0, tp_src=0, tp_dst=0,
         eth_src=0x020000000007, eth_dst=0xFFFFFFFFFFFF, vlan_vid=0x1000 | 7),
    dict(eth_type=0x88B5, ip_proto=0, ipv4_src=0, ipv4_dst=0, tp_src=0, tp_dst=0,
         eth_src=0x02000000ABCD, eth_dst=0x020000001234, vlan_vid=0),
    dict(eth_type=0x86DD, ip_proto=0, ipv4_src=0, ipv4_dst=0, tp_src=0, tp_dst=0,
         eth_src=0x020000000008, eth_dst=0x020000000009, vlan_vid=0),
]  # fmt: skip
TABLE_WEIGHTS = [(2, 5, 1, 3), (3, 50, 60)]
DEFAULT_WEIGHTS = (150, 120, 1)


def _trace(ovs, br: str, *what: str) -> str:
    return ovs.appctl("ofproto/trace", br, *what)


def collect_vectors(ovs) -> dict:
    """The vectors of tests/vectors/select_hash.json, read from the running `ovs`."""
    out: dict = {"dp_hash": [], "dp_hash_buckets": [], "default_scores": []}

    # The first 32 bits of the source MAC stay from the frame; the last 32 are dp_hash.
    shv = SelectBridge(
        ovs, "shv", 0x51, (1,), bucket_prefix="move:NXM_NX_DP_HASH[0..31]->NXM_OF_ETH_SRC[0..31],"
    )
    frames = [frame(h, i) for i, h in enumerate(VECTOR_HEADERS)]
    lis = Listener(shv.ports)
    try:
        packet_out(ovs, "shv", 1, frames)
        lis.wait(set(range(len(frames))))
    finally:
        lis.close()
    for i, h in enumerate(VECTOR_HEADERS):
        got = lis.frames[i]
        out["dp_hash"].append({"header": h, "dp_hash": int.from_bytes(got[8:12], "big")})

    for k, weights in enumerate(TABLE_WEIGHTS):
        br = f"sht{k}"
        SelectBridge(ovs, br, 0x60 + k, weights)
        buckets = []
        for x in range(64):
            text = _trace(ovs, br, f"in_port=1,ip,dp_hash={256 + x}")
            (b,) = re.findall(r"using bucket (\d+)", text)
            buckets.append(int(b))
        out["dp_hash_buckets"].append({"weights": list(weights), "dp_hash_base": 256,
                                       "buckets": buckets})  # fmt: skip

    SelectBridge(ovs, "shd", 0x70, DEFAULT_WEIGHTS)
    for i, h in enumerate(VECTOR_HEADERS):
        text = _trace(ovs, "shd", "in_port=1", frame(h, i).hex())
        scores = [int(s) for _, s in re.findall(r"bucket (\d+): score (\d+)", text)]
        (b,) = re.findall(r"using bucket (\d+)", text)
        out["default_scores"].append(
            {"weights": list(DEFAULT_WEIGHTS), "header": h, "scores": scores, "bucket": int(b)}
        )
    return out


def main() -> None:
    """Print the vectors as JSON: PAZZ_OVS_PREFIX=... python -m tests.ovs.select_oracle."""
    import os
    import shutil
    import tempfile

    from pazzlab.ovs import OvsInstance

    rundir = tempfile.mkdtemp(prefix="pazz-selvec-")
    ovs = OvsInstance(os.environ["PAZZ_OVS_PREFIX"], rundir)
    try:
        ovs.start()
        vectors = collect_vectors(ovs)
    finally:
        ovs.stop()
        shutil.rmtree(rundir, True)
    # One vector a line.
    parts = [
        f'  "{key}": [\n' + ",\n".join(f"    {json.dumps(v)}" for v in vs) + "\n  ]"
        for key, vs in vectors.items()
    ]
    print("{\n" + ",\n".join(parts) + "\n}")


if __name__ == "__main__":
    main()
