"""The end-to-end demo: `make demo` (or `python -m pazzlab.demo`, as root).

Builds a Mininet network of patched userspace OVS bridges (pazzlab.lab), starts the example
os-ken controller app (examples/controller_app.py) on the generator's rule file and pazzd
with its OpenFlow proxy (model + tester + sFlow collector + fuzzer); the bridges connect to
the proxy, which relays the controller's GroupMods and FlowMods and builds the model from
them. Once the model holds every rule it replays production traffic with tcpreplay inside
the host namespaces, then injects one fault of each class with ovs-ofctl directly on a
switch, behind the controller's back, and shows detection and localization live. Ends
with a summary table and removes everything (namespaces, veths, OVS processes, controller,
pazzd, temp dirs), also on Ctrl-C. With --no-controller the rules go on with ovs-ofctl and
pazzd loads its model from the same rule file.

    python -m pazzlab.demo [--duration 75] [--topology grid4|grid16|fattree] [--no-fuzz] [--hold]
                         [--no-controller]
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from cpc.fields import parse_header
from cpc.ofctl import format_flow, format_match, split_top
from cpc.refdp import RefDataPlane
from cpc.rules import Instructions
from pazzapi import ApiError, call
from pazzdata import workloads

from .lab import Lab, LabError, dotted, load_network, ovs_prefix
from .ovs import AGENT, free_tcp_port, free_udp_port, start_controller, stop_processes
from .scaleout import SHARDS, start_components, start_nats

TOPOLOGIES = {
    "grid4": ("grid", 2, 100, 2, 100),  # kind, size, rules, acls, pps per host
    "grid16": ("grid", 4, 400, 1, 25),
    "fattree": ("fattree", 4, 400, 1, 20),
}
HIDDEN_COOKIE = 0xBAD
EXPECT = {
    "hidden": "type_p_match",
    "misroute": "type_p_action",
    "admit": "type_a",
    "delete": "blackhole",
}


class Interrupted(Exception):
    pass


@dataclass
class Fault:
    key: str
    title: str
    dpid: int
    inject: list  # (ofctl command, args...)
    expect_entry: str = ""
    injected_at: float = 0.0
    detected: dict | None = None
    localized: dict | None = None
    latency: float | None = None
    loc_seconds: float | None = None
    notes: list = field(default_factory=list)


class View:
    """Live status: ANSI redraw on a terminal, plain event lines otherwise."""

    def __init__(self, tty: bool) -> None:
        self.tty = tty
        self.events: list[str] = []
        self.t0 = time.monotonic()
        self.phase = "starting"
        self.pinned: list[str] = []  # drawn under the title on every redraw (the view's URL)
        self._last_plain = 0.0

    def event(self, msg: str) -> None:
        line = f"[{time.monotonic() - self.t0:6.1f}s] {msg}"
        self.events.append(line)
        if not self.tty:
            print(line, flush=True)

    def draw(self, status: dict | None, faults: list, summary_rows: list) -> None:
        if not self.tty:
            now = time.monotonic()
            if status and now - self._last_plain >= 10:
                self._last_plain = now
                print(f"[{now - self.t0:6.1f}s] status: {_status_line(status)}", flush=True)
            return
        out = [
            "\x1b[H\x1b[2J",
            f"\x1b[1mPAZZ demo\x1b[0m  {self.phase}   t={time.monotonic() - self.t0:5.1f}s",
        ]
        out += self.pinned
        if status:
            out.append(_status_line(status))
        out.append("")
        out.append("\x1b[1mfaults\x1b[0m")
        rows = [("id", "state", "class", "location", "localized at", "entry")]
        for f in faults[-10:]:
            p = f.get("polled") or {}
            rows.append(
                (
                    str(f["id"]),
                    f["state"],
                    f["kind"],
                    f["location"],
                    p.get("switch", "...") if p else "...",
                    p.get("cause") or "",  # in full, last: a long one wraps
                )
            )
        out += _rows(rows) if len(rows) > 1 else ["  none"]
        out.append("")
        out.append("\x1b[1minjected\x1b[0m")
        out += _rows(summary_rows) if len(summary_rows) > 1 else ["  none yet"]
        out.append("")
        out.append("\x1b[1mevents\x1b[0m")
        out += ["  " + e for e in self.events[-10:]]
        sys.stdout.write("\n".join(out) + "\n")
        sys.stdout.flush()


def _rows(rows) -> list[str]:
    w = [max(len(str(r[i])) for r in rows) for i in range(len(rows[0]))]
    return [
        "  " + "  ".join(str(c).ljust(x) for c, x in zip(r, w, strict=True)).rstrip() for r in rows
    ]


def _status_line(st: dict) -> str:
    t = st["tester"]
    fz = st.get("fuzz") or {}
    fuzz = (
        f", fuzz {fz.get('probes_sent_total', 0)} probes ({fz.get('areas_recent', 0)} of "
        f"{fz.get('areas', 0)} areas in the last {fz.get('window_s', 0):.0f} s)"
        if fz
        else ", fuzz off"
    )
    return (
        f"model {st['model']['rules']} rules/{st['model']['classes']} classes | sFlow "
        f"{t.get('datagrams', 0)} dgrams | reports {t.get('reports', 0)}: "
        f"{t.get('consistent', 0)} ok, {t.get('fault_samples', 0)} faulty, "
        f"{t.get('held_transient', 0)} held | open faults "
        f"{sum(st['faults_open'].values())}{fuzz}"
    )


def _transit_misroute(lab: Lab, entries, groups):
    """(entry, old port, new port, source host) for a misroute on a transit switch: a
    single-output route on a link sent out of another link. OVS hashes each flow onto one
    SELECT bucket, so the choice maximizes the share of the reference data plane's paths
    from the source that cross the switch and still arrive, misrouted, at the exit."""
    wl, topo = lab.wl, lab.topo
    grps = list(groups.values())
    best, best_share = None, 0.0
    # In a fixed order: build_faults runs before the switches hold the proxy's rule IDs
    # (for the traffic) and after (for the faults); both runs must pick the same route.
    for e in sorted(entries, key=lambda x: (x.dpid, x.table, x.priority, x.match.fields)):
        if e.priority != workloads.ROUTE_PRIORITY or len(e.instructions.apply) != 1:
            continue
        kind, port = e.instructions.apply[0][:2]
        if kind != "output" or (e.dpid, port) not in topo.links:
            continue
        net = e.match.get("ipv4_dst")[0]
        exit_port = wl.hosts[lab.owner(net)]
        hdr = parse_header(f"nw_dst={dotted(net + 20)},udp_dst=443")
        for p in topo.ports_of(e.dpid):
            if p == port or (e.dpid, p) not in topo.links:
                continue
            bad = dataclasses.replace(e, instructions=Instructions((("output", p),)))
            ref = RefDataPlane(topo, [bad if x is e else x for x in entries], grps)
            for h, ing in sorted(wl.hosts.items()):
                if ing[0] in (e.dpid, exit_port[0]):
                    continue
                ds = ref.send(ing, hdr)
                hit = sum(
                    1
                    for d in ds
                    if d.kind == "egress"
                    and d.egress == exit_port
                    and any(x.dpid == e.dpid for x in d.hops)
                )
                if ds and hit / len(ds) > best_share:
                    best, best_share = (e, port, p, h), hit / len(ds)
    if best is None:
        raise RuntimeError("no route in this workload can be misrouted for the demo")
    return best


def build_faults(lab: Lab) -> tuple[list[Fault], dict]:
    """One fault of each class for this workload, and the traffic each needs."""
    if lab.sources is not None:
        return build_faults_any(lab)
    wl, topo = lab.wl, lab.topo
    entries = lab.intended_entries()  # rule IDs as on the switches
    names = sorted(wl.hosts, key=lambda h: int(h[1:]))
    h1, h2 = names[0], names[1]
    x1 = wl.hosts[h1][0]
    nets_of = {h: sorted(n for n, o in wl.prefixes.items() if o == h) for h in names}

    def route(dpid: int, net: int):
        for e in entries:
            if (
                e.dpid == dpid
                and e.priority == workloads.ROUTE_PRIORITY
                and e.match.get("ipv4_dst") == (net, 0xFFFFFF00)
            ):
                return e
        raise LookupError((dpid, net))

    extra: dict[str, list] = {
        h: [] for h in names
    }  # host -> [(dst ip, sport, proto, dport, src ip)]
    # 1. hidden higher-priority rule, same output: h1 -> a /32 in h2's first prefix.
    net = nets_of[h2][0]
    target = net + 77
    acts = ",".join(
        a
        for a in split_top(format_flow(route(x1, net)).partition(",actions=")[2])
        if not a.startswith("set_verify_rule")
    )
    hidden = f"priority=100,cookie={HIDDEN_COOKIE:#x},ip,nw_dst={dotted(target)},actions={acts}"
    extra[h1] += [(target, 7000 + i, 17, 80, None) for i in range(4)]
    f1 = Fault(
        "hidden",
        f"hidden higher-priority rule on {topo.switches[x1].name} "
        f"(nw_dst={dotted(target)}, same output)",
        x1,
        [("add-flow", hidden)],
        expect_entry=f"cookie={HIDDEN_COOKIE:#x}",
    )
    # 2. same match, different output: a single-output route on a link, sent elsewhere,
    # preferably to a neighbour whose own route for the prefix does not lead back (on a
    # larger grid the packets would otherwise bounce until their TTL runs out: a loop,
    # not a misroute, and no report would ever show it).
    groups = {(g.dpid, g.group_id): g for g in wl.groups}

    def route_ports(dpid: int, net: int) -> set[int]:
        ports = set()
        for a in route(dpid, net).instructions.apply:
            if a[0] == "output":
                ports.add(a[1])
            elif a[0] == "group":
                ports |= {b[0][1] for b in groups[(dpid, a[1])].buckets}
        return ports

    def onward(dpid: int, port: int, net: int) -> int:
        """2: the neighbour's route never leads back; 1: some of its paths do not; 0: none."""
        nb, nb_port = topo.links[(dpid, port)]
        ports = route_ports(nb, net)
        return 2 if nb_port not in ports else 1 if ports - {nb_port} else 0

    best, score = None, 0
    for e in entries:
        if e.priority != workloads.ROUTE_PRIORITY or len(e.instructions.apply) != 1:
            continue
        kind, port = e.instructions.apply[0][:2]
        if kind != "output" or (e.dpid, port) not in topo.links:
            continue
        src_host = next((h for h, p in wl.hosts.items() if p[0] == e.dpid), None)
        if src_host is None:
            continue
        net = e.match.get("ipv4_dst")[0]
        for p in topo.ports_of(e.dpid):
            if (e.dpid, p) in topo.links and p != port and onward(e.dpid, p, net) > score:
                best, score = (e, port, p, src_host), onward(e.dpid, p, net)
        if score == 2:
            break
    if best is None:  # no host sits at a single-output route (a fat-tree's edge uses groups)
        best = _transit_misroute(lab, entries, groups)
    e2, p_old, p_new, src2 = best
    net2 = e2.match.get("ipv4_dst")[0]
    text2 = format_flow(e2).replace(f"output:{p_old}", f"dec_ttl,output:{p_new}")
    extra[src2] += [(net2 + 20 + i, 7100 + i, 17, 443, None) for i in range(12)]
    f2 = Fault(
        "misroute",
        f"route on {topo.switches[e2.dpid].name} to {dotted(net2)}/24: "
        f"output {p_old} -> {p_new} (same match)",
        e2.dpid,
        [("mod-flows", "--strict", text2)],
        expect_entry=f"output:{p_new}",
    )
    # 3. hidden rule admitting traffic an ACL drops.
    acl = next(
        e
        for e in entries
        if e.priority == workloads.ACL_PRIORITY
        and wl.prefixes[e.match.get("ipv4_src")[0]] != wl.prefixes[e.match.get("ipv4_dst")[0]]
    )
    src_net, dst_net = acl.match.get("ipv4_src")[0], acl.match.get("ipv4_dst")[0]
    proto, dport = acl.match.get("ip_proto")[0], acl.match.get("tp_dst")[0]
    x3 = acl.dpid
    host_port = wl.hosts[wl.prefixes[dst_net]][1]
    head = format_flow(acl).partition(",actions=")[0]
    head = head.replace(f"priority={workloads.ACL_PRIORITY}", "priority=2000").replace(
        "cookie=0x20", f"cookie={HIDDEN_COOKIE:#x}"
    )
    admit = f"{head},actions=output:{host_port}"
    src3 = wl.prefixes[src_net]
    extra[src3] += [(dst_net + 9, 7200 + i, proto, dport, src_net + 3) for i in range(3)]
    f3 = Fault(
        "admit",
        f"hidden rule on {topo.switches[x3].name} admitting ACL-dropped "
        f"{dotted(src_net)}/24 -> {dotted(dst_net)}/24 proto {proto} port {dport}",
        x3,
        [("add-flow", admit)],
        expect_entry=f"cookie={HIDDEN_COOKIE:#x}",
    )
    # 4. deleted route: blackhole for the critical flow h1 -> h2.
    net4 = nets_of[h2][1] if len(nets_of[h2]) > 1 else net
    crit_ip = net4 + 33
    extra[h1] += [(crit_ip, 7300, 6, 80, None)] * 6
    f4 = Fault(
        "delete",
        f"route on {topo.switches[x1].name} to {dotted(net4)}/24 deleted "
        f"(critical flow {h1}->{h2})",
        x1,
        [
            (
                "del-flows",
                "--strict",
                f"priority={workloads.ROUTE_PRIORITY},ip,nw_dst={dotted(net4)}/24",
            )
        ],
        expect_entry=f"{dotted(net4)}/24",
    )
    crit = {
        "name": f"{h1}-{h2}",
        "from": topo.port_name(wl.hosts[h1]),
        "to": topo.port_name(wl.hosts[h2]),
        "header": f"ipv4_src={lab.host_ip(h1)},ipv4_dst={dotted(crit_ip)},tcp_src=7300,tcp_dst=80",
        "timeout": 3.0,
    }
    return [f1, f2, f3, f4], {"extra": extra, "critical": crit}


