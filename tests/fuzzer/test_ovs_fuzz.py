"""The fuzzer against real patched OVS: a hidden rule found by the first boundary probes.

Four verify-enabled userspace bridges in the 2x2 grid of pazzdata.workloads.grid(2), hosts in
network namespaces on port 5, the generated workload's groups and flows installed with
ovs-ofctl. A hidden rule on s4 admits traffic that one of the intended ACLs drops. The
fuzzer plans probes for h1 -> h4 from the model and sends its first batch through a real
OpenFlow connection: ovs-vswitchd connects to a tiny OpenFlow 1.3 listener in this test,
which sends each probe as the PACKET_OUT that ofwire.packet_out encodes (in_port =
the edge port, actions = output:TABLE). The exit bridge's sFlow
reports (decoded by tester.sflow) must include a tagged report of a probe inside the hidden
rule, with tags the model does not expect; every other report must carry expected tags.
"""

from __future__ import annotations

import socket
import struct
import subprocess
import threading
import time
from pathlib import Path

import pytest

from cpc.fields import format_value
from cpc.model import Model
from fuzzer.craft import Crafter, probe_seq
from fuzzer.engine import Fuzzer
from fuzzer.inject import PacketOutInjector
from ofwire import packet_out
from pazzdata.workloads import generate
from tester.packet import is_report, parse_frame
from tester.sflow import decode
from tests.ovs.ovsenv import Netns, SflowSink, VethPair, unique_name

pytestmark = pytest.mark.ovs

OFP_VERSION = 4  # OpenFlow 1.3
OFPT_HELLO, OFPT_ECHO_REQUEST, OFPT_ECHO_REPLY = 0, 2, 3
OFPT_BARRIER_REQUEST, OFPT_BARRIER_REPLY = 20, 21


OVS_NAMES = {
    "ipv4_dst": "nw_dst",
    "ipv4_src": "nw_src",
    "ip_proto": "nw_proto",
    "tp_dst": "tp_dst",
    "tp_src": "tp_src",
    "eth_type": "dl_type",
    "eth_dst": "dl_dst",
    "eth_src": "dl_src",
}


def ovs_match(match) -> str:
    """ovs-ofctl text of a model match (dl_type first: OVS checks prerequisites in order)."""
    fields = sorted(match.fields, key=lambda x: x[0] != "eth_type")
    return ",".join(f"{OVS_NAMES[f]}={format_value(f, v, m)}" for f, v, m in fields)


def ovs_flow(e) -> str:
    acts = str(e.instructions).replace("drop", "")
    ident = f"set_verify_rule:{e.rule_id}," if e.rule_id else ""
    return (
        f"table={e.table},priority={e.priority},cookie={e.cookie:#x},{ovs_match(e.match)},"
        f"actions={ident}{acts}"
    ).rstrip(",")


