"""The commands of pazzd's API socket (pazzctl, the web view, the lab), over the daemon's
Services. Each `api_NAME(req)` answers the command NAME (dashes as underscores); a missing
or bad argument is the caller's error, answered in words (InputError: the reply's code
"input", which pazzctl exits 2 for)."""

from __future__ import annotations

import asyncio
import os
import time

from cpc.ofctl import parse_flow
from cpc.rules import ModelError
from pazzapi import ApiError, InputError

from . import answers
from .answers import fault_json
from .faultlist import fault_list
from .ui.data import coverage_json, topology_json
from .ui.paths import PathFinder, actual_path_json

__all__ = ["Commands"]


def _int_arg(req: dict, name: str) -> int:
    try:
        return int(req[name])
    except (TypeError, ValueError):
        raise InputError(f"{name} must be an integer, not {req[name]!r}") from None


def url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


class Commands:
    """svc: the daemon's Services; host: the daemon, for its status, reload and fault
    localization (state(), reload(), faults.localize(fault_id))."""

    def __init__(self, svc, host) -> None:
        self.svc = svc
        self.host = host
        self._paths: PathFinder | None = None

    async def handle(self, req: dict):
        cmd = req["cmd"]
        fn = getattr(self, f"api_{cmd.replace('-', '_')}", None)
        if fn is None:
            raise InputError(f"unknown command {cmd!r}")
        # A request that lacks an argument or gives a bad value is the user's error: an
        # answer in words, no traceback in the log.
        try:
            res = fn(req)
            if asyncio.iscoroutine(res):
                res = await res
        except KeyError as e:
            raise InputError(f"the {cmd} request needs the argument {e.args[0]!r}") from None
        except ValueError as e:  # int("x"), and TopologyError, ModelError, ConfigError
            raise InputError(f"{cmd}: {e}") from None
        return res

    def api_status(self, req) -> dict:
        h, cfg = self.host, self.svc.cfg
        st = h.state()
        workers = h.workers
        fuzz = st["fuzz"]
        return {
            "pid": os.getpid(),
            "uptime_s": round(time.time() - h.started, 1),
            "config": h.config_path,
            "config_error": h.last_config_error,
            "config_reloads": h.reloads,
            "model": {
                "rules": st["rules"],
                "classes": st["classes"],
                "version": st["version"],
                "switches": len(cfg.topology.switches),
                "edge_ports": len(cfg.edge_ports),
            },
            "tester": st["tester"],
            "tester_workers": None
            if workers is None
            else [
                {
                    "index": i,
                    "alive": workers.procs[i].poll() is None,
                    "datagrams": workers.stats.get(i, {}).get("datagrams", 0),
                    "reports": workers.stats.get(i, {}).get("reports", 0),
                }
                for i in sorted(workers.procs)
            ],
            "scaleout": st.get("scaleout"),
            "faults_open": st["faults_open"],
            "intents_open": st.get("intents", {}),
            "agents": st.get("agents", {}),
            "probes": st.get("probes", {}),
            "startup": st.get("startup"),
            "fuzz": None
            if fuzz is None
            else {
                k: fuzz.get(k)
                for k in (
                    "probes_sent_total",
                    "window_s",
                    "areas",
                    "areas_recent",
                    "expected_detect_s_1_256",
                    "error",
                )
            },
            "controller": "proxy" if self.svc.proxy is not None else "off (rules from file)",
            "switches_connected": sorted(d for d, up in st["switches"].items() if up),
            "controllers": self.svc.proxy.controllers() if self.svc.proxy is not None else None,
            "metrics": f"http://{cfg.metrics.host}:{h.metrics_port}/metrics",
            "ui": f"http://{url_host(cfg.ui.host)}:{h.ui_port}/ui/" if h.ui is not None else None,
            "sflow": f"{cfg.sflow.host}:{cfg.sflow.port}",
            "ifmap": {
                "interfaces": len(h.tester.ifmap),
                "stale": h.ifmaps.stale() if h.ifmaps is not None else [],
            },
        }

    def api_faults(self, req) -> list:
        """The faults; `state` (open or resolved), `since` (ids above it) and
        `changed_since` (a time: seen or resolved then or later) narrow the list. Faults
        waiting in memory for the store are in it too (saved: false)."""
        state = req.get("state")
        if state is not None and state not in ("open", "resolved"):
            raise InputError(f"state must be open or resolved, not {state!r}")
        since = None if req.get("since") is None else _int_arg(req, "since")
        changed = req.get("changed_since")
        if changed is not None and (
            isinstance(changed, bool) or not isinstance(changed, int | float)
        ):
            raise InputError(f"changed_since must be a time in seconds, not {changed!r}")
        return fault_list(
            self.svc.store, self.host.unsaved_faults(), state, since=since, changed_since=changed
        )

    def api_fault(self, req) -> dict:
        row = self.svc.store.get(_int_arg(req, "id"))
        if row is None:
            raise InputError(f"no fault with id {req['id']}")
        out = fault_json(row)
        out["path"] = actual_path_json(self._path_finder(), out)
        return out

    def _path_finder(self) -> PathFinder:
        """One per topology (a reload may bring another); it caches its answers."""
        if self._paths is None or self._paths.topo is not self.svc.topology:
            self._paths = PathFinder(self.svc.topology)
        return self._paths

    async def api_localize(self, req) -> dict:
        return await self.host.faults.localize(_int_arg(req, "id"))

    def api_trace(self, req) -> dict:
        try:
            return answers.trace(self.svc.topology, self.svc.model, req["ingress"], req["header"])
        except answers.QueryError as e:
            raise InputError(str(e)) from None

    def api_reach(self, req) -> dict:
        limit = req.get("limit", 20)
        if isinstance(limit, bool) or not isinstance(limit, int) or not 0 <= limit <= 100000:
            raise InputError(f"limit must be an integer from 0 to 100000, not {limit!r}")
        try:
            return answers.reach(self.svc.topology, self.svc.model, req["src"], req["dst"], limit)
        except answers.QueryError as e:
            raise InputError(str(e)) from None

    def api_flowmod(self, req) -> dict:
        """Apply a FlowMod to the model (when the controller does not go through the proxy)."""
        svc = self.svc
        dpid = svc.topology.resolve_switch(str(req["switch"]))
        command = req.get("command", "add")
        t0 = time.perf_counter()
        cause = {
            "source": "api flowmod",
            "switch": svc.topology.switches[dpid].name,
            "command": command,
            "flow": str(req["flow"]),
        }
        try:
            fm = parse_flow(req["flow"], dpid, command)
            with svc.model.caused_by(cause):
                upd = svc.model.apply(fm)
        except ModelError as e:
            raise InputError(str(e)) from None
        svc.changes.note(dpid, fm.table, fm.priority, fm.match)
        dt = time.perf_counter() - t0
        svc.metrics.model_update.observe(dt)
        return {"version": upd.version, "classes_changed": len(upd.classes), "seconds": dt}

    def api_findings(self, req) -> list:
        """Findings about the intended state (kind: intent, interference, agent; state: open
        or resolved)."""
        kind, state = req.get("kind"), req.get("state")
        for name, v in (("kind", kind), ("state", state)):
            if v is not None and not isinstance(v, str):
                raise InputError(f"{name} must be a string, not {v!r}")
        return [f.to_json() for f in self.svc.findings.findings(kind, state)]

    def api_finding(self, req) -> dict:
        f = self.svc.findings.finding(_int_arg(req, "id"))
        if f is None:
            raise InputError(f"no finding with id {req['id']}")
        return f.to_json()

    def api_topology(self, req) -> dict:
        """Switches, ports (with their Verify_Port bits), links and edge ports."""
        return topology_json(self.svc.topology)

    def api_coverage(self, req) -> dict:
        """The fuzzer's coverage per ingress; with `ingress`, that ingress's areas."""
        return coverage_json(self.svc.fuzzer, self.svc.topology, req.get("ingress"))

    def api_ui_url(self, req) -> dict:
        """The web view's URL with its token, and the file that holds the token."""
        url = self.host.ui_url()
        if url is None:
            raise ApiError("the web view is off (ui.enabled: false in pazzd.yaml)")
        return {"url": url, "token_file": self.host.ui_token_path}

    async def api_reload(self, req) -> dict:
        ok = await self.host.reload()
        h = self.host
        return {"ok": ok, "error": h.last_config_error, "warnings": h.last_reload_warnings}
