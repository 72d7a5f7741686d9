"""pazzd's Prometheus metrics (prefix pazz_, base units, fixed label sets).

Counters that mirror the tester's and the fuzzer's own tallies are read at scrape time
by a custom collector (`_StateCollector`), so the hot path never touches a metric object;
histograms and event counters are updated by the daemon as things happen.

| metric | type | labels |
|---|---|---|
| pazz_faults_open | gauge | class (the tester's four, and audit; with the faults waiting in memory for the store) |
| pazz_intent_violations | gauge | policy (every configured policy; no_loops by default) |
| pazz_interference_findings | gauge | apps (two owners, sorted: every pair of configured apps and unknown), relation |
| pazz_agent_entries_confirmed_total, pazz_agent_entries_diverged_total | counter | (accepted entries checked in the data plane: pazzd.entries) |
| pazz_agent_entries_pending | gauge | (waiting or being probed) |
| pazz_agent_confirm_seconds | gauge | (median, over the latest 256 confirmed entries, from the commit to the probes' evidence; NaN before the first) |
| pazz_findings_opened_total | counter | kind: intent, interference, agent (stored before they are reported: pazzd.services.FindingSink) |
| pazz_faults_detected_total | counter | class (audit: new audit faults, merged ones not) |
| pazz_detection_latency_seconds | histogram | |
| pazz_reports_total | counter | result: consistent, fault, held, undecodable, unknown_interface |
| pazz_hop_samples_total | counter | result: consistent, fault, explained, edge, undecodable, held, unjudged (ingress samples where a link arrives, judged against the model's path prefixes) |
| pazz_sflow_datagrams_received_total | counter | result: decoded, malformed (they add up to all received) |
| pazz_sflow_datagrams_lost_total | counter | (sequence gaps: sent by an agent, never received) |
| pazz_sflow_datagrams_reordered_total | counter | (decoded datagrams that arrived out of order) |
| pazz_sflow_datagrams_duplicate_total | counter | (a sequence number seen already: dropped, not judged) |
| pazz_sflow_samples_implausible_total | counter | (samples the model disallows that cannot be fault evidence: a broken IPv4 checksum, a Verify_Port no switch port explains...; not judged) |
| pazz_sflow_samples_repeated_total | counter | (fault samples of a packet already held for that fault: not counted toward corroboration) |
| pazz_model_rules, pazz_model_classes | gauge | |
| pazz_scaleout_worker_lag_seconds | gauge | worker (each scale-out worker heard from in the last 10 s: how far its model replica is behind the primary) |
| pazz_scaleout_journal_version | gauge | (the model journal's latest version in JetStream) |
| pazz_scaleout_connected | gauge | (1 while the primary is connected to NATS) |
| pazz_scaleout_evidence_total | counter | (fault samples from workers, judged again by the primary) |
| pazz_model_update_seconds | histogram | (an API FlowMod, or one batch the proxy relayed) |
| pazz_fuzz_probes_sent_total | counter | |
| pazz_fuzz_areas, pazz_fuzz_areas_recent | gauge | ingress |
| pazz_fuzz_revisit_seconds | gauge | ingress, group (sweep, boundary, region, class, delivered, random) |
| pazz_fuzz_expected_detect_seconds | gauge | ingress, fraction (1, 1/256, 1/65536) |
| pazz_switch_connected | gauge | dpid (with the proxy only: every switch of the topology) |
| pazz_controller_connected | gauge | (with the proxy only) |
| pazz_config_load_error | gauge | |
| pazz_build_info | gauge (1) | version |
| pazz_config_hash_info | gauge (1) | hash (sha256 of the config file in force, 16 hex digits) |
| process_*, python_* | | prometheus_client's process, platform and GC collectors |
| pazz_config_reloads_total | counter | result: ok, warnings (in force, but a switch's ifIndex map is stale), error |
| pazz_sflow_ifmap_stale | gauge | switch (every switches[] entry with an ovsdb: 1 while its ifIndex map could not be read again) |
| pazz_localize_seconds | histogram | |
| pazz_sflow_unknown_agent_datagrams_total | counter | (dropped: agent not in sflow.agents) |
| pazz_sflow_sequence_resets_total | counter | (sequence jumps too large to be loss) |
| pazz_proxy_dropped_connections_total | counter | reason: stalled, handshake, idle, refused, barrier, takeover |
| pazz_proxy_ignored_total | counter | what: flow_removed (a timeout or cookie the intended entry does not have), closed_before_handshake (connections that never said their dpid) |
| pazz_fault_store_errors_total | counter | (failed writes of the fault store) |
| pazz_faults_unrecorded | gauge | (faults waiting in memory for the store) |
| pazz_faults_dropped_total | counter | (faults lost: store failing, memory queue full) |
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable

from prometheus_client import (
    GC_COLLECTOR,
    CollectorRegistry,
    Counter,
    Gauge,
    GCCollector,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    start_http_server,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from pazzd import version
from pazzd.audit import AUDIT
from tester.detect import BLACKHOLE, TYPE_A, TYPE_P_ACTION, TYPE_P_MATCH
from tester.engine import TesterStats

__all__ = ["FAULT_CLASSES", "Metrics", "config_hash", "version"]

FINDING_KINDS = ("intent", "interference", "agent")
log = logging.getLogger("pazzd.metrics")
FAULT_CLASSES = (TYPE_A, TYPE_P_ACTION, TYPE_P_MATCH, BLACKHOLE, AUDIT)  # audit: pazzd/audit.py
LATENCY_BUCKETS = (0.01, 0.05, 0.1, 0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600)
UPDATE_BUCKETS = (1e-5, 5e-5, 1e-4, 5e-4, 1e-3, 5e-3, 0.01, 0.05, 0.1, 0.5, 1, 5)


def config_hash(path: str) -> str:
    """sha256 of the config file's bytes, 16 hex digits: which config is in force."""
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()[:16]


