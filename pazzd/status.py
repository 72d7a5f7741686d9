"""The daemon's state as status (pazzctl status, the API) and the metrics read it: the
tester's and workers' counters, open faults, the model, the fuzzer, the switches and each
check's part."""

from __future__ import annotations

import time

from .faultlist import faults_open

__all__ = ["faults_open", "state", "tester_stats", "unsaved_faults"]


def unsaved_faults(d) -> list[dict]:
    """The faults waiting in memory for the fault store (tester.unsaved.as_dict): the
    in-process tester's and every worker's latest report of its own."""
    out = d.tester.unrecorded() if d.tester is not None else []
    if d.workers is not None:
        out += d.workers.unsaved_faults()
    return out


def tester_stats(d, checks: dict) -> dict:
    """The tester's counters: the in-process tester's plus every worker's latest."""
    if d.tester is None:
        return {}
    out = d.tester.stats.as_dict()
    if d.tester.probe_loss is not None:
        out.update(d.tester.probe_loss.stats())
    errors = checks.get("audit_store_errors", 0)
    out["fault_store_errors"] = out.get("fault_store_errors", 0) + errors
    if d.workers is not None:
        for k, v in d.workers.totals().items():
            out[k] = out.get(k, 0) + v
        out["workers"] = d.workers.alive()
        out["worker_restarts"] = d.workers.restarts
    return out


def state(d) -> dict:
    """The daemon's state: what status and metrics read."""
    m = d.model
    fz = None
    if d.fuzzer is not None:
        try:
            fz = d.fuzzer.metrics()
        except Exception as e:  # the fuzzer's own bookkeeping must not break status
            fz = {"error": str(e)}
    switches: dict[int, bool] = {}
    if d.proxy is not None:
        # Every switch of the topology: one that never connected is down too.
        switches = dict.fromkeys(d.cfg.topology.switches, False)
        switches.update(d.switch_up)
        for dpid in d.proxy.switches:
            switches[dpid] = True
    checks: dict = {"intents": {}, "interference": {}, "agents": {}}
    for c in d.checks:
        checks.update(c.state())
    out = {
        "tester": tester_stats(d, checks),
        "faults_open": faults_open(d.store, unsaved_faults(d)),
        "rules": m.rule_count() if m else 0,
        "classes": m.class_count() if m else 0,
        "version": m.version if m else 0,
        "fuzz": fz,
        "proxy_on": d.proxy is not None,
        "switches": switches,
        "controller_connected": d.proxy is not None and d.proxy.controller_connected,
        "proxy": d.proxy.drops() if d.proxy is not None else {},
        "proxy_ignored": d.proxy.ignored() if d.proxy is not None else {},
        "ifmap_stale": d.ifmaps.stale_switches() if d.ifmaps is not None else {},
        **checks,
    }
    so = getattr(d, "scaleout", None)
    if so is not None:
        out["scaleout"] = {
            "connected": so.connected,
            "journal_version": so.journal.published,
            "snapshots": so.journal.snapshots,
            "journal_dropped": so.journal.dropped,
            "reports": so.reports,
            "evidence": so.evidence,
            "lag": so.lagging(time.time()),
            "workers": {w: v["stats"] for w, v in so.workers.items()},
            "shards": {w: v["shards"] for w, v in so.workers.items()},
        }
    if d.svc is not None:
        out["findings_opened"] = dict(d.svc.sink.opened)
        out["startup"] = "done" if d.svc.startup.settled else "controller installing"
    if d.probes is not None:
        p = d.probes
        out["probes"] = {
            "jobs": p.pending(),
            "rounds": p.rounds_sent,
            "retried": p.retried,
            "foreign": p.foreign,
        }
    return out