class OpenFlowListener:
    """Accepts switch connections (the newest one is current): sends HELLO, answers echoes,
    tracks barrier replies, sends raw OpenFlow messages."""

    def __init__(self) -> None:
        self.srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.srv.bind(("127.0.0.1", 0))
        self.srv.listen(4)
        self.srv.settimeout(0.2)
        self.port = self.srv.getsockname()[1]
        self.conn: socket.socket | None = None
        self.barriers: set[int] = set()
        self._lock = threading.Lock()
        self._stop = False
        self._threads = [threading.Thread(target=self._accept, daemon=True)]
        self._threads[0].start()

    def _accept(self) -> None:
        while not self._stop:
            try:
                conn, _ = self.srv.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            conn.settimeout(0.2)
            conn.sendall(struct.pack(">BBHI", OFP_VERSION, OFPT_HELLO, 8, 1))
            with self._lock:
                self.conn = conn
            t = threading.Thread(target=self._read, args=(conn,), daemon=True)
            self._threads.append(t)
            t.start()

    def send(self, msg: bytes) -> None:
        with self._lock:
            conn = self.conn
        if conn is None:
            raise ConnectionError("no switch connection")
        conn.sendall(msg)

    def _read(self, conn: socket.socket) -> None:
        buf = b""
        while not self._stop:
            try:
                data = conn.recv(65536)
            except TimeoutError:
                continue
            except OSError:
                return
            if not data:
                return
            buf += data
            while len(buf) >= 8:
                _v, typ, length, xid = struct.unpack_from(">BBHI", buf)
                if len(buf) < length:
                    break
                msg, buf = buf[:length], buf[length:]
                if typ == OFPT_ECHO_REQUEST:
                    reply = struct.pack(">BBHI", OFP_VERSION, OFPT_ECHO_REPLY, length, xid)
                    conn.sendall(reply + msg[8:])
                elif typ == OFPT_BARRIER_REPLY:
                    self.barriers.add(xid)

    def barrier(self, xid: int, timeout: float = 3.0) -> bool:
        try:
            self.send(struct.pack(">BBHI", OFP_VERSION, OFPT_BARRIER_REQUEST, 8, xid))
        except OSError:
            return False
        deadline = time.monotonic() + timeout
        while xid not in self.barriers:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.01)
        return True

    def wait_ready(self, timeout: float = 30.0) -> None:
        """Until a barrier round trip succeeds twice, 0.5 s apart (a stable connection)."""
        deadline = time.monotonic() + timeout
        xid = 1000
        while time.monotonic() < deadline:
            xid += 2
            if self.barrier(xid) and (time.sleep(0.5) or self.barrier(xid + 1)):
                return
            time.sleep(0.2)
        raise TimeoutError("the switch did not connect")

    def close(self) -> None:
        self._stop = True
        if self.conn is not None:
            self.conn.close()
        self.srv.close()
        for t in self._threads:
            t.join(timeout=2)


def _ofctl(ovs, *args):
    try:
        return ovs.ofctl(*args)
    except subprocess.CalledProcessError as e:
        raise AssertionError(f"ovs-ofctl {' '.join(args)}: {e.stderr}") from e


@pytest.fixture
def grid_net(ovs, cleanup, tmp_path):
    wl = generate("grid", 2, 200, rule_ids=True)
    topo = wl.topo
    # Unique names: a userspace bridge is also a tap device in the root namespace.
    bridges = {d: unique_name(f"s{d}") for d in sorted(topo.switches)}
    for d, br in bridges.items():
        ovs.add_bridge(br, dpid=d, other_config={"verify-tagging": "true"})
    # A real OpenFlow connection from s1 to this test's listener. Set before any flow is
    # installed: changing a bridge's controllers flushes its flow table.
    of = OpenFlowListener()
    cleanup.push(of.close)
    ovs.vsctl(
        "set-controller",
        bridges[1],
        f"tcp:127.0.0.1:{of.port}",
        "--",
        "set",
        "controller",
        bridges[1],
        "connection-mode=out-of-band",
    )
    done = set()
    for (a, pa), (b, pb) in topo.links.items():
        if ((b, pb), (a, pa)) in done:
            continue
        done.add(((a, pa), (b, pb)))
        na, nb = unique_name(f"l{a}{b}a"), unique_name(f"l{a}{b}b")
        pair = VethPair(na, nb)
        cleanup.push(pair.delete)
        ovs.add_port(bridges[a], na, pa)
        ovs.add_port(bridges[b], nb, pb)
    ifindex, hosts = {}, {}
    for name, (d, p) in sorted(wl.hosts.items()):
        ns = Netns(unique_name(name))
        cleanup.push(ns.delete)
        link = VethPair.host(ns, "eth0", f"192.0.2.{d}/24")
        cleanup.push(link.delete)
        ovs.add_port(bridges[d], link.outer, p, {"verify-edge": "true"})
        hosts[(d, p)] = (ns, link.outer)
        # sFlow names interfaces by ifIndex: the kernel ifindex of the veth (README).
        ifindex[(d, p)] = int(Path(f"/sys/class/net/{link.outer}/ifindex").read_text())
    for br in bridges.values():  # the bridge's management socket exists
        deadline = time.monotonic() + 90
        while (
            subprocess.run(
                [ovs.bin["ovs-ofctl"], "show", br], env=ovs.env, capture_output=True
            ).returncode
            != 0
        ):
            if time.monotonic() > deadline:
                log = ovs.log_tail(40)
                if "ovs-netdev: creating tap device failed" in log:
                    # The userspace datapath's tap device 'ovs-netdev' is global to the root
                    # namespace: another ovs-vswitchd running at the same time holds it.
                    pytest.skip("another ovs-vswitchd holds the ovs-netdev tap device")
                raise AssertionError(f"bridge {br}: no management socket\n{log}")
            time.sleep(0.2)
    for d, br in bridges.items():
        groups = [g for g in wl.groups if g.dpid == d]
        if groups:
            f = tmp_path / f"{br}.groups"
            f.write_text(
                "".join(
                    f"group_id={g.group_id},type={g.type},"
                    + ",".join("bucket=" + ",".join(f"output:{a[1]}" for a in b) for b in g.buckets)
                    + "\n"
                    for g in groups
                )
            )
            _ofctl(ovs, "add-groups", br, str(f))
        f = tmp_path / f"{br}.flows"
        f.write_text("".join(ovs_flow(e) + "\n" for e in wl.entries if e.dpid == d))
        _ofctl(ovs, "add-flows", br, str(f))
    sflow = SflowSink()
    cleanup.push(sflow.stop)
    ovs.vsctl(
        "--",
        "--id=@s",
        "create",
        "sflow",
        "agent=lo",
        f'target="127.0.0.1:{sflow.port}"',
        "sampling=1",
        "header=128",
        "polling=600",
        *[x for br in bridges.values() for x in ("--", "set", "bridge", br, "sflow=@s")],
    )
    # hosts: {edge port: (namespace, OVS-side interface)}
    return wl, bridges, sflow, ifindex, of, hosts