def _acts(e) -> str:
    """The entry's actions in ovs-ofctl syntax, without its rule ID."""
    return (
        ",".join(
            a
            for a in split_top(format_flow(e).partition(",actions=")[2])
            if not a.startswith("set_verify_rule")
        )
        or "drop"
    )


def _winner(entries, hop, header):
    """The table-0 entry a hop matched (the reference data plane gives only its identity)."""
    ref = hop.rules[0]
    for e in sorted(entries, key=lambda x: -x.priority):
        if (
            e.dpid == hop.dpid
            and e.table == ref.table
            and e.priority == ref.priority
            and e.match.contains(header, hop.in_port)
        ):
            return e
    return None


def build_faults_any(lab: Lab) -> tuple[list[Fault], dict]:
    """One fault of each class, where the operator's network has a place for it, found with
    the reference data plane (cpc.refdp) over the host pairs the rules connect: traffic is
    TCP/80 and UDP/53 between every such pair. A class the network has no place for is left
    out (the demo says so)."""
    topo, entries = lab.topo, lab.intended_entries()
    groups = list(lab.wl.groups)
    names = sorted(lab.wl.hosts, key=lab.host_index)
    ip = {h: lab.addrs[h].ip for h in names}
    # host -> [(dst ip, sport, proto, dport, src ip, dst host)]
    extra: dict[str, list] = {h: [] for h in names}
    paths = []  # (src, dst, header text, delivery) for pairs delivered on one path
    for a in names:
        for b in names:
            if a == b:
                continue
            text = f"ipv4_src={ip[a]},ipv4_dst={ip[b]},tcp_src=7300,tcp_dst=80"
            ds = RefDataPlane(topo, entries, groups).send(lab.wl.hosts[a], parse_header(text))
            if ds and all(d.kind == "egress" and d.egress == lab.wl.hosts[b] for d in ds):
                paths.append((a, b, text, ds[0]))
                extra[a] += [
                    (_ip(ip[b]), 5000 + len(extra[a]), 6, 80, None, b),
                    (_ip(ip[b]), 5001 + len(extra[a]), 17, 53, None, b),
                ]
    if not paths:
        raise RuntimeError("the rules deliver no traffic between any two hosts")
    paths.sort(key=lambda x: -len(x[3].hops))  # the longest path first: transit switches
    faults = []
    a, b, text, d = paths[0]
    hdr = parse_header(text)
    # 1. hidden higher-priority /32 rule, same actions, on the first hop.
    e = _winner(entries, d.hops[0], hdr)
    top = max(x.priority for x in entries if x.dpid == e.dpid) + 1
    hidden = f"priority={top},cookie={HIDDEN_COOKIE:#x},ip,nw_dst={ip[b]},actions={_acts(e)}"
    faults.append(
        Fault(
            "hidden",
            f"hidden higher-priority rule on {topo.switches[e.dpid].name}"
            f" (nw_dst={ip[b]}, same actions)",
            e.dpid,
            [("add-flow", hidden)],
            expect_entry=f"cookie={HIDDEN_COOKIE:#x}",
        )
    )
    # 2. misroute: a single-output entry on some path sent out of another port, where the
    # packets still reach their exit, over another path (a wrong egress is another class).
    mis = None
    for a2, _b2, text2, d2 in paths:
        h2 = parse_header(text2)
        for hop in d2.hops:
            e2 = _winner(entries, hop, h2)
            if e2 is None or len(e2.instructions.apply) != 1 or mis:
                continue
            kind, port = e2.instructions.apply[0][:2]
            for q in topo.ports_of(e2.dpid) if kind == "output" else ():
                if q in (port, hop.in_port):
                    continue
                bad = dataclasses.replace(e2, instructions=Instructions((("output", q),)))
                ds = RefDataPlane(topo, [bad if x is e2 else x for x in entries], groups)
                ds = ds.send(lab.wl.hosts[a2], h2)
                if ds and all(
                    x.kind == "egress" and x.egress == d2.egress and x.hops != d2.hops for x in ds
                ):
                    mis = (e2, port, q, text2)
                    break
    if mis:
        e2, port, q, text2 = mis
        new = format_flow(e2).replace(f"output:{port}", f"dec_ttl,output:{q}")
        faults.append(
            Fault(
                "misroute",
                f"{topo.switches[e2.dpid].name}: "
                f"{format_match(e2.match)} output {port} -> {q} (same match)",
                e2.dpid,
                [("mod-flows", "--strict", new)],
                expect_entry=f"output:{q}",
            )
        )
    # 3. a hidden rule admitting traffic an ACL (a drop entry) drops: a host pair whose
    # traffic the ACL's match covers is delivered without the ACL.
    adm = None
    for acl in (x for x in entries if x.instructions.drops() and x.match.get("ipv4_dst")):
        for a3 in names:
            for b3 in names:
                v = {f: val for f, val, m in acl.match.fields}
                dst = _ip(ip[b3])
                net, mask = acl.match.get("ipv4_dst")
                if a3 == b3 or dst & mask != net or adm:
                    continue
                h3 = parse_header(f"ipv4_src={ip[a3]},ipv4_dst={ip[b3]}")
                h3.update({f: val for f, val in v.items() if f not in ("ipv4_src", "ipv4_dst")})
                h3["ipv4_src"] = (
                    v["ipv4_src"] | _ip(ip[a3]) & ~acl.match.get("ipv4_src")[1]
                    if "ipv4_src" in v
                    else _ip(ip[a3])
                )
                ds = RefDataPlane(topo, [x for x in entries if x is not acl], groups)
                ds = ds.send(lab.wl.hosts[a3], h3)
                hop = next((h for x in ds for h in x.hops if h.dpid == acl.dpid), None)
                if ds and all(x.kind == "egress" for x in ds) and hop and hop.out_port:
                    adm = (acl, hop.out_port, a3, b3, h3)
    if adm:
        acl, out, a3, b3, h3 = adm
        head = f"priority={acl.priority + 1000},cookie={HIDDEN_COOKIE:#x},{format_match(acl.match)}"
        faults.append(
            Fault(
                "admit",
                f"hidden rule on {topo.switches[acl.dpid].name} admitting "
                f"ACL-dropped {format_match(acl.match)}",
                acl.dpid,
                [("add-flow", f"{head},actions=output:{out}")],
                expect_entry=f"cookie={HIDDEN_COOKIE:#x}",
            )
        )
        proto, dport = h3.get("ip_proto", 6), h3.get("tp_dst", 80)
        extra[a3] += [
            (h3["ipv4_dst"], 7200 + i, proto if proto in (6, 17) else 6, dport, h3["ipv4_src"], b3)
            for i in range(3)
        ]
    # 4. a deleted entry under the critical flow a -> b (the first one whose loss drops it).
    crit = {
        "name": f"{a}-{b}",
        "from": topo.port_name(lab.wl.hosts[a]),
        "to": topo.port_name(lab.wl.hosts[b]),
        "header": text,
        "timeout": 3.0,
    }
    extra[a] += [(_ip(ip[b]), 7300, 6, 80, None, b)] * 6
    for hop in d.hops:
        e4 = _winner(entries, hop, hdr)
        ds = RefDataPlane(topo, [x for x in entries if x is not e4], groups)
        if e4 is not None and all(x.kind == "drop" for x in ds.send(lab.wl.hosts[a], hdr)):
            head = format_flow(e4).partition(",actions=")[0]
            head = ",".join(w for w in head.split(",") if not w.startswith("cookie="))
            faults.append(
                Fault(
                    "delete",
                    f"{topo.switches[e4.dpid].name}: {format_match(e4.match)}"
                    f" deleted (critical flow {a}->{b})",
                    e4.dpid,
                    [("del-flows", "--strict", head)],
                )
            )
            break
    return faults, {"extra": extra, "critical": crit}