def _agent_metrics(a: dict):
    """Entry confirmation (pazzd.entries): present when it runs."""
    if not a:
        return
    yield CounterMetricFamily(
        "pazz_agent_entries_confirmed",
        "accepted entries whose probes showed them installed as the model has them",
        value=a.get("confirmed", 0),
    )
    yield CounterMetricFamily(
        "pazz_agent_entries_diverged",
        "accepted entries whose probes showed another entry, a wider match, or nothing",
        value=a.get("diverged", 0),
    )
    yield GaugeMetricFamily(
        "pazz_agent_entries_pending",
        "accepted entries waiting for or under confirmation",
        value=a.get("pending", 0),
    )
    med = a.get("confirm_seconds_median")
    yield GaugeMetricFamily(
        "pazz_agent_confirm_seconds",
        "median seconds from an entry's commit to its confirmation (latest 256)",
        value=float("nan") if med is None else med,
    )


def _scaleout_metrics(so: dict):
    g = GaugeMetricFamily(
        "pazz_scaleout_worker_lag_seconds",
        "how far each scale-out worker's model replica is behind the primary",
        labels=["worker"],
    )
    for w, lag in sorted(so["lag"].items()):
        g.add_metric([w], lag)
    yield g
    yield GaugeMetricFamily(
        "pazz_scaleout_journal_version",
        "the model journal's latest version in JetStream",
        value=so["journal_version"],
    )
    yield GaugeMetricFamily(
        "pazz_scaleout_connected", "1 while connected to NATS", value=int(so["connected"])
    )
    yield CounterMetricFamily(
        "pazz_scaleout_evidence",
        "fault samples from the workers, judged again by the primary",
        value=so["evidence"],
    )


