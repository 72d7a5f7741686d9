"""Steady-state detection on the lab (root): random networks with a seed, one fault of each
class injected at a random moment long after the last intended change, benign controller
churn running all the while; detection, localization and false alarms as JSON.

    python bench/detect.py --seeds 3 --sampling 1 --fuzz-rate 1000 --out /tmp/detect.json
    python bench/detect.py --plot docs/detection-cdf.png /tmp/detect.json [more.json ...]

Per seed (pazzdata/detectnet.py): a random network is written as pazzd's topology and rule
files and built on patched userspace OVS (pazzlab.lab); the example os-ken controller app
installs the rules through pazzd's OpenFlow proxy, production traffic runs with tcpreplay
in the host namespaces, sFlow samples every `--sampling`-th packet, the fuzzer sends
`--fuzz-rate` probes/s, and the controller app sends benign updates (`--churn-rate`
FlowMods/s on average, bench/detectnet.Churn) through the proxy. The critical flow is in
the config from the start. After a warm-up, for each fault in random order: a random gap
in steady state, the fault injected with ovs-ofctl behind the controller's back, the
faults API polled until a fault opens (or `--horizon` s pass), localization asked for,
then the switch's touched entries put back exactly as they were.

Reported per fault class: detected by any detector and by the data plane (tester faults;
the table audit is the other detector), seconds from injection to the first fault
(median, p90, max), localized to the right switch and entry. False alarms: faults that
open at start-up (before the first injection) or while no fault is in the network
(outside [injection, restore + settle]).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import median, pct  # noqa: E402
from cpc.ofctl import format_flow, parse_flow  # noqa: E402
from pazzapi import ApiError, call  # noqa: E402
from pazzdata.detectnet import FAULT_KINDS, Churn, FaultSpec, make_faults, random_network  # noqa: E402
from pazzlab.demo import start_traffic, wait_for_model, wait_for_pazzd  # noqa: E402
from pazzlab.lab import Lab, ovs_prefix  # noqa: E402
from pazzlab.ovs import free_tcp_port, free_udp_port, start_controller, stop_processes  # noqa: E402
from pazzlab.scaleout import SHARDS, start_components, start_nats  # noqa: E402

AUDIT = "audit"


def spawn_pazzd(cfg: dict, workdir: Path) -> subprocess.Popen:
    """pazzd on this config (written to workdir/pazzd.yaml), logging to workdir/pazzd.log."""
    path = workdir / "pazzd.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    with open(workdir / "pazzd.log", "w") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "pazzd", "--config", str(path)],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def _key(e) -> tuple:
    return (e.table, e.priority, e.match)


def _head(e) -> str:
    """An entry's table, priority and match in ovs-ofctl syntax (for del-flows --strict)."""
    head = format_flow(e).partition(",actions=")[0]
    return ",".join(w for w in head.split(",") if not w.startswith("cookie="))


def installed(lab: Lab, dpid: int) -> dict[tuple, tuple]:
    """The switch's entries now: (table, priority, match) -> (entry, dump-flows line)."""
    out = {}
    for line in lab.dump_flows(dpid):
        e = parse_flow(line, dpid).entry()
        out[_key(e)] = (e, line)
    return out


def inject(lab: Lab, f: FaultSpec) -> dict:
    """Put the fault on its switch; returns what restore() needs: the touched entries as
    they were. A changed entry keeps the cookie and rule ID the switch gave it."""
    before = installed(lab, f.dpid)
    for e in f.delete:
        lab.ofctl(f.dpid, "del-flows", "--strict", _head(e))
    for e in f.add:
        was = before.get(_key(e)) or next(
            (before[_key(d)] for d in f.delete if _key(d) in before), None
        )
        if was is not None:  # the intended entry, changed: its identity stays
            e = dataclasses.replace(e, cookie=was[0].cookie, rule_id=was[0].rule_id)
        lab.ofctl(f.dpid, "add-flow", format_flow(e))
    return {k: before.get(k) for k in f.keys}


