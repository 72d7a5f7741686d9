"""The end-to-end demo: `make demo` (or `python -m pazzd.demo`, as root).

Builds a Mininet network of patched userspace OVS bridges (pazzd.lab), starts the example
os-ken controller app (examples/controller_app.py) on the generator's rule file and pazzd
with its OpenFlow proxy (model + tester + sFlow collector + fuzzer); the bridges connect to
the proxy, which relays the controller's GroupMods and FlowMods and builds the model from
them. Once the model holds every rule it replays production traffic with tcpreplay inside
the host namespaces, then injects one fault of each class with ovs-ofctl directly on a
switch, behind the controller's back, and shows detection and localization live. Ends
with a summary table and removes everything (namespaces, veths, OVS processes, controller,
pazzd, temp dirs), also on Ctrl-C. With --no-controller the rules go on with ovs-ofctl and
pazzd loads its model from the same rule file.

    python -m pazzd.demo [--duration 75] [--topology grid4|grid16|fattree] [--no-fuzz]
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
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from cpc import workloads
from cpc.fields import parse_header
from cpc.ofctl import split_top
from cpc.refdp import RefDataPlane
from cpc.rules import Instructions

from .api import ApiError, call
from .lab import Lab, dotted, free_tcp_port, ofctl_flow, start_controller, stop_processes

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
        out = ["\x1b[H\x1b[2J", f"\x1b[1mPAZZ demo\x1b[0m  {self.phase}   "
               f"t={time.monotonic() - self.t0:5.1f}s"]  # fmt: skip
        if status:
            out.append(_status_line(status))
        out.append("")
        out.append("\x1b[1mfaults\x1b[0m")
        rows = [("id", "state", "class", "location", "localized at", "entry")]
        for f in faults[-10:]:
            p = f.get("polled") or {}
            rows.append((str(f["id"]), f["state"], f["kind"], f["location"],
                         p.get("switch", "...") if p else "...",
                         (p.get("entry") or p.get("intended") or "")[:70]))  # fmt: skip
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
    fuzz = (f", fuzz {fz.get('probes_sent_total', 0)} probes ({fz.get('mean_coverage', 0):.1%} cov)"
            if fz else ", fuzz off")  # fmt: skip
    return (f"model {st['model']['rules']} rules/{st['model']['classes']} classes | sFlow "
            f"{t.get('datagrams', 0)} dgrams | reports {t.get('reports', 0)}: "
            f"{t.get('consistent', 0)} ok, {t.get('fault_samples', 0)} faulty, "
            f"{t.get('held_transient', 0)} held | open faults "
            f"{sum(st['faults_open'].values())}{fuzz}")  # fmt: skip


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
                hit = sum(1 for d in ds if d.kind == "egress" and d.egress == exit_port
                          and any(x.dpid == e.dpid for x in d.hops))  # fmt: skip
                if ds and hit / len(ds) > best_share:
                    best, best_share = (e, port, p, h), hit / len(ds)
    if best is None:
        raise RuntimeError("no route in this workload can be misrouted for the demo")
    return best


def build_faults(lab: Lab) -> tuple[list[Fault], dict]:
    """One fault of each class for this workload, and the traffic each needs."""
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
    acts = ",".join(a for a in split_top(ofctl_flow(route(x1, net)).partition(",actions=")[2])
                    if not a.startswith("set_verify_rule"))  # fmt: skip
    hidden = f"priority=100,cookie={HIDDEN_COOKIE:#x},ip,nw_dst={dotted(target)},actions={acts}"
    extra[h1] += [(target, 7000 + i, 17, 80, None) for i in range(4)]
    f1 = Fault("hidden", f"hidden higher-priority rule on {topo.switches[x1].name} "
               f"(nw_dst={dotted(target)}, same output)", x1, [("add-flow", hidden)],
               expect_entry=f"cookie={HIDDEN_COOKIE:#x}")  # fmt: skip
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
    text2 = ofctl_flow(e2).replace(f"output:{p_old}", f"dec_ttl,output:{p_new}")
    extra[src2] += [(net2 + 20 + i, 7100 + i, 17, 443, None) for i in range(12)]
    f2 = Fault("misroute", f"route on {topo.switches[e2.dpid].name} to {dotted(net2)}/24: "
               f"output {p_old} -> {p_new} (same match)", e2.dpid,
               [("mod-flows", "--strict", text2)], expect_entry=f"output:{p_new}")  # fmt: skip
    # 3. hidden rule admitting traffic an ACL drops.
    acl = next(
        e for e in entries
        if e.priority == workloads.ACL_PRIORITY
        and wl.prefixes[e.match.get("ipv4_src")[0]] != wl.prefixes[e.match.get("ipv4_dst")[0]]
    )  # fmt: skip
    src_net, dst_net = acl.match.get("ipv4_src")[0], acl.match.get("ipv4_dst")[0]
    proto, dport = acl.match.get("ip_proto")[0], acl.match.get("tp_dst")[0]
    x3 = acl.dpid
    host_port = wl.hosts[wl.prefixes[dst_net]][1]
    head = ofctl_flow(acl).partition(",actions=")[0]
    head = head.replace(f"priority={workloads.ACL_PRIORITY}", "priority=2000").replace(
        "cookie=0x20", f"cookie={HIDDEN_COOKIE:#x}"
    )
    admit = f"{head},actions=output:{host_port}"
    src3 = wl.prefixes[src_net]
    extra[src3] += [(dst_net + 9, 7200 + i, proto, dport, src_net + 3) for i in range(3)]
    f3 = Fault("admit", f"hidden rule on {topo.switches[x3].name} admitting ACL-dropped "
               f"{dotted(src_net)}/24 -> {dotted(dst_net)}/24 proto {proto} port {dport}", x3,
               [("add-flow", admit)], expect_entry=f"cookie={HIDDEN_COOKIE:#x}")  # fmt: skip
    # 4. deleted route: blackhole for the critical flow h1 -> h2.
    net4 = nets_of[h2][1] if len(nets_of[h2]) > 1 else net
    crit_ip = net4 + 33
    extra[h1] += [(crit_ip, 7300, 6, 80, None)] * 6
    f4 = Fault("delete", f"route on {topo.switches[x1].name} to {dotted(net4)}/24 deleted "
               f"(critical flow {h1}->{h2})", x1,
               [("del-flows", "--strict", f"priority={workloads.ROUTE_PRIORITY},ip,"
                 f"nw_dst={dotted(net4)}/24")], expect_entry="")  # fmt: skip
    crit = {
        "name": f"{h1}-{h2}",
        "from": topo.port_name(wl.hosts[h1]),
        "to": topo.port_name(wl.hosts[h2]),
        "header": f"ipv4_src={lab.host_ip(h1)},ipv4_dst={dotted(crit_ip)},tcp_src=7300,tcp_dst=80",
        "timeout": 3.0,
    }
    return [f1, f2, f3, f4], {"extra": extra, "critical": crit}


def write_pcaps(lab: Lab, extra: dict, outdir: Path) -> dict[str, Path]:
    from scapy.all import IP, TCP, UDP, Ether, Raw, wrpcap

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
            pkt = (Ether(src=lab.host_mac(h), dst=lab.host_mac(owner))
                   / IP(src=dotted(src) if src else lab.host_ip(h), dst=dotted(dst), ttl=64)
                   / l4 / Raw(b"pazz-demo-" * 6))  # fmt: skip
            pkts.append(pkt)
        path = outdir / f"{h}.pcap"
        wrpcap(str(path), pkts)
        files[h] = path
    return files


def ovs_prefix() -> str:
    p = os.environ.get("PAZZ_OVS_PREFIX")
    if p:
        return p
    for cand in (
        Path.cwd() / ".ovs-prefix",
        Path(__file__).resolve().parent.parent / ".ovs-prefix",
    ):
        if cand.exists():
            return cand.read_text().strip()
    raise SystemExit("demo: no patched OVS: run `make ovs` or set PAZZ_OVS_PREFIX")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="pazzd.demo", description=__doc__.split("\n\n")[0])
    ap.add_argument("--duration", type=float, default=75.0, help="total seconds (about)")
    ap.add_argument("--topology", choices=sorted(TOPOLOGIES), default="grid4")
    ap.add_argument("--no-fuzz", action="store_true", help="no fuzz probes")
    ap.add_argument("--no-controller", action="store_true",
                    help="install the rules with ovs-ofctl, pazzd loads them from the file "
                    "(no controller, no proxy)")  # fmt: skip
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    args = ap.parse_args(argv)
    if os.geteuid() != 0:
        print("demo: run as root (network namespaces, OVS)", file=sys.stderr)
        return 2
    for tool in ("tcpreplay", "ip", "mnexec"):
        if shutil.which(tool) is None:
            print(f"demo: {tool} is missing (make deps)", file=sys.stderr)
            return 2
    prefix = ovs_prefix()

    def on_signal(signum, frame):
        raise Interrupted(signal.Signals(signum).name)

    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(sig, on_signal)
    workdir = Path(tempfile.mkdtemp(prefix="pazz-demo-"))
    view = View(sys.stdout.isatty())
    procs: list[subprocess.Popen] = []
    lab = None
    rc = 1
    try:
        rc = _run(args, prefix, workdir, view, procs, lambda lb: None)
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
        _cleanup(procs, lab, workdir, args.keep)
        for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
            signal.signal(sig, signal.SIG_DFL)
    return rc


_LAB: list[Lab] = []


def _cleanup(procs, lab, workdir: Path, keep: bool) -> None:
    stop_processes(procs)
    for lb in _LAB:
        lb.stop()
    _LAB.clear()
    if keep:
        print(f"demo: work directory kept: {workdir}")
    else:
        shutil.rmtree(workdir, ignore_errors=True)
    print("demo: cleaned up (namespaces, veths, OVS, controller, pazzd, tcpreplay, temp files)",
          flush=True)  # fmt: skip


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
            if (st["model"]["rules"] == want and st["switches_connected"] == dpids and up
                    and all(lab.controllers_connected().values())):  # fmt: skip
                return st
        if time.monotonic() > deadline:
            raise RuntimeError(
                f"the model holds {st.get('model', {}).get('rules')} of {want} rules, "
                f"switches connected {st.get('switches_connected')} after {timeout:.0f} s"
            )
        time.sleep(0.3)


def start_traffic(lab: Lab, extra: dict, workdir: Path, pps: int, procs: list) -> int:
    pcaps = write_pcaps(lab, extra, workdir)
    # --timer=nano: tcpreplay's default timer busy-waits (a whole core per process at
    # 25 pps); with nanosleep sixteen replays together cost about 1 % of a core.
    for h, path in pcaps.items():
        procs.append(lab.hosts[h]["ns"].popen(
            "tcpreplay", "-q", "-i", "eth0", f"--pps={pps}", "--loop=0", "--timer=nano", str(path),
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))  # fmt: skip
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


def bring_up(lab: Lab, workdir: Path, procs: list, *, controller: bool = True, pps: int = 100,
             fuzz_rate: float = 200.0, resolve_after: float = 8.0, settle: float = 1.0,
             updates: Path | None = None, say=lambda s: None) -> Running:  # fmt: skip
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
    """
    _, traffic = build_faults(lab)  # traffic and critical flow do not depend on rule IDs
    sock = str(workdir / "pazzd.sock")
    common = dict(api_socket=sock, database=str(workdir / "faults.db"), fuzz_rate=fuzz_rate,
                  resolve_after=resolve_after, settle=settle)  # fmt: skip
    cfg_path = workdir / "pazzd.yaml"
    ctl = None
    if controller:
        ctl_port, proxy_port = free_tcp_port(), free_tcp_port()
        ctl = start_controller(lab.rules_file, ctl_port, workdir / "controller.log",
                               updates=updates)  # fmt: skip
        procs.append(ctl)
        say(f"controller: examples/controller_app.py (os-ken) on 127.0.0.1:{ctl_port}, "
            f"routes from {lab.rules_file.name}")  # fmt: skip
        proxied = dict(common, proxy_listen=f"127.0.0.1:{proxy_port}",
                       controller=f"127.0.0.1:{ctl_port}")  # fmt: skip
        lab.write_config(cfg_path, **proxied)
    else:
        n = lab.install_rules()
        say(f"no controller: the generator's {n} rules and {len(lab.wl.groups)} groups "
            "installed with ovs-ofctl; pazzd loads its model from the same rule file")  # fmt: skip
        lab.write_config(cfg_path, critical_flows=[traffic["critical"]], **common)
        start_traffic(lab, traffic["extra"], workdir, pps, procs)
    log = open(workdir / "pazzd.log", "w")  # noqa: SIM115
    pz = subprocess.Popen([sys.executable, "-m", "pazzd", "--config", str(cfg_path)],
                          stdout=log, stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip
    log.close()
    procs.append(pz)
    status = wait_for_pazzd(pz, sock)
    if controller:
        t0 = time.monotonic()
        lab.set_controller(f"tcp:127.0.0.1:{proxy_port}")
        say(f"pazzd running (pid {pz.pid}) with its OpenFlow proxy on 127.0.0.1:{proxy_port} "
            f"and an empty model; {len(lab.topo.switches)} bridges now use it as their "
            "controller (fail_mode=secure)")  # fmt: skip
        status = wait_for_model(lab, pz, sock)
        on_switches = lab.snapshot()
        if on_switches != len(lab.wl.entries):
            raise RuntimeError(f"{on_switches} entries on the switches, "
                               f"{len(lab.wl.entries)} intended")  # fmt: skip
        say(f"model fed through the proxy: {status['model']['rules']} rules (the generator's "
            f"{len(lab.wl.entries)}) and {len(lab.wl.groups)} groups from the controller's "
            f"FlowMods in {time.monotonic() - t0:.1f}s; switches connected "
            f"{status['switches_connected']}, controller link up")  # fmt: skip
        start_traffic(lab, traffic["extra"], workdir, pps, procs)
        time.sleep(2.0)  # the critical flow's first reports before its clock starts
        lab.write_config(cfg_path, critical_flows=[traffic["critical"]], **proxied)
        res = call(sock, "reload", timeout=10)
        if not res.get("ok"):
            raise RuntimeError(f"pazzd reload failed: {res.get('error')}")
        say(f"critical flow {traffic['critical']['name']} declared (config reload)")
    else:
        say(f"pazzd running (pid {pz.pid}): model {status['model']['rules']} rules from the "
            "rule file")  # fmt: skip
    faults, _ = build_faults(lab)  # with the rule IDs now on the switches
    return Running(sock, cfg_path, pz, ctl, status, faults, traffic)


def _run(args, prefix, workdir: Path, view: View, procs, _unused) -> int:
    kind, size, rules, acls, pps = TOPOLOGIES[args.topology]
    say = view.event
    say(f"topology {args.topology}: building the network (patched OVS at {prefix})")
    lab = Lab(prefix, workdir, kind=kind, size=size, rules=rules, acls=acls, sampling=1)
    _LAB.append(lab)
    lab.start(say=say)
    run = bring_up(lab, workdir, procs, controller=not args.no_controller, pps=pps,
                   fuzz_rate=0.0 if args.no_fuzz else 200.0, say=say)  # fmt: skip
    faults, sock = run.faults, run.sock
    status = call(sock, "status", timeout=5)
    say(f"production traffic: tcpreplay in {len(lab.hosts)} host namespaces, {pps} pps each "
        f"(sFlow sampling 1/{lab.sampling})")  # fmt: skip
    say(f"pazzd: model {status['model']['rules']} rules, {status['model']['classes']} classes; "
        f"controller {status['controller']}; sFlow {status['sflow']}; metrics "
        f"{status['metrics']}; fuzz {'on' if status['fuzz'] is not None else 'off'}")  # fmt: skip
    say(f"pazzctl: PAZZ_SOCKET={sock} {sys.executable} -m pazzd.cli status")
    say("faults are injected with ovs-ofctl on the switches, behind the controller's back")
    t_start = time.monotonic()
    warm = max(6.0, min(15.0, args.duration * 0.1))
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
                    say(f"  detected fault #{row['id']} {row['kind']} at {row['location']} "
                        f"after {f.latency:.1f}s")  # fmt: skip
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
            say(f"  localized: {p.get('switch', '?')} {p.get('finding', 'no difference')} "
                f"entry {p.get('entry') or p.get('intended')} ({f.loc_seconds:.2f}s)")  # fmt: skip
        else:
            say(f"  NOT detected within {per_fault:.0f}s")
        good = (f.detected is not None and f.localized is not None
                and f.localized.get("dpid") == f.dpid
                and (not f.expect_entry or f.expect_entry in (f.localized.get("entry") or "")))  # fmt: skip
        ok_all &= good
        p = f.localized or {}
        summary_rows.append((
            f.key, EXPECT[f.key], f.detected["kind"] if f.detected else "MISSED",
            p.get("switch", "-"), (p.get("entry") or p.get("intended") or "-")[:90],
            f"{f.latency:.1f}s" if f.latency is not None else "-",
            f"{f.loc_seconds:.2f}s" if f.loc_seconds is not None else "-",
        ))  # fmt: skip
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
    print(f"\nfaults recorded: {len(fs)} ({resolved} resolved); reports "
          f"{st['tester'].get('reports', 0) if st else '?'}; "
          f"fuzz probes {((st or {}).get('fuzz') or {}).get('probes_sent_total', 0)}")  # fmt: skip
    (workdir / "summary.json").write_text(json.dumps(
        [{"fault": f.key, "title": f.title, "detected": f.detected, "localized": f.localized,
          "latency_s": f.latency, "localize_s": f.loc_seconds} for f in faults], default=str))  # fmt: skip
    print("demo: " + ("every fault detected, classified and localized" if ok_all
                      else "SOME FAULTS WERE NOT DETECTED OR LOCALIZED"))  # fmt: skip
    return 0 if ok_all else 1


if __name__ == "__main__":
    sys.exit(main())