class _StateCollector:
    """Reads the daemon's live state at scrape time."""

    def __init__(self, state: Callable[[], dict]) -> None:
        self.state = state

    def describe(self):
        return []

    def collect(self):
        try:
            s = self.state()
        except Exception:  # a scrape must never take the daemon down
            log.exception("metrics: reading daemon state failed")
            return
        st = TesterStats.from_dict(s.get("tester") or {})
        c = CounterMetricFamily(
            "pazz_reports", "sFlow report samples judged, by result", labels=["result"]
        )
        for result, value in (
            ("consistent", st.consistent),
            ("fault", st.fault_samples),
            ("held", st.held_transient),
            ("undecodable", st.undecodable_reports),
            ("unknown_interface", st.unknown_interface),
        ):
            c.add_metric([result], value)
        yield c
        c = CounterMetricFamily(
            "pazz_hop_samples",
            "per-hop sFlow samples (where a link arrives), by result",
            labels=["result"],
        )
        for result, value in (
            ("consistent", st.hop_consistent),
            ("fault", st.hop_fault_samples),
            ("explained", st.hop_explained),
            ("edge", st.hop_edge_samples),
            ("undecodable", st.hop_undecodable),
            ("held", st.hop_held_transient),
            ("unjudged", st.hop_unjudged),
        ):
            c.add_metric([result], value)
        yield c
        # Label values that partition one quantity: received = decoded + malformed. Lost
        # datagrams were never received, and reordered ones are decoded: metrics of their own.
        received, malformed = st.datagrams, st.malformed
        c = CounterMetricFamily(
            "pazz_sflow_datagrams_received",
            "sFlow datagrams received, by result (decoded or malformed)",
            labels=["result"],
        )
        c.add_metric(["decoded"], max(received - malformed, 0))
        c.add_metric(["malformed"], malformed)
        yield c
        yield CounterMetricFamily(
            "pazz_sflow_datagrams_lost",
            "sFlow datagrams that agents sent and pazzd never received (sequence gaps)",
            value=st.lost_datagrams,
        )
        yield CounterMetricFamily(
            "pazz_sflow_datagrams_reordered",
            "decoded sFlow datagrams that arrived after a later one of the same agent",
            value=st.reordered_datagrams,
        )
        yield CounterMetricFamily(
            "pazz_sflow_datagrams_duplicate",
            "sFlow datagrams whose sequence number was seen already (repeated or replayed): "
            "dropped, their samples not judged",
            value=st.duplicate_datagrams,
        )
        yield CounterMetricFamily(
            "pazz_sflow_samples_implausible",
            "sFlow samples the model disallows that cannot be fault evidence (a broken IPv4 "
            "checksum, a Verify_Port no switch port explains, ...): counted, not judged",
            value=st.samples_implausible,
        )
        yield CounterMetricFamily(
            "pazz_sflow_samples_repeated",
            "fault samples of a packet already held for that fault (same agent, and the same "
            "sample sequence number or pool): not counted toward corroboration",
            value=st.samples_repeated,
        )
        g = GaugeMetricFamily(
            "pazz_intent_violations",
            "open intent findings (the intended state breaks a policy), by policy",
            labels=["policy"],
        )
        for policy, n in sorted((s.get("intents") or {}).items()):
            g.add_metric([policy], n)
        yield g
        g = GaugeMetricFamily(
            "pazz_interference_findings",
            "open findings of controller applications' entries that meet, by owners and relation",
            labels=["apps", "relation"],
        )
        for (apps, relation), n in sorted((s.get("interference") or {}).items()):
            g.add_metric([apps, relation], n)
        yield g
        yield from _agent_metrics(s.get("agents") or {})
        c = CounterMetricFamily(
            "pazz_findings_opened",
            "findings opened (stored, then reported), by kind",
            labels=["kind"],
        )
        opened_by_kind = s.get("findings_opened") or {}
        for kind in FINDING_KINDS:
            c.add_metric([kind], opened_by_kind.get(kind, 0))
        yield c
        g = GaugeMetricFamily(
            "pazz_faults_open",
            "open faults, by class (stored, or waiting in memory for the fault store)",
            labels=["class"],
        )
        opened = s.get("faults_open", {})
        for k in FAULT_CLASSES:
            g.add_metric([k], opened.get(k, 0))
        yield g
        yield GaugeMetricFamily(
            "pazz_model_rules", "flow entries in the model", value=s.get("rules", 0)
        )
        yield GaugeMetricFamily(
            "pazz_model_classes", "header classes in the model", value=s.get("classes", 0)
        )
        yield GaugeMetricFamily(
            "pazz_model_version", "the model's version number", value=s.get("version", 0)
        )
        fz = s.get("fuzz") or {}
        yield CounterMetricFamily(
            "pazz_fuzz_probes_sent", "fuzz probes sent", value=fz.get("probes_sent_total", 0)
        )
        rows = fz.get("ingresses", [])
        areas = GaugeMetricFamily(
            "pazz_fuzz_areas", "probe areas of an ingress", labels=["ingress"]
        )
        recent = GaugeMetricFamily(
            "pazz_fuzz_areas_recent",
            "probe areas of an ingress probed within the fuzzer's window (fuzz.window)",
            labels=["ingress"],
        )
        revisit = GaugeMetricFamily(
            "pazz_fuzz_revisit_seconds",
            "bound on the time between two probes of one area, per area group",
            labels=["ingress", "group"],
        )
        detect = GaugeMetricFamily(
            "pazz_fuzz_expected_detect_seconds",
            "expected wait for the first probe of a hidden rule that takes a fraction of an area",
            labels=["ingress", "fraction"],
        )
        for row in rows:
            areas.add_metric([row["ingress"]], row["areas"])
            recent.add_metric([row["ingress"]], row["areas_recent"])
            for grp, v in row["revisit_s"].items():
                revisit.add_metric([row["ingress"], grp], v)
            for frac, v in row["expected_detect_s"].items():
                detect.add_metric([row["ingress"], frac], v)
        yield from (areas, recent, revisit, detect)
        if s.get("proxy_on"):  # without the proxy, pazzd has no OpenFlow sessions to report
            g = GaugeMetricFamily(
                "pazz_switch_connected",
                "1 if the switch is connected to the proxy (0 also if it never connected)",
                labels=["dpid"],
            )
            for dpid, up in sorted(s.get("switches", {}).items()):
                g.add_metric([str(dpid)], 1 if up else 0)
            yield g
            yield GaugeMetricFamily(
                "pazz_controller_connected",
                "1 if the proxy has a controller connection",
                value=1 if s.get("controller_connected") else 0,
            )
        yield CounterMetricFamily(
            "pazz_sflow_unknown_agent_datagrams",
            "sFlow datagrams dropped: agent or UDP source not in sflow.agents",
            value=st.unknown_agent,
        )
        g = GaugeMetricFamily(
            "pazz_sflow_ifmap_stale",
            "1 while the switch's sFlow ifIndex map could not be read from its OVSDB again "
            "(the last good one is in force, retried with back-off)",
            labels=["switch"],
        )
        for name, stale in sorted((s.get("ifmap_stale") or {}).items()):
            g.add_metric([name], 1 if stale else 0)
        yield g
        yield CounterMetricFamily(
            "pazz_sflow_sequence_resets",
            "sFlow sequence jumps too large to be loss, counted as agent resets",
            value=st.sequence_resets,
        )
        c = CounterMetricFamily(
            "pazz_proxy_dropped_connections",
            "proxy connections dropped or refused, by reason",
            labels=["reason"],
        )
        px = s.get("proxy") or {}
        for reason in ("stalled", "handshake", "idle", "refused", "barrier", "takeover"):
            c.add_metric([reason], px.get(reason, 0))
        yield c
        c = CounterMetricFamily(
            "pazz_proxy_ignored",
            "what peers sent that moved nothing: FLOW_REMOVEDs that do not fit the intended "
            "entry, connections closed before the OpenFlow handshake",
            labels=["what"],
        )
        ig = s.get("proxy_ignored") or {}
        for what in ("flow_removed", "closed_before_handshake"):
            c.add_metric([what], ig.get(what, 0))
        yield c
        so = s.get("scaleout")
        if so is not None:
            yield from _scaleout_metrics(so)
        yield CounterMetricFamily(
            "pazz_fault_store_errors",
            "failed writes of the fault store (disk full, read-only, broken file)",
            value=st.fault_store_errors,
        )
        yield GaugeMetricFamily(
            "pazz_faults_unrecorded",
            "faults waiting in memory for the fault store to take them",
            value=st.faults_unrecorded,
        )
        yield CounterMetricFamily(
            "pazz_faults_dropped",
            "faults lost because the fault store kept failing and the memory queue was full",
            value=st.faults_dropped,
        )