def restore(lab: Lab, f: FaultSpec, saved: dict) -> None:
    """The touched entries as they were before inject(): added ones gone, others back."""
    for k, was in saved.items():
        if was is None:
            e = next(x for x in [*f.add, *f.delete] if _key(x) == k)
            lab.ofctl(f.dpid, "del-flows", "--strict", _head(e))
    for was in saved.values():
        if was is not None:
            lab.ofctl(f.dpid, "add-flow", was[1])


def localized_right(answer: dict | None, f: FaultSpec) -> bool:
    """Does the localization name the fault's switch and one of the entries it touched?"""
    if not answer or answer.get("dpid") != f.dpid or not answer.get("cause"):
        return False
    try:
        return _key(parse_flow(answer["cause"], f.dpid).entry()) in f.keys
    except Exception:  # noqa: BLE001 - an unreadable answer is a wrong one
        return False


def audit_right(row: dict, f: FaultSpec) -> bool:
    """An audit fault localizes by itself: its location and the entry it names."""
    audit = row.get("audit") or {}
    if row.get("location") != f"dpid:{f.dpid}":
        return False
    for text in (audit.get("entry"), audit.get("intended"), audit.get("cause")):
        with contextlib.suppress(Exception):
            if text and _key(parse_flow(text, f.dpid).entry()) in f.keys:
                return True
    return False


class Faults:
    """pazzd's fault rows, polled: which opened (new, or reopened) since the last poll."""

    def __init__(self, sock: str) -> None:
        self.sock = sock
        self.seen: dict[int, tuple] = {}
        self.events: list[dict] = []  # {id, kind, t (wall time it opened), row}

    def poll(self) -> list[dict]:
        rows = call(self.sock, "faults", timeout=10)
        now, new = time.time(), []
        for r in rows:
            state = (r["state"], r["reopened"])
            old = self.seen.get(r["id"])
            self.seen[r["id"]] = state
            if r["state"] != "open" or old == state or (old and old[0] == "open"):
                continue
            ev = {
                "id": r["id"],
                "kind": r["kind"],
                "t": r["first_seen"] if old is None else now,
                "location": r["location"],
                "row": r,
            }
            new.append(ev)
            self.events.append(ev)
        return new

    def watch(self, seconds: float, step: float = 0.5) -> list[dict]:
        """Poll for `seconds`; every fault that opened meanwhile."""
        end, out = time.monotonic() + seconds, []
        while time.monotonic() < end:
            out += self.poll()
            time.sleep(step)
        return out


class ChurnThread(threading.Thread):
    """Appends benign updates to the controller app's --updates file at `rate` FlowMods
    per second on average, until stopped."""

    def __init__(self, churn: Churn, path: Path, rate: float) -> None:
        super().__init__(daemon=True)
        self.churn, self.path, self.rate = churn, path, rate
        self.stop_event = threading.Event()

    def run(self) -> None:
        if self.rate <= 0:
            return
        while not self.stop_event.is_set():
            before = self.churn.count
            lines = self.churn.batch()
            with open(self.path, "a") as fh:
                fh.write("".join(json.dumps(x) + "\n" for x in lines))
            # Batches of several FlowMods wait longer: the rate is FlowMods per second.
            self.stop_event.wait((self.churn.count - before) / self.rate)


