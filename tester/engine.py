"""The tester: sFlow datagrams in, stored and reported faults out.

Per report sample the hot path is: decode, map ifIndex to (dpid, port), parse the
frame, `model.classify(header)` (for the hold-back of recently updated classes), and
`model.allows(egress, header, Verify_Port, Verify_Rule)`, which chains the Verify_Rule
of only the expected paths with the sampled Verify_Port; a positive answer is cached
per (egress, header, tags) for one model version. Only on a fault does it ask for every
alternative (`model.expected`).

An ordinary ingress sample taken where a link arrives (a per-hop sample) is judged the
same way against the beginnings of the paths that pass there (`model.allows_at`, on a
fault `expected_at` and `expected_via`, then `detect.compare_hop`), and its faults take
the same corroboration and record path as the reports'.

The daemon calls `process_datagram()` (the collector does), `tick()` about once a
second, `answer_localization()` when it has polled flow tables, and reads `stats`.
"""

from __future__ import annotations

import logging
import queue
import sqlite3
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, fields
from typing import Any, Protocol

from cpc.fields import format_header
from cpc.results import Expected, Port, RuleRef

from . import unsaved
from .detect import BLACKHOLE, TYPE_A, Alternatives, Verdict, compare, compare_hop, in_filter
from .ifmap import IfMap
from .packet import is_report, parse_frame
from .plausible import implausible, port_masks
from .probeloss import LossAlarm, ProbeLoss
from .sflow import IF_FORMAT_SINGLE, Datagram, SflowError, decode
from .store import FaultStore
from .timers import BlackholeAlarm, BlackholeMonitor, TransientGuard, flow_paths

__all__ = [
    "Tester",
    "TesterStats",
    "LocalizationRequest",
    "FaultEvent",
    "ModelLike",
    "RateLimitedLog",
    "MAX_REPLAY_INGRESSES",
    "came_from_first",
    "egress_if_index",
]

log = logging.getLogger(__name__)


class ModelLike(Protocol):
    version: int

    def expected(self, egress: Port, header: dict) -> list[Expected]: ...

    def allows(self, egress: Port, header: dict, verify_port: int, verify_rule: int) -> bool: ...

    def classify(self, header: dict) -> int: ...

    # Per-hop samples (Model.allows_at etc.): None when the model cannot judge the header
    # there (a rewrite makes or changes its class).
    def allows_at(
        self, port: Port, header: dict, verify_port: int, verify_rule: int
    ) -> bool | None: ...

    def expected_at(self, port: Port, header: dict) -> list[Expected] | None: ...

    def expected_via(self, dpid: int, header: dict) -> list[Expected] | None: ...


@dataclass(frozen=True, slots=True)
class LocalizationRequest:
    """Ask the daemon to poll these switches' flow tables for the rule behind a fault."""

    fault_id: int
    kind: str
    candidates: tuple[int, ...]  # dpids, most likely first
    header: dict
    egress: Port | None
    location: str


@dataclass(frozen=True, slots=True)
class FaultEvent:
    """A fault sample after it was stored (`new` on first sight or reopening) or a resolution."""

    fault_id: int
    kind: str
    location: str
    header_class: str
    egress: Port | None
    header: dict
    candidates: tuple[int, ...]
    new: bool
    resolved: bool = False


class RateLimitedLog:
    """At most one log line per key per `interval` seconds, with the count suppressed."""

    def __init__(self, logger: logging.Logger, interval: float = 10.0) -> None:
        self.logger = logger
        self.interval = interval
        self._last: dict[str, tuple[float, int]] = {}

    def warning(self, key: str, msg: str, *args: Any) -> None:
        now = time.monotonic()
        last, suppressed = self._last.get(key, (-1e18, 0))
        if now - last >= self.interval:
            if suppressed:
                msg += f" ({suppressed} more suppressed)"
            self.logger.warning(msg, *args)
            self._last[key] = (now, 0)
        else:
            self._last[key] = (last, suppressed + 1)


@dataclass
class TesterStats:
    datagrams: int = 0
    malformed: int = 0
    lost_datagrams: int = 0
    reordered_datagrams: int = 0
    duplicate_datagrams: int = 0  # a sequence number seen already: dropped, not judged
    agent_restarts: int = 0
    sequence_resets: int = 0  # a forward jump too large to be loss: counted as a reset
    unknown_agent: int = 0  # datagrams from agents outside sflow.agents, dropped
    fault_store_errors: int = 0  # failed writes of the fault store
    uncorroborated: int = 0  # fault samples held, waiting for corroboration
    # Disallowed samples that cannot be fault evidence (tester.plausible): bit flips, forgeries
    samples_implausible: int = 0
    # Fault samples of a packet already held for that fault (same agent, and the same
    # sample sequence number or sample pool): repeats, not counted toward corroboration
    samples_repeated: int = 0
    faults_unrecorded: int = 0  # faults waiting in memory for the store (a gauge)
    faults_dropped: int = 0  # faults lost: the store kept failing and the queue was full
    flow_samples: int = 0
    counter_samples: int = 0
    reports: int = 0
    ingress_samples: int = 0
    unknown_interface: int = 0
    undecodable_reports: int = 0
    consistent: int = 0
    fault_samples: int = 0
    held_transient: int = 0
    cache_hits: int = 0
    cache_misses: int = 0
    faults_opened: int = 0
    faults_resolved: int = 0
    blackhole_alarms: int = 0
    interfaces_down: int = 0
    interface_errors: int = 0
    # Per-hop samples (ingress samples where a link arrives), of ingress_samples:
    hop_samples_judged: int = 0  # judged against the model's path prefixes
    hop_consistent: int = 0  # of those, tags the model allows there
    hop_fault_samples: int = 0  # of those, fault evidence before that switch
    # of those, fault evidence while a fault of the header's class is open: the packet is
    # most likely downstream of that fault (a misrouted packet is judged again at every
    # switch after), so it opens no fault of its own; exit reports still judge the class
    hop_explained: int = 0
    hop_edge_samples: int = 0  # taken at an edge port (or one no link reaches): not judged
    hop_undecodable: int = 0  # without a complete Verify/IPv4 header: not judged
    hop_held_transient: int = 0  # held back as transient: not judged
    hop_unjudged: int = 0  # the model cannot say there (a rewrite)
    extra: dict = field(default_factory=dict)

    def as_dict(self) -> dict[str, int]:
        d = {k: v for k, v in self.__dict__.items() if k != "extra"}
        d.update(self.extra)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> TesterStats:
        """as_dict() (or a sum of several, as pazzd's status has it) back as TesterStats:
        keys that are not counters of this class go to extra."""
        names = {f.name for f in fields(cls)} - {"extra"}
        st = cls(**{k: v for k, v in d.items() if k in names})
        st.extra = {k: v for k, v in d.items() if k not in names}
        return st


