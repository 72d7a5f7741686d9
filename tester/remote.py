"""Tester workers: the tester in its own process, asking the model over Thrift.

pazzd keeps the one model; a worker reads sFlow datagrams on its own socket and judges
them with a `WorkerTester`, whose model is a `RemoteModel` speaking `model.thrift`:

- one `lookup` RPC per datagram classifies all its reports and says which are held back
  (a model update touched them less than `settle` seconds ago);
- `expected` is asked only when the worker's cache, keyed by (egress, class) and the
  model version of the last lookup, has no answer;
- faults are stored by the worker itself (the SQLite store is shared, WAL), then sent to
  pazzd with `report`, with the samples of critical flows (pazzd runs the blackhole
  timers) and the worker's counters.

The conversions between cpc.results records and their Thrift structs live here too;
pazzd's server side uses them.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

import thriftpy2

from cpc.results import Expected, Hop, Port, RuleRef

from .engine import FaultEvent, LocalizationRequest, Tester, egress_if_index
from .packet import is_report, parse_frame
from .sflow import IF_FORMAT_SINGLE
from .timers import CriticalFlow

__all__ = [
    "THRIFT",
    "RemoteModel",
    "WorkerTester",
    "FlowRelay",
    "Outbox",
    "expected_to_thrift",
    "expected_from_thrift",
    "rule_to_thrift",
    "query",
]

THRIFT = thriftpy2.load(
    str(Path(__file__).with_name("model.thrift")), module_name="pazz_model_thrift"
)

_U64 = 1 << 64


def _i64(u: int) -> int:
    return u - _U64 if u >= 1 << 63 else u


def _u64(i: int) -> int:
    return i % _U64


def rule_to_thrift(r: RuleRef):
    return THRIFT.Rule(r.table, r.priority, _i64(r.cookie), r.rule_id)


def _rule(t) -> RuleRef:
    return RuleRef(t.table, t.priority, _u64(t.cookie), t.rule_id)


def expected_to_thrift(e: Expected):
    hops = [
        THRIFT.Hop(
            h.dpid,
            h.in_port,
            [rule_to_thrift(r) for r in h.rules],
            -1 if h.out_port is None else h.out_port,
        )
        for h in e.hops
    ]
    return THRIFT.Expected(e.ingress[0], e.ingress[1], hops, e.verify_port, e.verify_rule)


def expected_from_thrift(t) -> Expected:
    hops = tuple(
        Hop(
            h.dpid,
            h.in_port,
            tuple(_rule(r) for r in h.rules),
            None if h.out_port < 0 else h.out_port,
        )
        for h in t.hops
    )
    return Expected((t.ingress_dpid, t.ingress_port), hops, t.verify_port, t.verify_rule)


def query(
    egress: Port, header: dict, verify_port: int = -1, verify_rule: int = -1, hop: bool = False
):
    """A lookup of a report at egress (hop: of a per-hop sample taken there)."""
    h = {k: int(v) for k, v in header.items()}
    return THRIFT.Query(egress[0], egress[1], h, verify_port, verify_rule, hop)


def _from_prefixes(p) -> list[Expected] | None:
    return [expected_from_thrift(t) for t in p.expected] if p.known else None


class RemoteModel:
    """The tester's view of the model (tester.engine.ModelLike) over a Thrift client.

    Answers are cached per (egress, header) for one model version. `version_now` reads
    the model's current version without a call (pazzd publishes it in a shared file);
    without it, every datagram asks.
    """

    CACHE_MAX = 1 << 18

    def __init__(self, client, version_now: Callable[[], int] | None = None) -> None:
        self.client = client
        self.version_now = version_now
        self.version = client.version()
        # (id(header), per-hop) -> (class, held until, tags allowed, cannot say)
        self._answers: dict[tuple[int, bool], tuple[int, float, bool, bool]] = {}
        self._cache: dict[tuple, tuple[int, float, bool, bool]] = {}
        self._cache_ver = -1
        self._rules: tuple[int, dict[int, list[RuleRef]]] = (-1, {})
        self.rpcs = 0

    def _lookup(self, queries: list[tuple], now: float):
        res = self.client.lookup([query(*q) for q in queries], now)
        self.rpcs += 1
        if res.version != self._cache_ver:
            self._cache.clear()
            self._cache_ver = res.version
        self.version = res.version
        return [(a.class_id, a.held_until, a.allowed, a.unjudged) for a in res.answers]

    def prefetch(self, queries: list[tuple], now: float) -> None:
        """Classify and judge the samples of one datagram, (egress, header, Verify_Port,
        Verify_Rule, per-hop) each, in at most one call. The caller keeps the headers
        alive."""
        self._answers.clear()
        if self.version_now is not None:
            ver = self.version_now()
            if ver != self._cache_ver:
                self._cache.clear()
                self._cache_ver = ver
            self.version = ver
        if self.version_now is None:  # nothing tells when a cached answer goes stale
            for q, a in zip(queries, self._lookup(queries, now), strict=True):
                self._answers[id(q[1]), q[4]] = a
            return
        cache, misses = self._cache, []
        for q in queries:
            eg, h, vp, vr, hop = q
            k = (eg, tuple(h.items()), vp, vr, hop)
            a = cache.get(k)
            if a is None:
                misses.append((q, k))
            else:
                self._answers[id(h), hop] = a
        if not misses:
            return
        answers = self._lookup([q for q, _ in misses], now)
        if len(cache) + len(misses) > self.CACHE_MAX:
            cache.clear()
        for (q, k), a in zip(misses, answers, strict=True):
            self._answers[id(q[1]), q[4]] = cache[k] = a

    def answer(self, header: dict, now: float) -> tuple[int, bool]:
        a = self._answers.get((id(header), False)) or self._answers.get((id(header), True))
        if a is None:  # not prefetched (e.g. a stored fault's header): ask alone
            a = self._lookup([((0, 0), header)], now)[0]
        return a[0], now < a[1]

    def classify(self, header: dict) -> int:
        return self.answer(header, time.time())[0]

    def allows(self, egress: Port, header: dict, verify_port: int, verify_rule: int) -> bool:
        a = self._answers.get((id(header), False))
        if a is None:  # not prefetched: ask alone
            a = self._lookup([(egress, header, verify_port, verify_rule)], time.time())[0]
        return a[2]

    def allows_at(
        self, port: Port, header: dict, verify_port: int, verify_rule: int
    ) -> bool | None:
        a = self._answers.get((id(header), True))
        if a is None:  # not prefetched: ask alone
            q = (port, header, verify_port, verify_rule, True)
            a = self._lookup([q], time.time())[0]
        return None if a[3] else a[2]

    def expected_at(self, port: Port, header: dict) -> list[Expected] | None:
        self.rpcs += 1
        return _from_prefixes(self.client.expected_at(query(port, header)))

    def expected_via(self, dpid: int, header: dict) -> list[Expected] | None:
        self.rpcs += 1
        h = {k: int(v) for k, v in header.items()}
        return _from_prefixes(self.client.expected_via(dpid, h))

    def expected(self, egress: Port, header: dict) -> list[Expected]:
        self.rpcs += 1
        return [expected_from_thrift(t) for t in self.client.expected(query(egress, header))]

    def rules_at(self, dpid: int) -> list[RuleRef]:
        ver, by = self._rules
        if ver != self.version:
            by = {}
            self._rules = (self.version, by)
        got = by.get(dpid)
        if got is None:
            self.rpcs += 1
            got = by[dpid] = [_rule(t) for t in self.client.rules_at(dpid)]
        return got


class Outbox:
    """What a worker owes pazzd: fault notes, critical-flow samples and the first samples of
    faults not open yet (suspects), sent with `report`."""

    def __init__(self) -> None:
        self.faults: list = []
        self.flows: list = []
        self.suspects: list = []

    def fault(self, ev: FaultEvent) -> None:
        self.faults.append(
            _note(
                ev.fault_id,
                ev.kind,
                ev.location,
                ev.header_class,
                ev.egress,
                ev.header,
                ev.candidates,
                opened=ev.new,
                resolved=ev.resolved,
            )
        )

    def localize(self, req: LocalizationRequest) -> None:
        self.faults.append(
            _note(
                req.fault_id,
                req.kind,
                req.location,
                "",
                req.egress,
                req.header,
                req.candidates,
                localize=True,
            )
        )

    def suspect(self, egress: Port, header: dict, expected) -> None:
        """Tester.on_suspect in a worker: pazzd asks the fuzzer for the copies."""
        h = {k: int(v) for k, v in header.items() if isinstance(v, int)}
        ings = [THRIFT.PortRef(e.ingress[0], e.ingress[1]) for e in expected]
        self.suspects.append(THRIFT.Suspect(egress[0], egress[1], h, ings))

    def unexplained(self, egress: Port, header: dict, verify_port: int) -> None:
        """Tester.on_unexplained in a worker: pazzd replays it (FaultEvents.unexplained)."""
        h = {k: int(v) for k, v in header.items() if isinstance(v, int)}
        self.suspects.append(THRIFT.Suspect(egress[0], egress[1], h, [], verify_port))

    def take(self) -> tuple[list, list, list]:
        out = (self.faults, self.flows, self.suspects)
        self.faults, self.flows, self.suspects = [], [], []
        return out


def _note(fid, kind, location, key, egress, header, candidates, **flags):
    return THRIFT.FaultNote(
        fid,
        kind,
        location,
        key,
        egress[0] if egress else -1,
        egress[1] if egress else -1,
        json.dumps(header, sort_keys=True),
        list(candidates),
        **flags,
    )


def note_event(n) -> FaultEvent | LocalizationRequest:
    """pazzd's side: a FaultNote back into the tester's own record."""
    egress = (n.egress_dpid, n.egress_port) if n.egress_dpid >= 0 else None
    header = json.loads(n.header_json) if n.header_json else {}
    if n.localize:
        return LocalizationRequest(
            n.fault_id, n.kind, tuple(n.candidates), header, egress, n.location
        )
    return FaultEvent(
        n.fault_id,
        n.kind,
        n.location,
        n.header_class,
        egress,
        header,
        tuple(n.candidates),
        n.opened,
        n.resolved,
    )


class FlowRelay:
    """Stands in for the blackhole monitor inside a worker: forwards critical-flow samples."""

    def __init__(self, flows: list[CriticalFlow], outbox: Outbox) -> None:
        self.flows = flows
        self.outbox = outbox

    def _seen(self, report: bool, port: Port, header: dict, now: float, rate: int, probe=False):
        if any(f.matches(header) for f in self.flows):
            h = {k: int(v) for k, v in header.items()}
            self.outbox.flows.append(THRIFT.FlowSeen(report, port[0], port[1], h, now, rate, probe))

    def on_report(self, egress: Port, header: dict, now: float, sampling_rate: int) -> list:
        self._seen(True, egress, header, now, sampling_rate)
        return []  # alarms and their recovery are pazzd's

    def on_probe_report(self, egress: Port, header: dict, now: float) -> list:
        self._seen(True, egress, header, now, 1, probe=True)
        return []

    def on_ingress(self, ingress: Port, header: dict, now: float, sampling_rate: int) -> None:
        self._seen(False, ingress, header, now, sampling_rate)

    def check(self, now: float) -> list:
        return []


class WorkerTester(Tester):
    """A Tester whose model is a RemoteModel: one lookup RPC per datagram, for its reports
    and its per-hop samples (pass the topology's `links`: a RemoteModel has none)."""

    __test__ = False

    def __init__(self, model: RemoteModel, *a, **kw) -> None:
        super().__init__(model, *a, **kw)
        self.remote = model
        self._frames: dict[bytes, object] = {}

    def handle_datagram(self, dg, now: float) -> None:
        frames: dict[bytes, object] = {}
        queries = []
        lookup = self.ifmap.lookup
        for s in dg.flows:
            report = is_report(s)
            if report:
                at = lookup(dg.agent, dg.sub_agent, egress_if_index(s))
            elif self.judge_hops and s.input_format == IF_FORMAT_SINGLE:
                at = lookup(dg.agent, dg.sub_agent, s.input)
                at = at if at in self.links else None
            else:
                continue
            if at is None or s.header in frames:
                continue
            pf = frames[s.header] = parse_frame(s.header)
            if pf.has_verify and pf.complete:
                queries.append((at, pf.header, pf.verify_port, pf.verify_rule, not report))
        self._frames = frames
        self.remote.prefetch(queries, now)
        try:
            super().handle_datagram(dg, now)
        finally:
            self._frames = {}

    def _parse(self, raw: bytes):
        pf = self._frames.get(raw)
        return pf if pf is not None else super()._parse(raw)

    def _classify(self, hdr: dict, now: float) -> tuple[int, bool]:
        return self.remote.answer(hdr, now)