def run_seed(seed: int, a, prefix: str, say) -> dict:
    net = random_network(seed)
    faults = make_faults(net, seed, kinds=a.kinds)
    rng = random.Random(f"{seed}:order")
    rng.shuffle(faults)
    workdir = Path(tempfile.mkdtemp(prefix=f"pazz-detect-{seed}-"))
    topo_file, rules_file = workdir / "net.yaml", workdir / "rules.jsonl"
    net.write(topo_file, rules_file)
    lab = Lab.from_files(prefix, workdir / "lab", topo_file, rules_file, sampling=a.sampling)
    procs: list[subprocess.Popen] = []
    churn = ChurnThread(Churn(net, seed), workdir / "updates.jsonl", a.churn_rate)
    out = {
        "seed": seed,
        "switches": len(net.topo.switches),
        "hosts": len(net.hosts),
        "rules": len(net.entries),
        "groups": len(net.groups),
        "faults": [],
    }
    try:
        lab.start()
        churn.path.touch()
        ctl_port, proxy_port = free_tcp_port(), free_tcp_port()
        procs.append(
            start_controller(
                lab.rules_file, ctl_port, workdir / "controller.log", updates=churn.path
            )
        )
        sock = str(workdir / "pazzd.sock")
        cfg = lab.config(
            api_socket=sock,
            database=str(workdir / "faults.db"),
            fuzz_rate=a.fuzz_rate,
            resolve_after=a.resolve_after,
            critical_flows=[net.critical_flow()],
            proxy_listen=f"127.0.0.1:{proxy_port}",
            controller=f"127.0.0.1:{ctl_port}",
        )
        if a.delivered_share is not None:  # else pazzd's default
            cfg["fuzz"]["delivered_share"] = a.delivered_share
        if a.audit_interval is not None:  # 0: the data plane and the checks alone
            cfg["controller"]["audit_interval"] = a.audit_interval
        # pazzd's own defaults, as an operator runs it: the lab's demo config shortens the
        # blackhole threshold (5 expected report gaps, not 10), which at 1/64 sampling
        # raised false blackholes of a critical flow with a few packets per second.
        del cfg["tester"]["blackhole_k"]
        if a.scaleout:  # the lab's sFlow to a collector; workers judge; pazzd stores
            nats = start_nats(workdir, procs)
            cfg["scaleout"] = {"nats": nats.url, "shards": SHARDS}
            lab_target = cfg["sflow"]["listen"]
            cfg["sflow"]["listen"] = f"127.0.0.1:{free_udp_port()}"
        pz = spawn_pazzd(cfg, workdir)
        procs.append(pz)
        if a.scaleout:
            conf = str(workdir / "pazzd.yaml")
            procs += start_components(conf, lab_target, a.scaleout, workdir)
        t_start = time.time()
        wait_for_pazzd(pz, sock)
        lab.set_controller(f"tcp:127.0.0.1:{proxy_port}")
        wait_for_model(lab, pz, sock)
        start_traffic(lab, net.traffic(), workdir, a.pps, procs)
        churn.start()
        say(
            f"seed {seed}: {out['switches']} switches, {out['hosts']} hosts, {out['rules']} "
            f"rules; model up in {time.time() - t_start:.1f}s; {len(faults)} faults"
        )
        polled = Faults(sock)
        time.sleep(a.warm)
        polled.poll()
        out["startup_false_alarms"] = [_brief(e) for e in polled.events]
        quiet_alarms: list[dict] = []
        for f in faults:  # each after a stretch of steady state: churn only
            quiet_alarms += [_brief(e) for e in polled.watch(rng.uniform(*a.gap))]
            out["faults"].append(run_fault(lab, f, polled, a, sock, say))
        # Steady state with no fault after the last one, then a last look.
        quiet_alarms += [_brief(e) for e in [*polled.watch(a.quiet), *polled.poll()]]
        out["false_alarms"] = quiet_alarms
        st = call(sock, "status", timeout=10)
        out["churn_flowmods"] = churn.churn.count
        # Entry confirmations (pazzd.entries): every churn FlowMod is checked; a diverged
        # entry is an `agent` finding.
        ent = st.get("agents") or {}
        out["entries"] = {k: ent.get(k) for k in ("confirmed", "diverged", "unjudged", "unprobed")}
        out["agent_findings"] = [
            {"id": x.get("id"), "switch": x.get("switch"), "match": x.get("match")}
            | {"reason": x.get("reason"), "summary": x.get("summary")}
            for x in call(sock, "findings", timeout=10, kind="agent")
        ]
        out["status"] = {
            "reports": st["tester"].get("reports"),
            "consistent": st["tester"].get("consistent"),
            "held": st["tester"].get("held_transient"),
            "probes": (st.get("fuzz") or {}).get("probes_sent_total"),
        } | {k: v for k, v in st["tester"].items() if k.startswith("probe_loss_")}
        out["seconds"] = round(time.time() - t_start, 1)
        if pz.poll() is not None:
            raise RuntimeError(f"pazzd exited with status {pz.returncode}")
    finally:
        churn.stop_event.set()
        stop_processes(procs)  # nats-server, the first started, last
        lab.stop()
        if a.keep:
            say(f"work directory kept: {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    return out


def _brief(ev: dict) -> dict:
    return {
        "id": ev["id"],
        "kind": ev["kind"],
        "t": ev["t"],
        "location": ev["location"],
        "header": ev["row"].get("header"),
    }


def run_fault(lab: Lab, f: FaultSpec, polled: Faults, a, sock: str, say) -> dict:
    t_inj = time.time()
    saved = inject(lab, f)
    res = {
        "kind": f.kind,
        "title": f.title,
        "dpid": f.dpid,
        "any_s": None,
        "dataplane_s": None,
        "detector": None,
        "fault_kind": None,
        "localized": False,
        "audit_localized": False,
        "unattributed": [],
    }
    first_dp = None
    deadline = time.monotonic() + a.horizon
    while time.monotonic() < deadline and first_dp is None:
        for ev in polled.poll():
            dt = max(0.0, ev["t"] - t_inj)
            if res["any_s"] is None:
                res["any_s"], res["detector"] = round(dt, 2), ev["kind"]
            if ev["kind"] == AUDIT:
                right = audit_right(ev["row"], f)
                res["audit_localized"] |= right
                if not right:  # an audit finding about something else
                    res["unattributed"].append(_brief(ev))
            elif first_dp is None:
                first_dp, res["dataplane_s"], res["fault_kind"] = ev, round(dt, 2), ev["kind"]
            else:
                res["unattributed"].append(_brief(ev))
        time.sleep(0.3)
    if first_dp is not None:
        try:
            ans = call(sock, "localize", id=first_dp["id"], timeout=30)
        except ApiError as e:
            ans = {"error": str(e)}
        res["localized"] = localized_right(ans, f)
        res["localize"] = {k: ans.get(k) for k in ("switch", "finding", "cause", "error")}
    restore(lab, f, saved)
    # Faults that open until the network has settled belong to this one.
    for ev in polled.watch(a.settle):
        if ev["kind"] == AUDIT and audit_right(ev["row"], f):
            res["audit_localized"] = True
        elif first_dp is None or ev["id"] != first_dp["id"]:
            res["unattributed"].append(_brief(ev))
    say(
        f"  {f.kind:17s} {f.title}: "
        + (
            f"{res['fault_kind']} after {res['dataplane_s']:.1f}s, localized "
            f"{'right' if res['localized'] else 'WRONG'}"
            if first_dp
            else f"data plane MISSED in {a.horizon:.0f}s"
        )
        + (f"; first any {res['detector']} {res['any_s']:.1f}s" if res["any_s"] is not None else "")
    )
    return res


def summarize(runs: list[dict]) -> dict:
    per: dict[str, dict] = {}
    for kind in FAULT_KINDS:
        rs = [f for r in runs for f in r["faults"] if f["kind"] == kind]
        if not rs:
            continue
        dp = [f["dataplane_s"] for f in rs if f["dataplane_s"] is not None]
        anyd = [f["any_s"] for f in rs if f["any_s"] is not None]
        per[kind] = {
            "cases": len(rs),
            "detected_any": len(anyd),
            "detected_dataplane": len(dp),
            "dataplane_median_s": median(dp) if dp else None,
            "dataplane_p90_s": pct(dp, 90) if dp else None,
            "dataplane_max_s": max(dp) if dp else None,
            "any_median_s": median(anyd) if anyd else None,
            "localized_right": sum(1 for f in rs if f["localized"] or f["audit_localized"]),
            "localized_right_dataplane": sum(1 for f in rs if f["localized"]),
        }
    faults = [f for r in runs for f in r["faults"]]
    return {
        "per_kind": per,
        "cases": len(faults),
        "detected_any": sum(1 for f in faults if f["any_s"] is not None),
        "detected_dataplane": sum(1 for f in faults if f["dataplane_s"] is not None),
        "localized_right": sum(1 for f in faults if f["localized"] or f["audit_localized"]),
        "startup_false_alarms": sum(len(r.get("startup_false_alarms", [])) for r in runs),
        "false_alarms": sum(len(r.get("false_alarms", [])) for r in runs),
        "unattributed": sum(len(f["unattributed"]) for f in faults),
        "churn_flowmods": sum(r.get("churn_flowmods", 0) for r in runs),
        "entries": {
            k: sum((r.get("entries") or {}).get(k) or 0 for r in runs)
            for k in ("confirmed", "diverged", "unjudged", "unprobed")
        },
        "agent_findings": sum(len(r.get("agent_findings", [])) for r in runs),
    }


def table(doc: dict) -> str:
    """The summary of one result file as a markdown table (docs/detection.md)."""

    def s(v):
        return "–" if v is None else f"{v:.1f}"

    rows = [
        "| fault class | cases | detected (any) | median s | data plane | median / p90 / max s "
        "| localized right |",
        "|---|---|---|---|---|---|---|",
    ]
    summ = doc["summary"]
    for kind, k in summ["per_kind"].items():
        rows.append(
            f"| {kind} | {k['cases']} | {k['detected_any']} | {s(k['any_median_s'])} | "
            f"{k['detected_dataplane']} | {s(k['dataplane_median_s'])} / "
            f"{s(k['dataplane_p90_s'])} / {s(k['dataplane_max_s'])} | "
            f"{k['localized_right']} |"
        )
    rows.append(
        f"| **all** | {summ['cases']} | {summ['detected_any']} | | "
        f"{summ['detected_dataplane']} | | {summ['localized_right']} |"
    )
    return "\n".join(rows)


def plot(paths: list[str], out: str) -> None:
    """CDFs of the time to detect, per fault class: the first fault of any detector (top)
    and the first data-plane fault (bottom), one column per result file."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    docs = [json.loads(Path(p).read_text()) for p in paths]
    fig, axes = plt.subplots(2, len(docs), figsize=(6.5 * len(docs), 8.5), squeeze=False)
    for col, doc in enumerate(docs):
        faults = [f for r in doc["runs"] for f in r["faults"]]
        for row, (key, what) in enumerate(
            (("any_s", "any detector"), ("dataplane_s", "the data plane"))
        ):
            ax = axes[row][col]
            for kind in FAULT_KINDS:
                rs = [f for f in faults if f["kind"] == kind]
                if not rs:
                    continue
                xs = sorted(f[key] for f in rs if f[key] is not None)
                ys = [(i + 1) / len(rs) for i in range(len(xs))]
                ax.step(
                    [0, *xs, doc["horizon_s"]],
                    [0, *ys, ys[-1] if ys else 0],
                    where="post",
                    label=f"{kind} ({len(xs)}/{len(rs)})",
                )
            ax.set_xscale("symlog", linthresh=1)
            ax.set_xlim(0, doc["horizon_s"])
            ax.set_ylim(0, 1.02)
            ax.set_xlabel(f"seconds from injection to the first fault of {what}")
            ax.set_ylabel("fraction of faults detected")
            extra = (
                f", delivered share {doc['delivered_share']}" if doc.get("delivered_share") else ""
            )
            ax.set_title(
                f"sFlow 1/{doc['sampling']}, {doc['fuzz_rate']:.0f} probes/s{extra}, "
                f"{len(doc['runs'])} networks: {what}",
                fontsize=9,
            )
            ax.grid(True, alpha=0.3)
            ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(out, dpi=100)


def options(argv=None) -> argparse.Namespace:
    """The command line (tests build their runs from it too)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=3, help="random networks")
    ap.add_argument("--first-seed", type=int, default=7001)
    ap.add_argument("--sampling", type=int, default=1, help="sFlow: one in N packets")
    ap.add_argument("--fuzz-rate", type=float, default=1000.0, help="probes per second")
    ap.add_argument("--pps", type=int, default=20, help="production packets/s per host")
    ap.add_argument(
        "--delivered-share",
        type=float,
        default=None,
        help="fuzz.delivered_share: probes into the space the rules deliver (default: pazzd's)",
    )
    ap.add_argument(
        "--audit-interval",
        type=float,
        default=None,
        help="controller.audit_interval (0: no table audit; default: pazzd's)",
    )
    ap.add_argument("--churn-rate", type=float, default=2.0, help="benign FlowMods per second")
    ap.add_argument("--horizon", type=float, default=60.0, help="seconds to wait per fault")
    ap.add_argument(
        "--gap",
        type=float,
        nargs=2,
        default=(10.0, 30.0),
        metavar=("MIN", "MAX"),
        help="steady-state seconds before each fault (uniform)",
    )
    ap.add_argument("--warm", type=float, default=20.0, help="seconds before the first fault")
    ap.add_argument("--resolve-after", type=float, default=8.0)
    ap.add_argument(
        "--settle",
        type=float,
        default=12.0,
        help="seconds after a restore that still belong to the fault",
    )
    ap.add_argument(
        "--kinds",
        default=",".join(FAULT_KINDS),
        help="fault classes, comma-separated ('' for none: false alarms only)",
    )
    ap.add_argument(
        "--quiet",
        type=float,
        default=0.0,
        help="seconds of steady state with churn and no fault after the faults",
    )
    ap.add_argument(
        "--scaleout",
        type=int,
        default=0,
        metavar="WORKERS",
        help="judge in this many `pazzd worker`s over a private nats-server (0: pazzd alone)",
    )
    ap.add_argument("--out", help="write the JSON here too")
    ap.add_argument("--keep", action="store_true", help="keep the work directories")
    ap.add_argument("--table", metavar="RESULT", help="print a result file as a markdown table")
    ap.add_argument(
        "--plot",
        nargs="+",
        metavar="FILE",
        help="draw the CDF of these result files into the first argument (PNG)",
    )
    a = ap.parse_args(argv)
    a.kinds = tuple(k for k in a.kinds.split(",") if k)
    unknown = set(a.kinds) - set(FAULT_KINDS)
    if unknown:
        ap.error(
            f"--kinds: unknown fault class {', '.join(sorted(unknown))} "
            f"(known: {', '.join(FAULT_KINDS)})"
        )
    a.parser = ap
    return a