class Metrics:
    def __init__(self, state: Callable[[], dict]) -> None:
        self.registry = r = CollectorRegistry()
        self.faults_detected = Counter(
            "pazz_faults_detected",
            "faults detected (new or reopened), by class",
            ["class"],
            registry=r,
        )
        for k in FAULT_CLASSES:
            self.faults_detected.labels(k)
        self.detection_latency = Histogram(
            "pazz_detection_latency_seconds",
            "from the fault's first evidence (a blackhole: the flow's last report) to its record",
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.model_update = Histogram(
            "pazz_model_update_seconds",
            "time to apply one model update",
            buckets=UPDATE_BUCKETS,
            registry=r,
        )
        self.localize = Histogram(
            "pazz_localize_seconds",
            "time to poll and diff candidate flow tables",
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.config_load_error = Gauge(
            "pazz_config_load_error", "1 if the last configuration load failed", registry=r
        )
        self.config_reloads = Counter(
            "pazz_config_reloads",
            "configuration reloads (SIGHUP), by result",
            ["result"],
            registry=r,
        )
        for k in ("ok", "warnings", "error"):
            self.config_reloads.labels(k)
        self.build_info = Gauge(
            "pazz_build_info", "1, labelled with pazzd's version", ["version"], registry=r
        )
        self.build_info.labels(version()).set(1)
        self.config_hash_info = Gauge(
            "pazz_config_hash_info",
            "1, labelled with the sha256 (16 hex digits) of the config file in force",
            ["hash"],
            registry=r,
        )
        ProcessCollector(registry=r)
        PlatformCollector(registry=r)
        if GC_COLLECTOR is not None:
            GCCollector(registry=r)
        r.register(_StateCollector(state))
        self._server = None

    def set_config_hash(self, digest: str) -> None:
        """Label pazz_config_hash_info with the config in force (one series at a time)."""
        self.config_hash_info.clear()
        self.config_hash_info.labels(digest).set(1)

    def serve(self, host: str, port: int) -> int:
        """Start the HTTP endpoint (a daemon thread); returns the bound port."""
        server, _thread = start_http_server(port, addr=host, registry=self.registry)
        self._server = server
        return server.server_address[1]

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