def test_hidden_rule_found_by_boundary_probes(ovs, cleanup, grid_net):
    wl, bridges, sflow, ifindex, of, _ = grid_net
    model = Model(wl.topo)
    model.add_entries(wl.entries, wl.groups)
    # The hidden rule: on s4, admit what the first intended ACL there drops.
    acl = next(e for e in wl.entries if e.dpid == 4 and e.priority == 1000)
    ovs.ofctl("add-flow", bridges[4], f"priority=2000,{ovs_match(acl.match)},actions=output:5")

    # The fuzzer's boundary probes for h1 -> h4: at least 64, and on until one lies in the
    # hidden rule (Match.contains; how soon is the simulations' subject, not this test's).
    fz = Fuzzer(model, pairs=[((1, 5), (4, 5))], seed=2, subscribe=False)
    boundary = []
    while len(boundary) < 64 or not any(acl.match.contains(p.header, 5) for p in boundary):
        assert len(boundary) < 2000, "no boundary probe in the ACL's dropped headers"
        probes = fz.next_probes(32)
        fz.record(probes)
        boundary += [p for p in probes if p.area == "boundary"]

    of.wait_ready()
    assert len(ovs.dump_flows(bridges[1]).splitlines()) > 40  # still the workload's flows
    crafter = Crafter(pretag=True)
    xid = iter(range(100, 1 << 30))
    inj = PacketOutInjector(lambda dpid, port, data: of.send(packet_out(next(xid), port, data)))
    for pr in boundary:
        inj.inject(pr.ingress, [crafter.frame(pr.header, pr.seq)])
    assert of.barrier(7, timeout=10)
    time.sleep(2.0)  # sFlow datagrams are flushed once a second
    sflow.stop()

    by_seq = {pr.seq: pr for pr in boundary}
    reports = []
    for d in sflow.datagrams:
        for s in decode(d).flows:
            if is_report(s) and s.header:
                reports.append(s)
    egress_of = {v: k for k, v in ifindex.items()}
    found = []
    for s in reports:
        pf = parse_frame(s.header)
        seq = probe_seq(s.header)
        if seq not in by_seq:
            continue
        assert pf.has_verify
        egress = egress_of[s.output]
        exp = model.expected(egress, pf.header)
        ok = any(e.verify_port == pf.verify_port and e.verify_rule == pf.verify_rule for e in exp)
        if acl.match.contains(pf.header, 5):
            assert egress == (4, 5) and not ok
            found.append(seq)
        else:  # injected like real traffic: tags as the model expects
            assert ok, (egress, pf.header, exp)
    print(f"{len(reports)} reports, {len(found)} of probes in the hidden rule")
    assert found, f"no report of a probe in the hidden rule among {len(reports)} reports"
