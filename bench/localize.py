"""Localization benchmark: `pazzctl localize ID` on the 16-switch grid (target <= 5 s).

Builds the emulated network of pazzlab.lab (patched userspace OVS, hosts in network
namespaces; kind grid, size 4: 16 switches, 400 rules), starts the example os-ken
controller app and pazzd with its OpenFlow proxy exactly as the demo does (the model is
fed by the FlowMods the proxy relays; --no-controller: ovs-ofctl and the rule file),
replays production traffic, then, for --rounds rounds, injects each fault class of the
demo in turn with ovs-ofctl (hidden rule, misroute, ACL-admitting rule, deleted route under
a critical flow) and measures:

- detect_s: injection to the fault's record (first_seen, or last_seen when the same fault
  reopens), the end-to-end detection latency;
- pazzctl_s: wall time of `pazzctl localize ID --json` as a subprocess (what an operator
  waits for, interpreter start-up included);
- api_s: the same request over the API socket alone (pazzd's polling and comparison);
- right: the answer names the injected switch (and entry, for match faults).

Between faults the intended tables are restored and the next injection waits 2 s, so
that no late sample of the previous fault counts. Prints one JSON object. As root:

    python bench/localize.py [--topology grid16|grid4|fattree] [--rounds 3] [--no-controller]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from bench.common import median  # noqa: E402
from pazzapi import call  # noqa: E402
from pazzlab.demo import EXPECT, TOPOLOGIES, bring_up, ovs_prefix  # noqa: E402
from pazzlab.lab import Lab  # noqa: E402
from pazzlab.ovs import stop_processes  # noqa: E402


class Interrupted(Exception):
    pass


def _wait_detected(sock: str, f, t_inj: float, known: set, timeout: float):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for r in call(sock, "faults", timeout=10):
            fresh = r["id"] not in known or r["last_seen"] >= t_inj
            if fresh and r["kind"] == EXPECT[f.key] and r["state"] == "open":
                return r
        time.sleep(0.1)
    return None


def measure(lab: Lab, run, rounds: int, say) -> list[dict]:
    sock, out = run.sock, []
    known = {r["id"] for r in call(sock, "faults", timeout=10)}
    if known:
        say(f"warning: {len(known)} faults before any injection")
    for rnd in range(rounds):
        for f in run.faults:
            t_inj = time.time()
            for cmd, *a in f.inject:
                lab.ofctl(f.dpid, cmd, *a)
            row = _wait_detected(sock, f, t_inj, known, timeout=30)
            res = {"round": rnd, "class": f.key, "expected": EXPECT[f.key], "dpid": f.dpid}
            if row is None:
                res.update(detected=False)
            else:
                t = row["first_seen"] if row["first_seen"] >= t_inj else row["last_seen"]
                res.update(detected=True, fault_id=row["id"], detect_s=round(t - t_inj, 3))
                t0 = time.monotonic()
                p = subprocess.run(
                    [
                        sys.executable,
                        "-m",
                        "pazzd.cli",
                        "--socket",
                        sock,
                        "localize",
                        str(row["id"]),
                        "--json",
                    ],
                    capture_output=True,
                    text=True,
                    timeout=60,
                )
                res["pazzctl_s"] = round(time.monotonic() - t0, 3)
                t0 = time.monotonic()
                call(sock, "localize", id=row["id"], timeout=60)
                res["api_s"] = round(time.monotonic() - t0, 3)
                ans = json.loads(p.stdout) if p.returncode == 0 else {}
                res["localized"] = ans.get("switch")
                res["finding"] = ans.get("finding")
                res["right"] = ans.get("dpid") == f.dpid and (
                    not f.expect_entry or f.expect_entry in (ans.get("cause") or "")
                )
            out.append(res)
            say(json.dumps(res))
            lab.restore()
            known |= {r["id"] for r in call(sock, "faults", timeout=10)}
            time.sleep(2.0)
    return out


def _med(values: list[float]) -> float | None:
    return round(median(values), 3) if values else None


def summarize(results: list[dict]) -> dict:
    per = {}
    for key in EXPECT:
        rs = [r for r in results if r["class"] == key]
        loc = [r["pazzctl_s"] for r in rs if "pazzctl_s" in r]
        per[key] = {
            "n": len(rs),
            "detected": sum(r["detected"] for r in rs),
            "right": sum(bool(r.get("right")) for r in rs),
            "detect_median_s": _med([r["detect_s"] for r in rs if "detect_s" in r]),
            "pazzctl_median_s": _med(loc),
            "pazzctl_max_s": max(loc) if loc else None,
            "api_median_s": _med([r["api_s"] for r in rs if "api_s" in r]),
        }
    loc = [r["pazzctl_s"] for r in results if "pazzctl_s" in r]
    return {
        "per_class": per,
        "pazzctl_median_s": _med(loc),
        "pazzctl_max_s": max(loc) if loc else None,
        "api_median_s": _med([r["api_s"] for r in results if "api_s" in r]),
        "detect_median_s": _med([r["detect_s"] for r in results if "detect_s" in r]),
        "all_detected_and_right": all(r.get("right") for r in results),
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--topology", choices=sorted(TOPOLOGIES), default="grid16")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--no-controller", action="store_true")
    ap.add_argument("--no-fuzz", action="store_true")
    ap.add_argument("--verbose", "-v", action="store_true", help="progress on stderr")
    args = ap.parse_args(argv)
    if os.geteuid() != 0:
        print("bench/localize.py: run as root (network namespaces, OVS)", file=sys.stderr)
        return 2
    say = (lambda s: print(s, file=sys.stderr, flush=True)) if args.verbose else (lambda s: None)

    def on_signal(signum, frame):
        raise Interrupted(signal.Signals(signum).name)

    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(sig, on_signal)
    kind, size, rules, acls, pps = TOPOLOGIES[args.topology]
    workdir = Path(tempfile.mkdtemp(prefix="pazz-bench-localize-"))
    procs: list[subprocess.Popen] = []
    lab = Lab(ovs_prefix(), workdir, kind=kind, size=size, rules=rules, acls=acls, sampling=1)
    try:
        t0 = time.monotonic()
        lab.start(say=say)
        run = bring_up(
            lab,
            workdir,
            procs,
            controller=not args.no_controller,
            pps=pps,
            fuzz_rate=0.0 if args.no_fuzz else 200.0,
            say=say,
        )
        setup = time.monotonic() - t0
        time.sleep(5)  # warm-up: traffic and fuzz probes, as in the demo
        results = measure(lab, run, args.rounds, say)
        st = call(run.sock, "status", timeout=10)
        report = {
            "bench": "localize",
            "topology": args.topology,
            "switches": len(lab.topo.switches),
            "rules": len(lab.wl.entries),
            "controller": "proxy" if not args.no_controller else "off (ovs-ofctl, rule file)",
            "model_rules": st["model"]["rules"],
            "fuzz": not args.no_fuzz,
            "rounds": args.rounds,
            "setup_s": round(setup, 1),
            "target_s": 5.0,
            **summarize(results),
            "faults": results,
        }
        print(json.dumps(report, indent=2))
        return 0 if report["all_detected_and_right"] else 1
    except Interrupted as e:
        print(f"interrupted ({e})", file=sys.stderr)
        return 130
    finally:
        for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
            signal.signal(sig, signal.SIG_IGN)
        stop_processes(procs, timeout=10)
        lab.stop()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
