"""The paper-rate simulation against the lab (root): the same faults, detection compared.

A network of bench/paper.py (pazzdata.workloads, seed 1; --net) is built on patched
userspace OVS (pazzlab.lab) with sFlow 1/--sampling; pazzd loads the rule file (no proxy,
so no table audit) and fuzzes at --fuzz-rate probes/s from the host interfaces.

  grid4    the 2x2 grid, no production traffic: the whole-ACL bypasses and wide routes
           (Type-a: only probes reach them), compared in probes.
  fattree  the k=4 fat-tree with production traffic: every host replays (tcpreplay, looped)
           --pps packets/s drawn as the simulation draws its production traffic
           (pazzlab.papersim.production_packets), and --per-family faults of each of the
           Type-p and Type-a families; a clean stretch of --clean seconds comes first.

Each fault's hidden entries are added with ovs-ofctl behind pazzd's back, in turn, --runs
times; detection is the first fault pazzd opens, dated by its first evidence (the fault
row's first_seen), and whether it names a switch of the hidden entries (localized). The
simulation (pazzlab.papersim) runs the same faults at the same sampling and production
rate, dated the same way (first_s). Prints one JSON object.

    ip netns exec NS python bench/paperlab.py --net fattree --sampling 100 --out F.json
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from bench.common import emit_json, median, pct  # noqa: E402
from bench.detect import Faults, _head, spawn_pazzd  # noqa: E402
from cpc.ofctl import format_flow  # noqa: E402
from pazzapi import call  # noqa: E402
from pazzdata.workloads import generate  # noqa: E402
from pazzlab.demo import replay, wait_for_pazzd  # noqa: E402
from pazzlab.lab import Lab, dotted, ovs_prefix  # noqa: E402
from pazzlab.ovs import stop_processes  # noqa: E402
from pazzlab.paperfaults import paper_faults  # noqa: E402
from pazzlab.papersim import (  # noqa: E402
    FUZZ_PPS,
    POLL_S,
    Net,
    Scenario,
    fuzz_stream,
    production_packets,
    simulate,
)

FAMILIES = ("acl_bypass", "wide")  # grid4's (Type-a)
NETS = {  # --net: (kind, size, families compared, production on by default)
    "grid4": ("grid", 2, FAMILIES, False),
    "fattree": (
        "fattree",
        4,
        ("misroute", "subprefix", "subprefix_misroute", "acl_bypass", "wide", "adjacent"),
        True,
    ),
}


def chosen(wl, net: str = "grid4", per_family: int = 3) -> list:
    """grid4: the whole-ACL bypasses and the wide routes (the Type-a faults probes reach
    often). fattree: per_family of each family, spread over its draws (so the ACL bypasses
    take whole matches and /28s)."""
    faults = paper_faults(wl, seed=1)
    if net == "grid4":
        out, seen = [], set()
        for f in faults:
            whole = f.family == "acl_bypass" and "/28" not in str(f.match)
            if (f.family == "wide" or whole) and str(f.match) not in seen:
                seen.add(str(f.match))
                out.append(f)
        return out
    out = []
    for fam in NETS[net][2]:
        mine = [f for f in faults if f.family == fam]
        k = min(per_family, len(mine))
        out += [mine[round(i * len(mine) / k)] for i in range(k)]
    return out


def _probes(sock: str) -> int:
    return int((call(sock, "status", timeout=10).get("fuzz") or {}).get("probes_sent_total", 0))


def write_production(lab, workdir: Path, n: int, seed: int = 1) -> dict[str, Path]:
    """One pcap per host of n production packets (pazzlab.papersim.production_packets)."""
    from scapy.all import IP, TCP, UDP, Ether, Raw, wrpcap

    wl, rng, files = lab.wl, random.Random(seed), {}
    for h in sorted(wl.hosts, key=lambda h: int(h[1:])):
        pkts = [
            Ether(src=lab.host_mac(h), dst=lab.host_mac(wl.prefixes[dst & 0xFFFFFF00]))
            / IP(src=dotted(src), dst=dotted(dst), ttl=64)
            / (TCP(sport=sp, dport=dp, flags="A") if proto == 6 else UDP(sport=sp, dport=dp))
            / Raw(b"pazz-prod-" * 4)
            for src, dst, proto, sp, dp in production_packets(wl, h, n, rng)
        ]
        if pkts:
            files[h] = workdir / f"{h}.pcap"
            wrpcap(str(files[h]), pkts)
    return files


def _switches(row: dict) -> set:
    loc = row.get("localization") or {}
    return set(loc.get("candidates") or ()) | ({loc["culprit"]} if loc.get("culprit") else set())


def _event(ev: dict) -> dict:
    return {
        "kind": ev["kind"],
        "location": ev["location"],
        "switches": sorted(_switches(ev["row"])),
    }


def lab_runs(a, faults, say) -> dict:
    kind, size, _, _ = NETS[a.net]
    workdir = Path(tempfile.mkdtemp(prefix="pazz-paperlab-"))
    lab = Lab(
        ovs_prefix(),
        workdir / "lab",
        kind=kind,
        size=size,
        rules=a.rules,
        acls=8,
        sampling=a.sampling,
    )
    procs: list[subprocess.Popen] = []
    rows, false_alarms = [], []
    try:
        lab.start()
        lab.install_rules()  # ovs-ofctl add-flows; pazzd loads the same rule file
        sock = str(workdir / "pazzd.sock")
        cfg = lab.config(
            api_socket=sock,
            database=str(workdir / "faults.db"),
            fuzz_rate=a.fuzz_rate,
            resolve_after=a.resolve_after,
        )
        del cfg["tester"]["blackhole_k"]
        pz = spawn_pazzd(cfg, workdir)
        procs.append(pz)
        wait_for_pazzd(pz, sock)
        if a.pps:
            pcaps = write_production(lab, workdir, a.pcap_packets)
            replay(lab, pcaps, a.pps, procs)
            say(f"production: {len(pcaps)} hosts x {a.pps} pps ({a.pcap_packets} packets looped)")
        polled = Faults(sock)
        time.sleep(a.warm)
        false_alarms += [_event(ev) | {"when": "warm-up"} for ev in polled.poll()]
        p0, t0 = _probes(sock), time.time()
        time.sleep(5)
        rate = (_probes(sock) - p0) / (time.time() - t0)
        say(f"lab up: {len(lab.wl.entries)} rules, fuzzer {rate:.0f} probes/s")
        if a.clean:
            clean = polled.watch(a.clean)
            false_alarms += [_event(ev) | {"when": "clean"} for ev in clean]
            say(f"clean stretch of {a.clean:.0f} s: {len(clean)} faults opened")
        for r in range(a.runs):
            for f in faults:
                # The simulation injects a fault at once: its entries go in together and
                # a run is dated from when all are in (a probe may meet the first ones
                # sooner: a run can be a little below 0).
                t0 = time.time()
                lab.ofctl_many((e.dpid, "add-flow", format_flow(e)) for e in f.entries)
                t_inj = time.time()
                got = None
                while time.time() - t_inj < a.horizon and got is None:
                    for ev in polled.poll():
                        if ev["kind"] != "audit" and got is None:
                            got = ev
                    time.sleep(0.2)
                # In probes at the measured rate: reading the counter after the poll
                # would add the API's latency.
                secs = round(got["t"] - t_inj, 2) if got else None
                probes = round(secs * rate) if got else None
                lab.ofctl_many((e.dpid, "del-flows", "--strict", _head(e)) for e in f.entries)
                hidden = {e.dpid for e in f.entries}
                rows.append(
                    {
                        "fault": f.name,
                        "family": f.family,
                        "run": r,
                        "detect_s": secs,
                        "probes": probes,
                        "verdict": got["kind"] if got else None,
                        "localized": bool(got and _switches(got["row"]) & hidden),
                        "install_s": round(t_inj - t0, 3),
                    }
                )
                say(f"  lab {f.name} run {r}: {secs} s, {rows[-1]['verdict']}")
                polled.watch(a.settle)  # resolves (resolve_after) before the next fault
        return {"fuzz_pps": round(rate, 1), "runs": rows, "false_alarms": false_alarms}
    finally:
        stop_processes(procs)
        lab.stop()
        shutil.rmtree(workdir, ignore_errors=True)


def sim_runs(a, say) -> list[dict]:
    kind, size, _, _ = NETS[a.net]
    net = Net(a.net, kind, size, a.rules)
    faults = chosen(net.wl, a.net, a.per_family)
    horizon = a.horizon * FUZZ_PPS / max(a.fuzz_rate, 1.0)  # the same probe budget
    n = a.sim_runs
    # The fuzzer's shares follow the sampling, as pazzd's on the lab do.
    # The fuzzer's shares are pazzd's on the lab: for the rate its probes are seen at (in
    # P every probe is reported: pazzd.wiring.probe_sampling).
    seen_at = 1 if a.mode == "P" else a.sampling
    stream = fuzz_stream(net, faults, 5 + 7 * (n - 1) + horizon, seed=1, sampling=seen_at)
    rows = []
    for f in faults:
        # The lab's production rate (0: none): a.pps from each host.
        sc = Scenario(net, f, prod_pps=a.pps * len(net.wl.hosts))
        for r in range(n):
            res = simulate(
                sc,
                "pazz",
                a.sampling,
                5 + 7 * r,
                horizon,
                seed=zlib.crc32(f"lab {f.name} {r}".encode()),
                fuzz_hits=stream["hits"][f.name],
                mode=a.mode,
            )
            d = res["first_s"]  # as the lab's: the first evidence of a fault that opened
            rows.append(
                {
                    "fault": f.name,
                    "family": f.family,
                    "run": r,
                    "detect_s": d,
                    "open_s": res["detect_s"],
                    "probes": None if d is None else round(d * FUZZ_PPS),
                }
            )
    say(f"simulation: {len(rows)} runs")
    return rows


def agreement(lab: list[dict], sim: list[dict], slack: float = POLL_S) -> dict:
    """Per fault, the simulation's 10-90 % band of detection seconds (runs it never found
    count as past the horizon), and how many lab runs fall inside it widened by `slack`
    (the simulation dates a sample at the next whole second)."""
    inf = float("inf")
    out, inside = {}, 0
    for name in dict.fromkeys(r["fault"] for r in lab):
        xs = sorted(
            inf if r["detect_s"] is None else r["detect_s"] for r in sim if r["fault"] == name
        )
        lo, hi = pct(xs, 10), pct(xs, 90)
        mine = [inf if r["detect_s"] is None else r["detect_s"] for r in lab if r["fault"] == name]
        k = sum(lo - slack <= x <= hi + slack for x in mine)
        inside += k
        out[name] = {"lab_s": mine, "sim_p10": lo, "sim_median": median(xs), "sim_p90": hi}
        out[name]["inside"] = k
    return {"lab_runs_inside": inside, "lab_runs": len(lab), "by_fault": out}


def _stats(rows) -> dict:
    xs = [r["probes"] for r in rows if r["probes"] is not None]
    return {
        "runs": len(rows),
        "found": len(xs),
        "probes_p25": pct(sorted(xs), 25) if xs else None,
        "probes_median": median(xs) if xs else None,
        "probes_p75": pct(sorted(xs), 75) if xs else None,
        "seconds_median": median([r["detect_s"] for r in rows if r["detect_s"] is not None])
        if xs
        else None,
    }


def _finite(obj):
    """JSON without Infinity: a run never found within the horizon is null."""
    if isinstance(obj, float) and math.isinf(obj):
        return None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_finite(v) for v in obj]
    return obj


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--net", default="grid4", choices=sorted(NETS))
    ap.add_argument("--rules", type=int, default=1000)
    ap.add_argument("--sampling", type=int, default=16)
    ap.add_argument(
        "--mode",
        default="P",
        choices=("U", "P"),
        help="the simulation's observation (pazzlab.papersim): P is what pazzd on patched "
        "OVS does (probes reported 1/1, per-hop samples judged); U the paper's",
    )
    ap.add_argument("--fuzz-rate", type=float, default=1000.0)
    ap.add_argument(
        "--pps",
        type=float,
        default=None,
        help="production packets/s from each host (default: 150 on fattree, none on grid4)",
    )
    ap.add_argument("--pcap-packets", type=int, default=3000, help="distinct packets per host")
    ap.add_argument("--per-family", type=int, default=3, help="faults per family (fattree)")
    ap.add_argument("--clean", type=float, default=None, help="seconds watched before any fault")
    ap.add_argument("--runs", type=int, default=3, help="lab runs per fault")
    ap.add_argument("--sim-runs", type=int, default=20, help="simulated runs per fault")
    ap.add_argument("--horizon", type=float, default=60.0, help="lab seconds per run")
    ap.add_argument("--resolve-after", type=float, default=4.0)
    ap.add_argument("--settle", type=float, default=6.0)
    ap.add_argument("--warm", type=float, default=10.0)
    ap.add_argument("--out")
    ap.add_argument(
        "--lab-from", help="take the lab runs from this earlier output (simulate only; no root)"
    )
    a = ap.parse_args(argv)
    prod = NETS[a.net][3]
    if a.pps is None:
        a.pps = 150.0 if prod else 0.0
    if a.clean is None:
        a.clean = 30.0 if prod else 0.0
    say = lambda s: print(s, file=sys.stderr, flush=True)  # noqa: E731
    if a.lab_from:
        old = json.loads(Path(a.lab_from).read_text())
        lab = {
            "fuzz_pps": old["lab_fuzz_pps"],
            # Outputs from before the family field: it is the fault's name less its index.
            "runs": [{"family": r["fault"].rsplit("-", 1)[0]} | r for r in old["lab"]],
            "false_alarms": old.get("lab_false_alarms", []),
        }
    else:
        kind, size, _, _ = NETS[a.net]
        wl = generate(kind, size, a.rules, seed=1, rule_ids=True, acls=8)
        lab = lab_runs(a, chosen(wl, a.net, a.per_family), say)
    sim = sim_runs(a, say)
    fams = list(dict.fromkeys(r["family"] for r in sim))
    report = {
        "bench": "paperlab",
        "config": {
            k: getattr(a, k)
            for k in ("net", "rules", "sampling", "mode", "fuzz_rate", "pps", "runs")
            + ("sim_runs", "horizon", "clean", "per_family")
        },
        "lab_fuzz_pps": lab["fuzz_pps"],
        "lab_false_alarms": lab["false_alarms"],
        "lab_localized": sum(
            r.get("localized", False) for r in lab["runs"] if r["detect_s"] is not None
        ),
        "lab_found": sum(r["detect_s"] is not None for r in lab["runs"]),
        "by_family": {
            f: {
                "lab": _stats([r for r in lab["runs"] if r["family"] == f]),
                "sim": _stats([r for r in sim if r["family"] == f]),
            }
            for f in fams
        },
        "agreement": agreement(lab["runs"], sim),
        "lab": lab["runs"],
        "sim": sim,
    }
    emit_json(_finite(report), a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