def _ip(text: str) -> int:
    return int.from_bytes(socket.inet_aton(text), "big")


def write_pcaps(lab: Lab, extra: dict, outdir: Path) -> dict[str, Path]:
    from scapy.all import IP, TCP, UDP, Ether, Raw, wrpcap

    if lab.sources is not None:  # build_faults_any's flows name their destination host
        files = {}
        for h, flows in extra.items():
            pkts = [
                Ether(src=lab.host_mac(h), dst=lab.host_mac(owner))
                / IP(src=dotted(src) if src else lab.host_ip(h), dst=dotted(dst), ttl=64)
                / (TCP(sport=sp, dport=dp, flags="A") if proto == 6 else UDP(sport=sp, dport=dp))
                / Raw(b"pazz-demo-" * 6)
                for dst, sp, proto, dp, src, owner in flows
            ]
            if pkts:
                files[h] = outdir / f"host{lab.host_index(h)}.pcap"
                wrpcap(str(files[h]), pkts)
        return files
    wl = lab.wl
    names = sorted(wl.hosts, key=lambda h: int(h[1:]))
    nets_of = {h: sorted(n for n, o in wl.prefixes.items() if o == h) for h in names}
    files = {}
    for h in names:
        pkts = []
        flows = []
        for other in names:
            if other == h:
                continue
            for j, net in enumerate(nets_of[other][:2]):
                flows.append((net + 10 + j, 5000 + len(flows), 17, 53, None))
                flows.append((net + 100 + j, 5000 + len(flows), 6, 80, None))
        flows += extra.get(h, [])
        for dst, sport, proto, dport, src in flows:
            owner = wl.prefixes[dst & 0xFFFFFF00]
            l4 = (
                TCP(sport=sport, dport=dport, flags="A")
                if proto == 6
                else UDP(sport=sport, dport=dport)
            )
            pkt = (
                Ether(src=lab.host_mac(h), dst=lab.host_mac(owner))
                / IP(src=dotted(src) if src else lab.host_ip(h), dst=dotted(dst), ttl=64)
                / l4
                / Raw(b"pazz-demo-" * 6)
            )
            pkts.append(pkt)
        path = outdir / f"{h}.pcap"
        wrpcap(str(path), pkts)
        files[h] = path
    return files


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="pazzlab.demo", description=__doc__.split("\n\n")[0])
    ap.add_argument("--duration", type=float, default=75.0, help="total seconds (about)")
    ap.add_argument(
        "--topology",
        default="grid4",
        metavar="|".join(sorted(TOPOLOGIES)) + "|FILE",
        help="a built-in network, or your own topology YAML (with --rules)",
    )
    ap.add_argument(
        "--rules",
        metavar="FILE",
        help="the rule file of --topology FILE "
        "(JSON lines or dump-flows text), installed by the controller app",
    )
    ap.add_argument("--no-fuzz", action="store_true", help="no fuzz probes")
    ap.add_argument(
        "--no-controller",
        action="store_true",
        help="install the rules with ovs-ofctl, pazzd loads them from the file "
        "(no controller, no proxy)",
    )
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    ap.add_argument(
        "--hold",
        action="store_true",
        help="after the faults, keep the network, pazzd and the web view up until Ctrl-C",
    )
    ap.add_argument(
        "--ui-port",
        type=int,
        default=9474,
        metavar="PORT",
        help="pazzd's web view on 127.0.0.1:PORT (default 9474; another free port if taken)",
    )
    args = ap.parse_args(argv)
    args.network = None
    if args.topology not in TOPOLOGIES:
        if not args.rules:
            ap.error("--rules FILE is needed with a topology file")
        try:
            args.network = load_network(args.topology, args.rules)
        except LabError as e:
            print(f"demo: error: {e}", file=sys.stderr)
            return 2
    if os.geteuid() != 0:
        print("demo: run as root (network namespaces, OVS)", file=sys.stderr)
        return 2
    for tool in ("tcpreplay", "ip", "mnexec"):
        if shutil.which(tool) is None:
            print(f"demo: {tool} is missing (make deps)", file=sys.stderr)
            return 2
    prefix = ovs_prefix("demo")

    def on_signal(signum, frame):
        raise Interrupted(signal.Signals(signum).name)

    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(sig, on_signal)
    workdir = Path(tempfile.mkdtemp(prefix="pazz-demo-"))
    view = View(sys.stdout.isatty())
    procs: list[subprocess.Popen] = []
    labs: list[Lab] = []  # the lab, once _run has made it: stopped on the way out
    rc = 1
    try:
        rc = _run(args, prefix, workdir, view, procs, labs)
    except Interrupted as e:
        print(f"\ndemo: interrupted ({e}); cleaning up", flush=True)
        rc = 130
    except Exception as e:
        print(f"\ndemo: failed: {type(e).__name__}: {e}", flush=True)
        for name in ("controller", "pazzd"):
            log = workdir / f"{name}.log"
            if log.exists():
                tail = "\n".join(log.read_text(errors="replace").splitlines()[-30:])
                print(f"--- {name} log (tail) ---\n{tail}")
        rc = 1
    finally:
        for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
            signal.signal(sig, signal.SIG_IGN)  # no second interruption mid-cleanup
        _cleanup(procs, labs, workdir, args.keep)
        for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
            signal.signal(sig, signal.SIG_DFL)
    return rc