WATCH_FIELDS = ("ipv4_dst", "ipv4_src", "ip_proto", "tp_dst", "tp_src")


def watch_key(hdr: dict) -> tuple:
    """The fields a watched header is recognized by at an exit (those a probe sets; the
    ports only for TCP and UDP, the protocols whose frames carry them)."""
    if hdr.get("ip_proto", 0) in (6, 17):
        return tuple(hdr.get(f, 0) for f in WATCH_FIELDS)
    return (hdr.get("ipv4_dst", 0), hdr.get("ipv4_src", 0), hdr.get("ip_proto", 0), 0, 0)


def egress_if_index(sample) -> int:
    """The egress ifIndex of a report: its single output interface, else an ifIndex data
    source; 0 (unknown) for patched OVS reports without an output ifIndex."""
    if sample.output_format == IF_FORMAT_SINGLE and sample.output:
        return sample.output
    return sample.source_index if sample.source_type == 0 else 0


def _identity(sample, agent: tuple[str, int] | None) -> tuple | None:
    """What tells one sampled packet from another: (agent address, sample sequence number,
    sample pool). None without a sample (judged directly): every such sample is distinct."""
    if sample is None or agent is None:
        return None
    return (agent[0], sample.seq, sample.sample_pool)


def _same_packet(a: tuple, b: tuple) -> bool:
    """Two fault samples of one agent are one packet when they share the sample sequence
    number or the sample pool. An agent numbers the samples of each data source and adds
    the packets each stands for to its pool, so two distinct samples differ in both; a
    copy of a sample (in the same datagram, or in a renumbered one) shares both, and a
    copy with one bit flipped, in either field or anywhere else, still shares one."""
    return a[0] == b[0] and (a[1] == b[1] or a[2] == b[2])


def _location(v: Verdict, where: Port, hop: bool) -> str:
    """A fault's location key: the verdict's, or for Type-a where it was seen."""
    if v.kind != TYPE_A:
        return v.location
    return f"{'hop' if hop else 'egress'}:{where[0]}:{where[1]}"


# A fault's first sample is sent again from this many ingresses at most (pazzd.faults):
# the bound on replays per suspicion. With marked reports each sends 3 copies, so one
# suspicion costs at most 12 probes (3N each at sampling 1/N without).
MAX_REPLAY_INGRESSES = 4


def came_from_first(alts, verify_port: int) -> tuple[Expected, ...]:
    """The alternatives whose ingress's Bloom bits the sample's Verify_Port holds, first:
    where the packet most likely came in. A re-probe of the same header from there takes
    the packet's own path (a SELECT group picks its bucket by the header), so it meets the
    fault again; from another ingress it may not."""
    hit = [e for e in alts if in_filter(verify_port, e.ingress)]
    return (*hit, *(e for e in alts if e not in hit))


def loss_key(ingress: Port, area: str) -> str:
    """The header class key of a lost-probes blackhole: one per (ingress, fuzzer area)."""
    return f"loss:{ingress[0]}:{ingress[1]}:{area}"


def _tags(e: Expected) -> dict:
    return {
        "ingress": list(e.ingress),
        "verify_port": e.verify_port,
        "verify_rule": e.verify_rule,
        "path": [[h.dpid, h.in_port, h.out_port] for h in e.hops],
    }


