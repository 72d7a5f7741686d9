"""The paper-rate simulation against the lab (root): the same faults, probe counts compared.

The 2x2 grid of bench/paper.py (pazzdata.workloads, seed 1) is built on patched userspace
OVS (pazzlab.lab) with sFlow 1/--sampling; pazzd loads the rule file and fuzzes at
--fuzz-rate probes/s from the host interfaces; no production traffic (the faults compared
are Type-a: only probes reach them). Each of the paper's whole-ACL bypasses and wide
routes (pazzlab.paperfaults) is injected with ovs-ofctl, in turn, --runs times; detection
is the first fault pazzd opens, dated by its first evidence (the fault row's first_seen:
the first of the samples that corroborated it), in seconds and in probes (seconds x the
fuzzer's measured rate); the simulation's runs are dated the same way (open_s: when its
tester opened the fault). The
simulation (pazzlab.papersim) runs the same faults at the same sampling, in probes as
well (its fuzzer sends 1000 a second of virtual time). Prints one JSON object.

    ip netns exec NS python bench/paperlab.py --sampling 16 --runs 3 --out /tmp/paperlab.json
"""

from __future__ import annotations

import argparse
import json
import os
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
from pazzlab.demo import wait_for_pazzd  # noqa: E402
from pazzlab.lab import Lab, ovs_prefix  # noqa: E402
from pazzlab.ovs import stop_processes  # noqa: E402
from pazzlab.paperfaults import paper_faults  # noqa: E402
from pazzlab.papersim import FUZZ_PPS, Net, Scenario, fuzz_stream, simulate  # noqa: E402

FAMILIES = ("acl_bypass", "wide")


def chosen(wl) -> list:
    """The whole-ACL bypasses and the wide routes: the Type-a faults probes reach often."""
    out, seen = [], set()
    for f in paper_faults(wl, seed=1):
        whole = f.family == "acl_bypass" and "/28" not in str(f.match)
        if (f.family == "wide" or whole) and str(f.match) not in seen:
            seen.add(str(f.match))
            out.append(f)
    return out


def _probes(sock: str) -> int:
    return int((call(sock, "status", timeout=10).get("fuzz") or {}).get("probes_sent_total", 0))


def lab_runs(a, say) -> dict:
    workdir = Path(tempfile.mkdtemp(prefix="pazz-paperlab-"))
    lab = Lab(
        ovs_prefix(),
        workdir / "lab",
        kind="grid",
        size=2,
        rules=a.rules,
        acls=8,
        sampling=a.sampling,
    )
    faults = chosen(lab.wl)
    procs: list[subprocess.Popen] = []
    rows = []
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
        polled = Faults(sock)
        time.sleep(a.warm)
        polled.poll()
        p0, t0 = _probes(sock), time.time()
        time.sleep(5)
        rate = (_probes(sock) - p0) / (time.time() - t0)
        say(f"lab up: {len(lab.wl.entries)} rules, fuzzer {rate:.0f} probes/s")
        for r in range(a.runs):
            for f in faults:
                for e in f.entries:
                    lab.ofctl(e.dpid, "add-flow", format_flow(e))
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
                for e in f.entries:
                    lab.ofctl(e.dpid, "del-flows", "--strict", _head(e))
                rows.append(
                    {
                        "fault": f.name,
                        "run": r,
                        "detect_s": secs,
                        "probes": probes,
                        "verdict": got["kind"] if got else None,
                    }
                )
                say(f"  lab {f.name} run {r}: {secs} s, {probes} probes")
                polled.watch(a.settle)  # resolves (resolve_after) before the next fault
        return {"fuzz_pps": round(rate, 1), "runs": rows}
    finally:
        stop_processes(procs)
        lab.stop()
        shutil.rmtree(workdir, ignore_errors=True)


def sim_runs(a, say) -> list[dict]:
    net = Net("grid4", "grid", 2, a.rules)
    faults = chosen(net.wl)
    horizon = a.horizon * FUZZ_PPS / max(a.fuzz_rate, 1.0)  # the same probe budget
    n = a.sim_runs
    # The fuzzer's shares follow the sampling, as pazzd's on the lab do.
    stream = fuzz_stream(net, faults, 5 + 7 * (n - 1) + horizon, seed=1, sampling=a.sampling)
    rows = []
    for f in faults:
        sc = Scenario(net, f)
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
                    "run": r,
                    "detect_s": d,
                    "open_s": res["detect_s"],
                    "probes": None if d is None else round(d * FUZZ_PPS),
                }
            )
    say(f"simulation: {len(rows)} runs")
    return rows


def _stats(rows) -> dict:
    xs = [r["probes"] for r in rows if r["probes"] is not None]
    return {
        "runs": len(rows),
        "found": len(xs),
        "probes_p25": pct(sorted(xs), 25) if xs else None,
        "probes_median": median(xs) if xs else None,
        "probes_p75": pct(sorted(xs), 75) if xs else None,
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
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
    say = lambda s: print(s, file=sys.stderr, flush=True)  # noqa: E731
    if a.lab_from:
        old = json.loads(Path(a.lab_from).read_text())
        lab = {"fuzz_pps": old["lab_fuzz_pps"], "runs": old["lab"]}
    else:
        lab = lab_runs(a, say)
    sim = sim_runs(a, say)
    fams = {f: [r for r in lab["runs"] if r["fault"].startswith(f)] for f in FAMILIES}
    sfam = {f: [r for r in sim if r["fault"].startswith(f)] for f in FAMILIES}
    report = {
        "bench": "paperlab",
        "config": {
            k: getattr(a, k)
            for k in ("rules", "sampling", "mode", "fuzz_rate", "runs", "sim_runs", "horizon")
        },
        "lab_fuzz_pps": lab["fuzz_pps"],
        "by_family": {f: {"lab": _stats(fams[f]), "sim": _stats(sfam[f])} for f in FAMILIES},
        "lab": lab["runs"],
        "sim": sim,
    }
    emit_json(report, a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