def _cleanup(procs, labs: list[Lab], workdir: Path, keep: bool) -> None:
    stop_processes(procs)
    for lb in labs:
        lb.stop()
    labs.clear()
    if keep:
        print(f"demo: work directory kept: {workdir}")
    else:
        shutil.rmtree(workdir, ignore_errors=True)
    print(
        "demo: cleaned up (namespaces, veths, OVS, controller, pazzd, tcpreplay, temp files)",
        flush=True,
    )


def metrics_of(url: str) -> dict[str, float]:
    """pazzd's Prometheus endpoint as {'name{labels}': value}."""
    text = urllib.request.urlopen(url, timeout=5).read().decode()
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            k, _, v = line.rpartition(" ")
            out[k] = float(v)
    return out


def wait_for_pazzd(pz: subprocess.Popen, sock: str, timeout: float = 120) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        if pz.poll() is not None:
            raise RuntimeError(f"pazzd exited with status {pz.returncode}")
        with contextlib.suppress(ApiError, OSError, ValueError):
            return call(sock, "status", timeout=5)
        if time.monotonic() > deadline:
            raise RuntimeError(f"pazzd did not become ready in {timeout:.0f} s")
        time.sleep(0.3)


def wait_for_model(lab: Lab, pz: subprocess.Popen, sock: str, timeout: float = 90) -> dict:
    """Until every switch is connected to pazzd's proxy, every proxy session has its
    controller link up, and the model holds as many rules as the generator made (all of
    them learnt from the FlowMods the proxy relayed). Returns the last status."""
    want, dpids = len(lab.wl.entries), sorted(lab.topo.switches)
    deadline = time.monotonic() + timeout
    st: dict = {}
    while True:
        if pz.poll() is not None:
            raise RuntimeError(f"pazzd exited with status {pz.returncode}")
        with contextlib.suppress(ApiError, OSError, ValueError):
            st = call(sock, "status", timeout=5)
            up = metrics_of(st["metrics"]).get("pazz_controller_connected", 0) == 1
            if (
                st["model"]["rules"] == want
                and st["switches_connected"] == dpids
                and up
                and all(lab.controllers_connected().values())
            ):
                return st
        if time.monotonic() > deadline:
            raise RuntimeError(
                f"the model holds {st.get('model', {}).get('rules')} of {want} rules, "
                f"switches connected {st.get('switches_connected')} after {timeout:.0f} s"
            )
        time.sleep(0.3)