class Tester:
    """Algorithm 3 over a live sFlow feed. Not thread-safe: one per worker process."""

    __test__ = False  # not a pytest test class
    CACHE_MAX = 1 << 18
    # A datagram sequence number this far ahead of the last one is not loss (a forged or
    # restarted agent): it counts as a reset. Gaps count as lost only up to the datagrams
    # received from that agent (sFlowAgent, sub-agent), so forged sequence numbers add at
    # most one lost datagram per datagram received.
    MAX_SEQ_GAP = 1024
    # The sequence numbers seen, this far back from an agent's latest: a datagram seen
    # already (a duplicate, a replay) is dropped, so its samples cannot corroborate a fault.
    SEQ_WINDOW = 1024
    # Per-agent state (sequence numbers, interface state) is kept for this many keys,
    # least recently seen dropped first: forged agent addresses cannot grow it.
    MAX_AGENT_STATE = 4096
    # Faults the store failed to record, kept in memory and retried (one per fault).
    MAX_UNRECORDED = 1024

    def __init__(
        self,
        model: ModelLike,
        store: FaultStore,
        ifmap: IfMap,
        *,
        ports: Iterable[Port] | None = None,
        guard: TransientGuard | None = None,
        blackholes: BlackholeMonitor | None = None,
        resolve_after: float = 60.0,
        on_fault: Callable[[FaultEvent], None] | None = None,
        on_localize: Callable[[LocalizationRequest], None] | None = None,
        rules_at: Callable[[int], Iterable[RuleRef]] | None = None,
        clock: Callable[[], float] = time.time,
        links: dict[Port, Port] | None = None,
        judge_hops: bool = True,
    ) -> None:
        self.model = model
        self.store = store
        self.ifmap = ifmap
        self._ports = list(ports) if ports is not None else None
        self.guard = guard
        self.blackholes = blackholes
        # Lost probes of the fuzzer's delivered group (tester.probeloss): set by the caller
        # where the switches report every marked probe.
        self.probe_loss: ProbeLoss | None = None
        self.resolve_after = resolve_after
        self.on_fault = on_fault
        self.localization_queue: queue.SimpleQueue[LocalizationRequest] = queue.SimpleQueue()
        self.on_localize = on_localize or self.localization_queue.put
        self.rules_at = rules_at
        self.clock = clock
        self.stats = TesterStats()
        self.rlog = RateLimitedLog(log)
        # Per-hop samples are judged where a link arrives: links maps each link end to the
        # other (the topology's; without one, none is judged).
        topo = getattr(model, "topo", None)
        self.links = links if links is not None else getattr(topo, "links", {})
        self.judge_hops = judge_hops
        self._hop_allowed: dict[tuple, int] = {}  # (port, header, tags) -> model version
        self._hop_cache: dict[tuple, tuple] = {}  # (port, header) -> (version, here, via)
        self._cache: dict[tuple, tuple[int, Alternatives]] = {}  # (egress, header) -> alts
        self._classes: dict[tuple, int] = {}  # header -> class, for _class_of's model version
        self._class_of: tuple = (None, -1)  # (model, version) the classes are of
        self._allowed: dict[tuple, int] = {}  # (egress, header, tags) -> model version
        # (agent, sub-agent) -> [latest seq, seen bitmask back from it, received, lost]
        self._seq: OrderedDict[tuple[str, int], list[int]] = OrderedDict()
        self._ifstate: OrderedDict[tuple[str, int], tuple[bool, int]] = OrderedDict()
        self._unrecorded: OrderedDict[tuple, tuple] = OrderedDict()
        # Corroboration: samples needed before a fault opens (1: the first one opens it),
        # within this many seconds; samples held meanwhile, per (kind, location, label).
        self.corroborate = 1
        self.corroborate_window = 60.0
        self._suspects: OrderedDict[tuple, list] = OrderedDict()
        # watches[watch_key(header)](egress, header, verify_port, verify_rule, allowed, now):
        # called for every report of that header (the probes of a confirmation; pazzd.probes):
        # allowed is True or False when judged, None when held back as transient (not judged).
        self.watches: dict[tuple, Callable] = {}
        # on_suspect(egress, header, expected): the first sample of a fault not open yet
        # (pazzd asks the fuzzer to probe that header again).
        self.on_suspect: Callable[[Port, dict, tuple], None] | None = None
        # on_unexplained(egress, header, verify_port): that first sample had no ingress the
        # model expects it from (a Type-a fault): its Verify_Port says where it came in.
        self.on_unexplained: Callable[[Port, dict, int], None] | None = None
        # Every (switch, port) of the network, for the Verify_Port check (tester.plausible);
        # None: the model's topology, else the ifIndex map's ports (set_tag_ports).
        self.tag_ports: list[Port] | None = None
        self._masks: tuple[int, ...] | None = None
        # sflow.agents: the agent addresses accepted (None: all). A datagram is dropped
        # unless its agent address and, when known, its UDP source are in the set.
        self.agents: frozenset[str] | None = None
        # Resolution watch: header-class key -> fault ids; fault id -> consistent-since.
        self._by_class: dict[str, set[int]] = {}
        self._since: dict[int, float | None] = {}
        self._last_fault: dict[int, tuple[str, float]] = {}
        self._blackhole_fault: dict[str, int] = {}
        # Class ids hold for one model version only (they are reused after merges), and a
        # restarted daemon numbers them afresh. A fault record keeps the label it was
        # first stored under ("c<id>"); which class its header is in now comes from
        # classifying the stored header again, once per model version.
        self._fault_hdr: dict[int, tuple[str, dict]] = {}  # fault id -> (label, header)
        self._labels: dict[int, tuple[str, ...]] = {}  # class id now -> labels
        self._labels_ver: int | None = None
        now = clock()
        for row in store.faults("open"):
            self._watch(row.id, row.header_class, row.kind, row.last_seen or now)
            if row.kind == BLACKHOLE:
                self._blackhole_fault[row.header_class] = row.id
            elif isinstance(row.header, dict):
                hdr = {k: v for k, v in row.header.items() if k != "text"}
                self._fault_hdr[row.id] = (row.header_class, hdr)

    # ------------------------------------------------------------ plumbing

    @property
    def ports(self) -> list[Port]:
        return self._ports if self._ports is not None else self.ifmap.ports()

    def _watch(self, fid: int, key: str, kind: str, now: float) -> None:
        self._by_class.setdefault(key, set()).add(fid)
        self._since[fid] = None
        self._last_fault[fid] = (kind, now)

    def class_labels(self, cls: int) -> tuple[str, ...]:
        """The labels of the open fault records whose header is in class cls (this version)."""
        if self._labels_ver != self.model.version:
            labels: dict[int, list[str]] = {}
            for label, hdr in self._fault_hdr.values():
                try:
                    c = self.model.classify(hdr)
                except Exception:  # a stored header the model cannot classify: skip it
                    continue
                lst = labels.setdefault(c, [])
                if label not in lst:
                    lst.append(label)
            self._labels = {c: tuple(v) for c, v in labels.items()}
            self._labels_ver = self.model.version
        return self._labels.get(cls, ())

    def alternatives(self, egress: Port, header: dict) -> Alternatives:
        """Every expected (ingress, path, tags) for header at egress, cached per version."""
        key = (egress, tuple(header.items()))
        ver = self.model.version
        hit = self._cache.get(key)
        if hit is not None and hit[0] == ver:
            self.stats.cache_hits += 1
            return hit[1]
        self.stats.cache_misses += 1
        alts = Alternatives(self.model.expected(egress, header))
        if len(self._cache) >= self.CACHE_MAX:
            self._cache.clear()
        self._cache[key] = (ver, alts)
        return alts

    def allows(self, egress: Port, header: dict, verify_port: int, verify_rule: int) -> bool:
        """Does the model expect these tags for header at egress? Yes-answers are cached."""
        key = (egress, tuple(header.items()), verify_port, verify_rule)
        ver = self.model.version
        if self._allowed.get(key) == ver:
            self.stats.cache_hits += 1
            return True
        self.stats.cache_misses += 1
        ok = self.model.allows(egress, header, verify_port, verify_rule)
        if ok:
            if len(self._allowed) >= self.CACHE_MAX:
                self._allowed.clear()
            self._allowed[key] = ver
        return ok

    # ------------------------------------------------------------ input

    def process_datagram(
        self, data: bytes, now: float | None = None, source: str | None = None
    ) -> None:
        """Decode and handle one sFlow datagram; malformed ones are counted and dropped.
        source: the UDP source address, checked against `agents` when given."""
        self.stats.datagrams += 1
        try:
            dg = decode(data)
        except SflowError as e:
            self.stats.malformed += 1
            self.rlog.warning("malformed", "malformed sFlow datagram dropped: %s", e)
            return
        if self.agents is not None and not (
            dg.agent in self.agents and (source is None or source in self.agents)
        ):
            self.stats.unknown_agent += 1
            self.rlog.warning(
                "unknown-agent",
                "sFlow datagram from an agent not in sflow.agents dropped (agent %s, from %s)",
                dg.agent,
                source,
            )
            return
        self.handle_datagram(dg, self.clock() if now is None else now)

    @classmethod
    def _remember(cls, d: OrderedDict, key, value) -> None:
        """d[key] = value, most recent last; the least recent goes beyond MAX_AGENT_STATE."""
        d[key] = value
        d.move_to_end(key)
        if len(d) > cls.MAX_AGENT_STATE:
            d.popitem(last=False)

    def _sequence(self, dg: Datagram) -> bool:
        """Account for dg's sequence number; False for a datagram seen already."""
        key, seq, st = (dg.agent, dg.sub_agent), dg.seq, self.stats
        state = self._seq.get(key)
        if state is None:
            self._remember(self._seq, key, [seq, 1, 1, 0])
            return True
        self._seq.move_to_end(key)
        last, seen, received, lost = state
        gap = (seq - last) & 0xFFFFFFFF
        if gap == 0 or gap > 0x7FFFFFFF:  # not ahead of the latest
            back = (last - seq) & 0xFFFFFFFF
            if seq <= 1 or back >= min(self.SEQ_WINDOW, 1000):
                st.agent_restarts += 1  # numbering started again
                self._seq[key] = [seq, 1, received + 1, lost]
                return True
            if seen >> back & 1:
                st.duplicate_datagrams += 1
                return False
            st.reordered_datagrams += 1
            state[1] = seen | 1 << back
            state[2] = received + 1
            return True
        if gap > self.MAX_SEQ_GAP:
            st.sequence_resets += 1
            seen = 0
        elif gap > 1:
            add = min(gap - 1, received - lost)
            st.lost_datagrams += add
            state[3] = lost + add
        state[0] = seq
        state[1] = (seen << gap | 1) & ((1 << self.SEQ_WINDOW) - 1) if seen else 1
        state[2] = received + 1
        return True

    def handle_datagram(self, dg: Datagram, now: float) -> None:
        if not self._sequence(dg):
            return
        st = self.stats
        agent, sub = dg.agent, dg.sub_agent
        lookup = self.ifmap.lookup
        for s in dg.flows:
            st.flow_samples += 1
            if is_report(s):
                st.reports += 1
                ifi = egress_if_index(s)
                egress = lookup(agent, sub, ifi)
                if egress is None:
                    st.unknown_interface += 1
                    self.rlog.warning(
                        "unknown-if",
                        "unknown sFlow interface agent=%s sub=%d ifIndex=%d",
                        agent,
                        sub,
                        ifi,
                    )
                    continue
                self.handle_report(egress, s.header, now, s.sampling_rate, s, (agent, sub))
            else:
                st.ingress_samples += 1
                if self.blackholes is None and not self.judge_hops:
                    continue
                ingress = (
                    lookup(agent, sub, s.input) if s.input_format == IF_FORMAT_SINGLE else None
                )
                if ingress is None:
                    st.unknown_interface += 1
                    continue
                pf = self._parse(s.header)
                if self.blackholes is not None and not pf.marked:
                    # a probe on its way says nothing of production rates
                    self.blackholes.on_ingress(ingress, pf.header, now, s.sampling_rate)
                if self.judge_hops:
                    self.handle_hop_sample(ingress, s.header, now, pf, s, (agent, sub))
        for c in dg.counters:
            st.counter_samples += 1
            g = c.generic
            if g is None:
                continue
            key = (agent, g.if_index)
            errs = g.in_errors + g.out_errors
            prev = self._ifstate.get(key)
            self._remember(self._ifstate, key, (g.oper_up, errs))
            if prev is not None:
                if prev[0] and not g.oper_up:
                    st.interfaces_down += 1
                    self.rlog.warning("if-down", "interface down: agent=%s ifIndex=%d", *key)
                if errs > prev[1]:
                    st.interface_errors += errs - prev[1]

    def interface_health(self) -> dict[tuple[str, int], tuple[bool, int]]:
        """(agent, ifIndex) -> (oper up, in+out errors) from the latest counter samples."""
        return dict(self._ifstate)

    def handle_report(
        self,
        egress: Port,
        raw: bytes,
        now: float,
        sampling_rate: int = 1,
        sample=None,
        agent: tuple[str, int] | None = None,
    ) -> Verdict | None:
        """Judge one report's raw header bytes at egress. Returns the Verdict of a fault.
        sample: its sFlow FlowSample, agent: its datagram's (agent, sub-agent), for the
        plausibility checks and to tell distinct packets apart (corroboration)."""
        st = self.stats
        pf = self._parse(raw)
        if not pf.has_verify or not pf.complete:
            st.undecodable_reports += 1
            self.rlog.warning("undecodable", "report without a complete Verify/IPv4 header")
            return None
        hdr = pf.header
        if pf.marked and self.probe_loss is not None:
            self.probe_loss.seen(egress, hdr, pf.verify_port)
        if self.blackholes is not None:
            # A marked report is a probe's (reported 1/1): proof of delivery, and what the
            # probe rule counts, but not the flow's production rate.
            self.note_report(egress, hdr, now, sampling_rate, probe=pf.marked)
        cls, held = self._classify(hdr, now)
        if held:
            st.held_transient += 1
            if self.watches:  # a watcher learns its probe arrived but was not judged
                self._watched(egress, hdr, pf.verify_port, pf.verify_rule, None, now)
            return None
        labels = self.class_labels(cls) if self._fault_hdr else ()
        allowed = self.allows(egress, hdr, pf.verify_port, pf.verify_rule)
        if not allowed and self._implausible(sample, agent, egress, raw, pf, report=True):
            return None
        if self.watches:
            self._watched(egress, hdr, pf.verify_port, pf.verify_rule, allowed, now)
        if allowed:
            st.consistent += 1
            for label in labels:
                for fid in self._by_class.get(label, ()):
                    if self._since.get(fid, 0) is None:
                        self._since[fid] = now
            return None
        alts = self.alternatives(egress, hdr)
        verdict = compare(alts, pf.verify_port, pf.verify_rule, self.ports, self.rules_at)
        if verdict is None:  # pragma: no cover - compare agrees with the tag set
            st.consistent += 1
            return None
        st.fault_samples += 1
        ident = _identity(sample, agent)
        return self._fault(verdict, labels, cls, egress, hdr, raw, pf, now, False, ident)

    def handle_hop_sample(
        self,
        port: Port,
        raw: bytes,
        now: float,
        pf=None,
        sample=None,
        agent: tuple[str, int] | None = None,
    ) -> Verdict | None:
        """Judge one ingress sample taken at port: where a link arrives, its tags must be
        those of a beginning of some path the model allows through there (the switches
        before it built them; this one's own step comes after the sample). Returns the
        Verdict of a fault, localized before this switch."""
        st = self.stats
        peer = self.links.get(port)
        if peer is None:
            st.hop_edge_samples += 1
            return None
        if pf is None:
            pf = self._parse(raw)
        if not pf.has_verify or not pf.complete:
            st.hop_undecodable += 1
            return None
        hdr, vp, vr = pf.header, pf.verify_port, pf.verify_rule
        cls, held = self._classify(hdr, now)
        if held:
            st.hop_held_transient += 1
            return None
        key = (port, tuple(hdr.items()), vp, vr)
        ver = self.model.version
        if self._hop_allowed.get(key) == ver:  # (cache_hits and misses count reports')
            ok = True
        else:
            ok = self.model.allows_at(port, hdr, vp, vr)
            if ok:
                if len(self._hop_allowed) >= self.CACHE_MAX:
                    self._hop_allowed.clear()
                self._hop_allowed[key] = ver
        if ok is None:
            st.hop_unjudged += 1
            return None
        if not ok and self._implausible(sample, agent, port, raw, pf, report=False):
            return None
        st.hop_samples_judged += 1
        if ok:
            # Not a sign that a fault of the class resolved: the fault may lie further on.
            st.hop_consistent += 1
            return None
        got = self.hop_alternatives(port, hdr)
        if got is None:  # pragma: no cover - allows_at said it could judge this version
            st.hop_unjudged += 1
            return None
        here, via = got
        verdict = compare_hop(here, via, peer[0], vp, vr, self.ports, self.rules_at)
        if verdict is None:  # pragma: no cover - compare_hop agrees with allows_at
            st.hop_consistent += 1
            return None
        labels = self.class_labels(cls) if self._fault_hdr else ()
        if labels:
            st.hop_explained += 1
            return verdict
        st.hop_fault_samples += 1
        ident = _identity(sample, agent)
        return self._fault(verdict, labels, cls, port, hdr, raw, pf, now, True, ident)

    def hop_alternatives(self, port: Port, hdr: dict) -> tuple[Alternatives, Alternatives] | None:
        """(prefixes arriving at port, prefixes through the switch the link comes from, those
        of the paths that end there included), cached per (port, header) and model version;
        None when the model cannot say."""
        key = (port, tuple(hdr.items()))
        ver = self.model.version
        hit = self._hop_cache.get(key)
        if hit is not None and hit[0] == ver:
            return hit[1]
        here = self.model.expected_at(port, hdr)
        up = self.links[port][0]
        via = self.model.expected_via(up, hdr) if here is not None else None
        if via is not None:
            # The paths that end at an edge port of upstream go through it too: a packet
            # of them that upstream sent down a link has their tags as it leaves.
            for p in self.ports:
                if p[0] == up and p not in self.links:
                    via = via + list(self.model.expected(p, hdr) or ())
        got = None if here is None or via is None else (Alternatives(here), Alternatives(via))
        if len(self._hop_cache) >= self.CACHE_MAX:
            self._hop_cache.clear()
        self._hop_cache[key] = (ver, got)
        return got

    def set_tag_ports(self, ports: Iterable[Port]) -> None:
        """The network's (switch, port)s, whose Bloom bits a Verify_Port may hold."""
        self.tag_ports, self._masks = list(ports), None

    def _implausible(self, sample, agent, where: Port, raw: bytes, pf, report: bool) -> bool:
        """Count and log a disallowed sample that cannot be fault evidence
        (tester.plausible; a report's input port on another switch than its output)."""
        if self._masks is None:
            ports = self.tag_ports
            if ports is None:
                topo = getattr(self.model, "topo", None)
                sw = getattr(topo, "switches", None)
                ports = [(d, p) for d in sw for p in topo.ports_of(d)] if sw else self.ports
            self._masks = port_masks(ports)
        why = implausible(sample, raw, pf.verify_port, self._masks)
        if (
            why is None
            and report
            and sample is not None
            and agent is not None
            and sample.input_format == IF_FORMAT_SINGLE
            and sample.input
        ):
            came = self.ifmap.lookup(agent[0], agent[1], sample.input)
            if came is not None and came[0] != where[0]:
                why = f"input ifIndex {sample.input} is a port of another switch"
        if why is None:
            return False
        self.stats.samples_implausible += 1
        self.rlog.warning(
            "implausible", "implausible sFlow sample at %s not judged: %s", where, why
        )
        return True

    def _fault(
        self, verdict, labels, cls, where, hdr, raw, pf, now, hop: bool, ident=None
    ) -> Verdict:
        """A fault sample (a report's or a per-hop one): corroborated, then recorded."""
        if labels:
            label = labels[0]
        else:
            label, n = f"c{cls}", 1
            while label in self._by_class:  # an open fault of another class holds it
                n += 1  # labels stay as few as the open faults (not one per model version)
                label = f"c{cls}.{n}"
        args = (verdict, label, cls, where, hdr, raw, pf.verify_port, pf.verify_rule, now, hop)
        if self.corroborate > 1 and label not in self._by_class:
            if not self._corroborated(args, where, hdr, now, ident):
                return verdict
        else:
            self._record(*args)
        return verdict

    def _watched(self, egress: Port, hdr: dict, vport: int, vrule: int, allowed: bool, now):
        fn = self.watches.get(watch_key(hdr))
        if fn is not None:
            try:
                fn(egress, hdr, vport, vrule, allowed, now)
            except Exception:
                log.exception("a report watcher failed")

    def _corroborated(self, args: tuple, egress: Port, hdr: dict, now: float, ident=None) -> bool:
        """Hold the sample of a fault that is not open yet until `corroborate` samples of
        the same fault (kind, location, class label) from distinct packets arrived within
        `corroborate_window` seconds; then record them all, the first one first (its time
        is the fault's first evidence). One corrupted sample thus opens nothing, however
        often it is repeated (ident, _same_packet). The first sample of a fault asks for a
        re-probe of its header (on_suspect: the fuzzer)."""
        v, label, hop = args[0], args[1], args[9]
        key = (v.kind, _location(v, egress, hop), label)
        held = self._suspects.get(key)
        if held is not None and now - held[0][0][8] > self.corroborate_window:  # its time
            held = None  # too old to corroborate anything
        if held is not None and ident is not None and any(_same_packet(ident, h) for _, h in held):
            self.stats.samples_repeated += 1
            return False
        if held is None:
            held = [(args, ident)]
            self._suspects[key] = held
            if len(self._suspects) > self.MAX_AGENT_STATE:
                self._suspects.popitem(last=False)
            if self.on_suspect is not None:
                try:
                    # A per-hop sample's re-probe comes from the ingresses of the paths
                    # the model brings through there (or through the switch before).
                    alts = (self._hop_alts_for_record if hop else self._alts_for_record)(
                        egress, hdr
                    )
                    self.on_suspect(egress, hdr, came_from_first(alts, args[6]))
                    if not alts and not hop and self.on_unexplained is not None:
                        self.on_unexplained(egress, hdr, args[6])
                except Exception:
                    log.exception("re-probe request failed")
        else:
            held.append((args, ident))
            self._suspects.move_to_end(key)
        if len(held) < self.corroborate:
            self.stats.uncorroborated += 1
            return False
        del self._suspects[key]
        for a, _ in held:
            self._record(*a)
        return True

    def note_report(
        self, egress: Port, hdr: dict, now: float, sampling_rate: int, probe: bool = False
    ) -> None:
        """Feed a report (probe: a marked probe's) to the blackhole timers; a report of an
        alarmed flow starts its resolution."""
        bh = self.blackholes
        flows = (
            bh.on_probe_report(egress, hdr, now)
            if probe
            else bh.on_report(egress, hdr, now, sampling_rate)
        )
        for flow in flows:
            fid = self._blackhole_fault.get("flow:" + flow.name)
            if fid is not None and self._since.get(fid, 0) is None:
                self._since[fid] = now

    def _parse(self, raw: bytes):
        return parse_frame(raw)

    CLASS_CACHE_MAX = 1 << 16

    def _classify(self, hdr: dict, now: float) -> tuple[int, bool]:
        """The header's class, and whether its report is held back (a recent update of
        this header's class that touched this header). Classes are remembered per model
        version (every model change makes a new one): flows repeat, and classifying is
        most of a consistent report's cost."""
        m = self.model
        if self._class_of[0] is not m or self._class_of[1] != m.version:
            self._classes.clear()
            self._class_of = (m, m.version)
        elif len(self._classes) >= self.CLASS_CACHE_MAX:
            self._classes.clear()
        key = tuple(hdr.items())
        cls = self._classes.get(key)
        if cls is None:
            cls = self._classes[key] = m.classify(hdr)
        return cls, self.guard is not None and self.guard.held(cls, now, hdr)

    # ------------------------------------------------------------ faults

    def _record(
        self,
        v: Verdict,
        key: str,
        cls: int,
        egress: Port,
        hdr: dict,
        raw: bytes,
        vp: int,
        vr: int,
        now: float,
        hop: bool = False,
    ) -> None:
        location = _location(v, egress, hop)
        localization = {
            "candidates": list(v.candidates),
            "culprit": v.culprit,
            "missing_hop": v.missing_hop,
            "detail": v.detail,
            "filter_location": v.location,
        }
        if hop:
            # Sampled where a link arrives at egress: the expected are path beginnings.
            localization["sampled_at"] = "hop"
            alts = self._hop_alts_for_record(egress, hdr)
        else:
            alts = self._alts_for_record(egress, hdr)
        expected = [_tags(e) for e in alts]

        def recorded(fid: int, new: bool) -> None:
            self._note_fault(fid, key, v.kind, now, new)
            if fid not in self._fault_hdr:
                self._fault_hdr[fid] = (key, hdr)
                self._labels_ver = None
            self._emit(
                FaultEvent(fid, v.kind, location, key, egress, hdr, v.candidates, new),
                LocalizationRequest(fid, v.kind, v.candidates, hdr, egress, location)
                if new
                else None,
            )

        self._store_record(
            (
                v.kind,
                location,
                key,
                now,
                raw,
                {**hdr, "text": format_header(hdr)},
                egress,
                expected,
                {"verify_port": vp, "verify_rule": vr},
                localization,
            ),
            recorded,
        )

    def _store_record(self, args: tuple, then: Callable[[int, bool], None]) -> None:
        """store.record(*args), then then(id, new). When the store fails (disk full, a
        read-only or broken file) the fault waits in memory, one entry per fault (kind,
        location, class; the latest sample), and tick() retries it. Beyond
        MAX_UNRECORDED faults the oldest is dropped, and counted."""
        try:
            fid, new = self.store.record(*args)
        except (sqlite3.Error, OSError) as e:
            st = self.stats
            st.fault_store_errors += 1
            self.rlog.warning(
                "store", "fault store failed (%s): faults kept in memory, retried every tick", e
            )
            q = self._unrecorded
            k = args[:3]
            q.pop(k, None)
            q[k] = (args, then)
            if len(q) > self.MAX_UNRECORDED:
                q.popitem(last=False)
                st.faults_dropped += 1
                log.error(
                    "a fault was dropped: the fault store keeps failing and %d others "
                    "wait in memory",
                    len(q),
                )
            st.faults_unrecorded = len(q)
            return
        then(fid, new)

    def unrecorded(self) -> list[dict]:
        """The faults waiting in memory for the store, oldest first, as plain data
        (tester.unsaved.as_dict): what pazzd shows and counts until they are stored."""
        return [unsaved.as_dict(args) for args, _ in tuple(self._unrecorded.values())]

    def _retry_unrecorded(self) -> None:
        q = self._unrecorded
        while q:
            k, (args, then) = next(iter(q.items()))
            try:
                fid, new = self.store.record(*args)
            except (sqlite3.Error, OSError):
                self.stats.fault_store_errors += 1
                break
            del q[k]
            then(fid, new)
        self.stats.faults_unrecorded = len(q)

    def _alts_for_record(self, egress: Port, hdr: dict) -> tuple[Expected, ...]:
        hit = self._cache.get((egress, tuple(hdr.items())))
        return hit[1].expected if hit else ()

    def _hop_alts_for_record(self, port: Port, hdr: dict) -> tuple[Expected, ...]:
        hit = self._hop_cache.get((port, tuple(hdr.items())))
        if not hit or hit[1] is None:
            return ()
        here, via = hit[1]
        return here.expected or via.expected

    def _note_fault(self, fid: int, key: str, kind: str, now: float, new: bool) -> None:
        if new:
            self.stats.faults_opened += 1
        if fid not in self._since:
            self._watch(fid, key, kind, now)
        self._last_fault[fid] = (kind, now)
        for other in self._by_class.get(key, ()):
            self._since[other] = None

    def _emit(self, event: FaultEvent, request: LocalizationRequest | None) -> None:
        # The store has committed by now: reporting comes after.
        if self.on_fault is not None:
            try:
                self.on_fault(event)
            except Exception:  # a broken consumer must not stop the tester
                log.exception("fault callback failed")
        if request is not None:
            try:
                self.on_localize(request)
            except Exception:
                log.exception("localization callback failed")

    def answer_localization(self, fault_id: int, answer: Any) -> None:
        """Store what polling the candidates' flow tables found (e.g. the offending entry)."""
        self.store.set_polled(fault_id, answer)

    def _blackhole(self, alarm: BlackholeAlarm, now: float) -> None:
        flow = alarm.flow
        key = "flow:" + flow.name
        cands: tuple[int, ...] = ()
        exp_list: list = []
        if flow.header is not None:
            try:
                if hasattr(self.model, "trace_headers"):
                    # The header is as it enters at the ingress: follow it from there, so
                    # a path that rewrites it (set_field) still names its switches.
                    exp_list = [d for d, _ in flow_paths(self.model, flow)]
                else:
                    exp_list = [
                        e
                        for e in self.model.expected(flow.egress, flow.header)
                        if e.ingress == flow.ingress
                    ]
            except Exception:  # the model may not know the flow: still alarm
                log.exception("expected path of critical flow %s", flow.name)
            cands = tuple(dict.fromkeys(h.dpid for e in exp_list for h in e.hops))
        location = f"flow:{flow.ingress[0]}:{flow.ingress[1]}->{flow.egress[0]}:{flow.egress[1]}"
        localization = {
            "candidates": list(cands),
            "detail": alarm.detail,
            "threshold_s": alarm.threshold,
            "expected_gap_s": alarm.expected_gap,
            "silent_since": alarm.since,
        }
        hdr = flow.header or dict(flow.match)
        self._open_blackhole(key, location, flow.egress, hdr, exp_list, cands, localization, now)

    def _lost_probes(self, loss: LossAlarm, now: float) -> None:
        """A blackhole from the delivered group's lost probes (tester.probeloss): localized
        to the switches of the model's path of the latest lost probe."""
        exp_list: list = []
        try:
            exp_list = [
                d for d in self.model.trace(loss.ingress, loss.header) if d.kind == "egress"
            ]
        except Exception:  # the model may have changed under the header: still alarm
            log.exception("path of lost probe %s", loss.header)
        cands = tuple(dict.fromkeys(h.dpid for e in exp_list for h in e.hops))
        egress = loss.exits[0]
        i = loss.ingress
        to = f"{egress[0]}:{egress[1]}"
        localization = {
            "candidates": list(cands),
            "detail": "probes into delivered space not reported at any exit",
            "area": loss.area,
            "header": format_header(loss.header),
            "lost": loss.lost,
            "judged": loss.judged,
            "others_reported": loss.others,
            "silent_since": loss.since,
        }
        key = loss_key(i, loss.area)
        location = f"route:{i[0]}:{i[1]}->{to}"
        self._open_blackhole(key, location, egress, loss.header, exp_list, cands, localization, now)

    def _open_blackhole(
        self, key: str, location: str, egress, hdr: dict, exp_list, cands, localization, now
    ) -> None:
        """Store a blackhole fault (or bump the open one of `key`) and ask for its location."""
        self.stats.blackhole_alarms += 1

        def recorded(fid: int, new: bool) -> None:
            self._blackhole_fault[key] = fid
            self._note_fault(fid, key, BLACKHOLE, now, new)
            self._emit(
                FaultEvent(fid, BLACKHOLE, location, key, egress, hdr, cands, new),
                LocalizationRequest(fid, BLACKHOLE, cands, hdr, egress, location) if new else None,
            )

        self._store_record(
            (
                BLACKHOLE,
                location,
                key,
                now,
                b"",
                hdr,
                egress,
                [_tags(e) for e in exp_list],
                None,
                localization,
            ),
            recorded,
        )

    def tick(self, now: float | None = None) -> None:
        """Timers: blackhole alarms, automatic resolution, transient expiry. Call ~1/s."""
        now = self.clock() if now is None else now
        if self._unrecorded:
            self._retry_unrecorded()
        if self.blackholes is not None:
            for alarm in self.blackholes.check(now):
                self._blackhole(alarm, now)
        if self.probe_loss is not None:
            lost, recovered = self.probe_loss.check(now)
            for loss in lost:
                self._lost_probes(loss, now)
            for ingress, area in recovered:
                fid = self._blackhole_fault.get(loss_key(ingress, area))
                if fid is not None and self._since.get(fid, 0) is None:
                    self._since[fid] = now
        done = []
        for fid, since in self._since.items():
            kind, last = self._last_fault[fid]
            if since is not None and now - since >= self.resolve_after:
                done.append(fid)
            elif kind == TYPE_A and now - last >= self.resolve_after:
                # A Type-a header has no consistent report anywhere at that egress: it
                # resolves when its samples stop (fuzz probes keep probing the class).
                done.append(fid)
        for fid in done:
            try:
                self._resolve(fid, now)
            except (sqlite3.Error, OSError) as e:  # stays open; tried again next tick
                self.stats.fault_store_errors += 1
                self.rlog.warning("store-resolve", "fault store failed to resolve: %s", e)
        if self.guard is not None:
            self.guard.expire(now)

    def _resolve(self, fid: int, now: float) -> None:
        self.store.resolve(fid, now)
        self.stats.faults_resolved += 1
        self._since.pop(fid, None)
        if self._fault_hdr.pop(fid, None) is not None:
            self._labels_ver = None
        kind, _ = self._last_fault.pop(fid)
        for key, ids in list(self._by_class.items()):
            ids.discard(fid)
            if not ids:
                del self._by_class[key]
        row = self.store.get(fid)
        if self.on_fault is not None and row is not None:
            try:
                self.on_fault(
                    FaultEvent(
                        fid,
                        kind,
                        row.location,
                        row.header_class,
                        row.egress,
                        row.header,
                        (),
                        False,
                        resolved=True,
                    )
                )
            except Exception:
                log.exception("fault callback failed")