def main(argv=None) -> int:
    a = options(argv)
    ap = a.parser
    if a.table:
        print(table(json.loads(Path(a.table).read_text())))
        return 0
    if a.plot:
        if len(a.plot) < 2:
            ap.error("--plot OUT.png RESULT.json [RESULT.json ...]")
        plot(a.plot[1:], a.plot[0])
        return 0
    if os.geteuid() != 0:
        ap.error("run as root (network namespaces, OVS)")
    # A TERM (kill, a timeout) unwinds like an interrupt: each seed's lab is torn down.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    prefix = ovs_prefix("detect")

    def say(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    doc = {
        "sampling": a.sampling,
        "fuzz_rate": a.fuzz_rate,
        "pps_per_host": a.pps,
        "delivered_share": a.delivered_share,
        "audit_interval": a.audit_interval,
        "churn_flowmods_per_s": a.churn_rate,
        "horizon_s": a.horizon,
        "gap_s": list(a.gap),
        "warm_s": a.warm,
        "quiet_s": a.quiet,
        "runs": [],
    }
    t0 = time.time()
    for seed in range(a.first_seed, a.first_seed + a.seeds):
        doc["runs"].append(run_seed(seed, a, prefix, say))
        doc["summary"] = summarize(doc["runs"])
        doc["wall_s"] = round(time.time() - t0, 1)
        if a.out:  # after every network: a long run leaves what it measured
            Path(a.out).write_text(json.dumps(doc, indent=1, default=str))
    print(json.dumps(doc["summary"], indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