def start_traffic(lab: Lab, extra: dict, workdir: Path, pps: int, procs: list) -> int:
    return replay(lab, write_pcaps(lab, extra, workdir), pps, procs)


def replay(lab: Lab, pcaps: dict[str, Path], pps: float, procs: list) -> int:
    """tcpreplay each host's pcap from its namespace at `pps`, looped, until stopped."""
    # --timer=nano: tcpreplay's default timer busy-waits (a whole core per process at
    # 25 pps); with nanosleep sixteen replays together cost about 1 % of a core.
    for h, path in pcaps.items():
        procs.append(
            lab.hosts[h]["ns"].popen(
                "tcpreplay",
                "-q",
                "-i",
                "eth0",
                f"--pps={pps}",
                "--loop=0",
                "--timer=nano",
                str(path),
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        )
    return len(pcaps)


@dataclass
class Running:
    """What bring_up started (every process is also in the caller's list)."""

    sock: str
    config: Path
    pazzd: subprocess.Popen
    controller: subprocess.Popen | None
    status: dict
    faults: list
    traffic: dict


def bring_up(
    lab: Lab,
    workdir: Path,
    procs: list,
    *,
    controller: bool = True,
    pps: int = 100,
    fuzz_rate: float = 200.0,
    resolve_after: float = 8.0,
    settle: float = 1.0,
    updates: Path | None = None,
    ui_listen: str | None = None,
    fuzz_inject: bool = True,
    extra: dict | None = None,
    apps: list[dict] | None = None,
    scaleout: int = 0,
    critical: bool = True,
    say=lambda s: None,
) -> Running:
    """Rules, pazzd and production traffic on a started lab.

    controller=True (the real control path): the example os-ken controller app
    (examples/controller_app.py --rules) listens on a free port; pazzd starts with its
    OpenFlow proxy on and an empty model; the bridges get pazzd's listen address as their
    controller, the proxy opens one upstream session per switch and relays the app's
    GroupMods and FlowMods, and the model is built from what it relays (the proxy adds
    its own rule IDs). Once the model holds every rule, the flow tables are snapshotted
    (lab.restore() puts them back), traffic starts, and the critical flow is declared with
    a config reload: its blackhole clock must not run while the network is still empty.

    controller=False: the rules go on with ovs-ofctl, pazzd loads the same rule file.
    `updates`: a file the controller app follows (examples/controller_app.py --updates).
    `ui_listen`: HOST:PORT of pazzd's web view (off without it). `extra`: more top-level
    sections of pazzd's config (intents, apps).
    `fuzz_inject`: False gives the fuzzer no host interface (Lab.config).
    `apps`: the example apps (examples/apps) instead of the example controller app, one
    controller process per item {"name", "apps": "router,acl", "lb_cookie"} (the first is
    the default controller; every switch connects to each through the proxy); `updates`
    is then the file the lb app follows.
    `critical`: False declares no critical flow (with controller=False).
    `scaleout`: this many `pazzd worker`s judge the samples (docs/scaling.md): a private
    nats-server, `scaleout.nats` in pazzd's config, and a `pazzd collector` on the lab's
    sFlow target (pazzd listens elsewhere); all on `procs`.
    """
    _, traffic = build_faults(lab)  # traffic and critical flow do not depend on rule IDs
    sock = str(workdir / "pazzd.sock")
    if scaleout:
        nats = start_nats(workdir, procs)
        extra = {**(extra or {}), "scaleout": {"nats": nats.url, "shards": SHARDS}}
    common = dict(
        api_socket=sock,
        database=str(workdir / "faults.db"),
        fuzz_rate=fuzz_rate,
        resolve_after=resolve_after,
        settle=settle,
        ui_listen=ui_listen,
        fuzz_inject=fuzz_inject,
        extra=extra,
        sflow_port=free_udp_port() if scaleout else None,
    )
    cfg_path = workdir / "pazzd.yaml"
    ctl = None
    if controller:
        ctl_port, proxy_port = free_tcp_port(), free_tcp_port()
        more: dict = {}
        if apps:
            ports = [ctl_port] + [free_tcp_port() for _ in apps[1:]]
            for spec, port in zip(apps, ports, strict=True):
                lb = "lb" in spec["apps"].split(",")
                p = start_controller(
                    lab.rules_file,
                    port,
                    workdir / f"controller-{spec['name']}.log",
                    updates=updates if lb else None,
                    apps=spec,
                )
                procs.append(p)
                ctl = ctl or p
                say(f"controller {spec['name']}: examples/apps {spec['apps']} on port {port}")
            more = {
                "name": apps[0]["name"],
                "controllers": [
                    {"address": f"127.0.0.1:{p}", "name": s["name"]}
                    for s, p in zip(apps[1:], ports[1:], strict=True)
                ],
            }
        else:
            ctl = start_controller(
                lab.rules_file, ctl_port, workdir / "controller.log", updates=updates
            )
            procs.append(ctl)
            say(
                f"controller: examples/controller_app.py (os-ken) on 127.0.0.1:{ctl_port}, "
                f"routes from {lab.rules_file.name}"
            )
        proxied = dict(
            common,
            proxy_listen=f"127.0.0.1:{proxy_port}",
            controller=f"127.0.0.1:{ctl_port}",
            controllers=more,
        )
        lab.write_config(cfg_path, **proxied)
    else:
        n = lab.install_rules()
        say(
            f"no controller: the generator's {n} rules and {len(lab.wl.groups)} groups "
            "installed with ovs-ofctl; pazzd loads its model from the same rule file"
        )
        flows = [traffic["critical"]] if critical else []
        lab.write_config(cfg_path, critical_flows=flows, **common)
        start_traffic(lab, traffic["extra"], workdir, pps, procs)
    log = open(workdir / "pazzd.log", "w")  # noqa: SIM115
    pz = subprocess.Popen(
        [sys.executable, "-m", "pazzd", "--config", str(cfg_path)],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    log.close()
    procs.append(pz)
    if scaleout:
        procs += start_components(cfg_path, f"{AGENT}:{lab.sflow_port}", scaleout, workdir)
        say(f"scale-out: nats-server, a collector and {scaleout} workers judge the samples")
    status = wait_for_pazzd(pz, sock)
    if controller:
        t0 = time.monotonic()
        lab.set_controller(f"tcp:127.0.0.1:{proxy_port}")
        say(
            f"pazzd running (pid {pz.pid}) with its OpenFlow proxy on 127.0.0.1:{proxy_port} "
            f"and an empty model; {len(lab.topo.switches)} bridges now use it as their "
            "controller (fail_mode=secure)"
        )
        status = wait_for_model(lab, pz, sock)
        on_switches = lab.snapshot()
        if on_switches != len(lab.wl.entries):
            raise RuntimeError(
                f"{on_switches} entries on the switches, {len(lab.wl.entries)} intended"
            )
        say(
            f"model fed through the proxy: {status['model']['rules']} rules (the generator's "
            f"{len(lab.wl.entries)}) and {len(lab.wl.groups)} groups from the controller's "
            f"FlowMods in {time.monotonic() - t0:.1f}s; switches connected "
            f"{status['switches_connected']}, controller link up"
        )
        start_traffic(lab, traffic["extra"], workdir, pps, procs)
        time.sleep(2.0)  # the critical flow's first reports before its clock starts
        lab.write_config(cfg_path, critical_flows=[traffic["critical"]], **proxied)
        res = call(sock, "reload", timeout=10)
        if not res.get("ok"):
            raise RuntimeError(f"pazzd reload failed: {res.get('error')}")
        say(f"critical flow {traffic['critical']['name']} declared (config reload)")
    else:
        say(
            f"pazzd running (pid {pz.pid}): model {status['model']['rules']} rules from the "
            "rule file"
        )
    faults, _ = build_faults(lab)  # with the rule IDs now on the switches
    return Running(sock, cfg_path, pz, ctl, status, faults, traffic)


def ui_port(wanted: int) -> int:
    """wanted, if free on 127.0.0.1; else a free port. Tested as the view binds it
    (SO_REUSEADDR): a demo run a minute ago leaves its port in TIME_WAIT, not taken."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", wanted))
        except OSError:
            return free_tcp_port()
    return wanted


def _run(args, prefix, workdir: Path, view: View, procs, labs: list[Lab]) -> int:
    say = view.event
    say(f"topology {args.topology}: building the network (patched OVS at {prefix})")
    if args.network is None:
        kind, size, rules, acls, pps = TOPOLOGIES[args.topology]
        lab = Lab(prefix, workdir, kind=kind, size=size, rules=rules, acls=acls, sampling=1)
    else:  # the operator's own network
        lab, pps = Lab(prefix, workdir, network=args.network, sampling=1), 50
        lab.sources = (Path(args.topology), Path(args.rules))
    labs.append(lab)
    lab.start(say=say)
    run = bring_up(
        lab,
        workdir,
        procs,
        controller=not args.no_controller,
        pps=pps,
        fuzz_rate=0.0 if args.no_fuzz else 200.0,
        ui_listen=f"127.0.0.1:{ui_port(args.ui_port)}",
        say=say,
    )
    faults, sock = run.faults, run.sock
    status = call(sock, "status", timeout=5)
    say(
        f"production traffic: tcpreplay in {len(lab.hosts)} host namespaces, {pps} pps each "
        f"(sFlow sampling 1/{lab.sampling})"
    )
    say(
        f"pazzd: model {status['model']['rules']} rules, {status['model']['classes']} classes; "
        f"controller {status['controller']}; sFlow {status['sflow']}; metrics "
        f"{status['metrics']}; fuzz {'on' if status['fuzz'] is not None else 'off'}"
    )
    say(f"pazzctl: PAZZ_SOCKET={sock} {sys.executable} -m pazzd.cli status")
    # The view's URL with its token (`pazzctl ui-url`): the view is the API socket's users'.
    ui_url = call(sock, "ui-url", timeout=5)["url"]
    say(f"web view (read-only, this machine only): {ui_url}")
    view.pinned = [f"web view: {ui_url}", f"pazzctl:  PAZZ_SOCKET={sock} pazzctl status"]
    say("faults are injected with ovs-ofctl on the switches, behind the controller's back")
    t_start = time.monotonic()
    warm = max(6.0, min(15.0, args.duration * 0.1))
    missing = sorted(set(EXPECT) - {f.key for f in faults})
    if missing:
        say(f"this network has no place for a fault of class {', '.join(missing)}: left out")
    if not faults:
        raise RuntimeError("no fault can be injected in this network")
    per_fault = max(12.0, (args.duration - warm - 10) / len(faults))
    summary_rows = [
        ("fault", "expected class", "detected", "switch", "entry", "latency", "localize")
    ]

    def refresh(phase=None):
        if phase:
            view.phase = phase
        st, fs = None, []
        with contextlib.suppress(ApiError, OSError, ValueError):
            st = call(sock, "status", timeout=5)
            fs = call(sock, "faults", timeout=5)
        view.draw(st, fs, summary_rows)
        return st, fs

    end = time.monotonic() + warm
    while time.monotonic() < end:
        refresh(f"warm-up: production traffic + fuzzing ({end - time.monotonic():.0f}s)")
        time.sleep(0.5)
    st, fs = refresh()
    if fs:
        say(f"WARNING: {len(fs)} faults before any injection: {[f['kind'] for f in fs]}")
    else:
        say(f"no faults before injection ({st['tester'].get('consistent', 0)} consistent reports)")
    known = {f["id"] for f in fs}
    ok_all = True
    for i, f in enumerate(faults, 1):
        say(f"inject {i}/{len(faults)}: {f.title}")
        f.injected_at = time.time()
        for cmd, *a in f.inject:
            lab.ofctl(f.dpid, cmd, *a)
        deadline = time.monotonic() + per_fault
        while time.monotonic() < deadline and f.localized is None:
            st, fs = refresh(f"fault {i}/{len(faults)}: {f.key}, waiting for detection")
            for row in fs:
                # New, or reopened (the same fault key seen in an earlier outage).
                fresh = row["id"] not in known or row["last_seen"] >= f.injected_at
                if not fresh or row["kind"] != EXPECT[f.key] or row["state"] != "open":
                    continue
                if f.detected is None:
                    f.detected = row
                    t = (
                        row["first_seen"]
                        if row["first_seen"] >= f.injected_at
                        else row["last_seen"]
                    )
                    f.latency = t - f.injected_at
                    say(
                        f"  detected fault #{row['id']} {row['kind']} at {row['location']} "
                        f"after {f.latency:.1f}s"
                    )
                if row["id"] == f.detected["id"] and row.get("polled"):
                    f.localized = row["polled"]
            if f.detected is not None and f.localized is None and time.monotonic() + 2 > deadline:
                break
            time.sleep(0.3)
        if f.detected is not None:
            t0 = time.monotonic()
            try:
                f.localized = call(sock, "localize", id=f.detected["id"], timeout=15)
            except ApiError as e:
                f.notes.append(str(e))
            f.loc_seconds = time.monotonic() - t0
            p = f.localized or {}
            say(
                f"  localized: {p.get('switch', '?')} {p.get('finding', 'no difference')} "
                f"entry {p.get('cause')} ({f.loc_seconds:.2f}s)"
            )
        else:
            say(f"  NOT detected within {per_fault:.0f}s")
        good = (
            f.detected is not None
            and f.localized is not None
            and f.localized.get("dpid") == f.dpid
            and (not f.expect_entry or f.expect_entry in (f.localized.get("cause") or ""))
        )
        ok_all &= good
        p = f.localized or {}
        summary_rows.append(
            (
                f.key,
                EXPECT[f.key],
                f.detected["kind"] if f.detected else "MISSED",
                p.get("switch", "-"),
                p.get("cause") or "-",
                f"{f.latency:.1f}s" if f.latency is not None else "-",
                f"{f.loc_seconds:.2f}s" if f.loc_seconds is not None else "-",
            )
        )
        lab.restore()
        say(f"  restored the intended flow tables; fault {i} {'OK' if good else 'NOT OK'}")
        _, fs = refresh()
        known |= {r["id"] for r in fs}
    remaining = args.duration - (time.monotonic() - t_start) - warm
    end = time.monotonic() + max(3.0, min(remaining, 15.0))
    while time.monotonic() < end:
        refresh(f"after the faults: waiting for resolution ({end - time.monotonic():.0f}s)")
        time.sleep(0.5)
    st, fs = refresh("done")
    print("\nSummary")
    for line in _rows(summary_rows):
        print(line)
    resolved = sum(1 for r in fs if r["state"] == "resolved")
    print(
        f"\nfaults recorded: {len(fs)} ({resolved} resolved); reports "
        f"{st['tester'].get('reports', 0) if st else '?'}; "
        f"fuzz probes {((st or {}).get('fuzz') or {}).get('probes_sent_total', 0)}"
    )
    (workdir / "summary.json").write_text(
        json.dumps(
            [
                {
                    "fault": f.key,
                    "title": f.title,
                    "detected": f.detected,
                    "localized": f.localized,
                    "latency_s": f.latency,
                    "localize_s": f.loc_seconds,
                }
                for f in faults
            ],
            default=str,
        )
    )
    print(
        "demo: "
        + (
            "every fault detected, classified and localized"
            if ok_all
            else "SOME FAULTS WERE NOT DETECTED OR LOCALIZED"
        )
    )
    if args.hold:
        _hold(view, lab, sock, ui_url)
    return 0 if ok_all else 1


def _hold(view: View, lab: Lab, sock: str, ui: str) -> None:
    """Keep the network, pazzd and the web view up until Ctrl-C or SIGTERM."""
    print(
        f"\ndemo: holding the network until Ctrl-C or SIGTERM\n  web view: {ui}\n"
        f"  pazzctl:  PAZZ_SOCKET={sock} {sys.executable} -m pazzd.cli faults\n"
        f"  hosts:    "
        + ", ".join(f"{n} (ip netns exec {h['ns'].name} ...)" for n, h in lab.hosts.items()),
        flush=True,
    )
    view.phase = "holding (Ctrl-C ends the demo)"
    try:
        while True:
            signal.pause()
    except Interrupted as e:
        print(f"\ndemo: {e}: ending the hold", flush=True)


if __name__ == "__main__":
    sys.exit(main())
