"""The fuzzer: endless plans per ingress, a shared packet budget, critical flows, coverage.

    fz = Fuzzer(model, rate=1000)                 # all edge pairs; model.subscribe(fz.on_update)
    fz.set_critical([CriticalFlow("web", (1, 5), None, {}, header=parse_header("..."))])
    await fz.run(injector, stop_event)            # or fz.step(injector) from your own loop
    fz.metrics()                                  # areas probed lately, revisit and detection times

Scheduling: ingresses take turns (one probe each per round); each ingress's plan
(fuzzer.plan.IngressPlan) is an endless schedule over its areas, rebuilt lazily from the
model's corpus when an update changed one of the ingress's corpora (model.subscribe pushes
every Update), at most once per `min_replan_s` per ingress. A token bucket (`rate` packets
per second, `burst`) limits all probes together; due critical flows go first.

Coverage is a time window: an area counts as covered while it was probed within the last
`window_s` seconds, and every area is probed again and again. From the schedule, the
fuzzer states how long a hidden rule that takes a fraction f of one area waits for its
first probe (`expected_detect_s`): the area's revisit period over f, each visit landing
in the rule with probability f (p99: ln(100) times that).

`coverage(i, e)` is the older per-version measure, kept for analysis: the share of a pair's
uncovered space V ∧ ¬S_i(i, e) whose model classes a probe from i has met since the last
model update.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import math
import random
import time
from collections.abc import Callable, Iterable, Mapping

from cpc.critical import CriticalFlow
from cpc.fields import format_header
from cpc.results import Port

from .craft import Crafter
from .hspace import CountCache, canonicalize, valid_headers
from .inject import Injector
from .plan import IngressPlan, Probe, default_shares
from .rate import TokenBucket

__all__ = ["DETECT_FRACTIONS", "CriticalFlow", "Fuzzer", "port_label"]

# Hidden-rule sizes for which the detection bound is stated: the whole of an area, 1/256
# of it (a /24 inside an area that spans a /16), 1/65536 of it (a /32 inside a /16).
DETECT_FRACTIONS = {"1": 1.0, "1/256": 1 / 256, "1/65536": 1 / 65536}


def port_label(p: Port) -> str:
    return f"{p[0]}:{p[1]}"


class _IngressState:
    __slots__ = (
        "plan",
        "built_version",
        "built_at",
        "probed_cls",
        "cov",
        "cov_version",
        "sent",
        "stale",
    )

    def __init__(self, space) -> None:
        self.plan: IngressPlan | None = None
        self.built_version = -1
        self.stale = True  # an update changed one of the ingress's corpora since the plan
        self.built_at = -1e18
        self.probed_cls: set[int] = set()
        self.cov = space.false  # headers of probed classes (this and earlier versions)
        self.cov_version = -1
        self.sent = 0


CONFIRM_SHARE = 0.5  # of each batch, at most, for confirmation probes
CORROBORATE_MAX = 3000  # copies of a suspicious sample's header (3N up to 1/1000)
RECENT = 16384  # probes remembered for sender(): 16 s at 1000 probes/s
# What a sampled probe is recognized by (the VLAN tag may be pushed or popped on the way).
_SENDER_FIELDS = (
    "ipv4_dst",
    "ipv4_src",
    "ip_proto",
    "tp_dst",
    "tp_src",
    "eth_type",
    "eth_dst",
    "eth_src",
)


def _sender_key(h: Mapping[str, int]) -> tuple:
    return tuple(h.get(f, 0) for f in _SENDER_FIELDS)


class Fuzzer:
    def __init__(
        self,
        model,
        pairs: Iterable[tuple[Port, Port]] | None = None,
        *,
        rate: float = 1000.0,
        burst: float | None = None,
        clock: Callable[[], float] = time.monotonic,
        seed: int | None = None,
        batch: int = 32,
        random_share: float | None = None,
        shares: Mapping[str, float] | None = None,
        window_s: float = 10.0,
        min_replan_s: float = 1.0,
        crafter: Crafter | None = None,
        subscribe: bool = True,
        sampling: int = 1,
        host_macs: Mapping[Port, int | str] | None = None,
    ) -> None:
        """sampling: the sFlow sampling 1/N of the network, for the default shares
        (fuzzer.plan.default_shares) when `shares` is None; host_macs: {ingress: MAC of the
        host behind it} for the model (Model.set_host_macs), the probes' source MAC from
        that ingress (others get a locally administered one, fuzzer.hspace.local_mac)."""
        self.model = model
        self.space = model.space
        self.clock = clock
        self.bucket = TokenBucket(rate, burst, clock)
        self.rng = random.Random(seed)
        self.batch = batch
        self.random_share = random_share
        self.shares = dict(shares) if shares is not None else default_shares(sampling)
        self.window_s = window_s
        self.min_replan_s = min_replan_s
        # Every probe carries the marked shim: the exit switch reports it always.
        self.crafter = crafter or Crafter(mark=True)
        self.valid = valid_headers(self.space)
        if host_macs is not None:
            model.set_host_macs(host_macs)
        # Critical flows probed every period_s: [flow, its header (canonical), next due].
        self.critical: list[list] = []
        # on_critical(ingress, header): a critical flow's probe was handed to the injector
        # (pazzd: the blackhole monitor counts the probes its egress should report).
        self.on_critical: Callable[[Port, dict], None] | None = None
        # on_delivered(ingress, header, area): a probe of the delivered group was handed to
        # the injector (tester.probeloss counts those no exit reports)
        self.on_delivered: Callable[[Port, dict, str], None] | None = None
        self._reprobes: collections.deque[Probe] = collections.deque(maxlen=256)
        # Confirmation probes: [ingress, header, copies left]; at most CONFIRM_SHARE of a
        # batch, so that random fuzzing never stops (pazzd.confirm).
        self._confirm: collections.deque[list] = collections.deque(maxlen=1024)
        self.confirm_sent = 0
        self.confirm_share = CONFIRM_SHARE
        # The ingresses of the latest RECENT probes, by header (sender()).
        self._recent: collections.deque[tuple] = collections.deque()
        self._sender: dict[tuple, tuple[Port, int]] = {}  # key -> (ingress, seq)
        self.sent_total = 0
        self.sent_by_area: dict[str, int] = {}
        self.seq = 0
        self._seen: dict = {}
        self._seen_version = -1
        self._followed = None  # the model version the last Update told about (None: none yet)
        self.counts = CountCache(self.space)
        self._matches: dict = {}  # match fields -> BDD, for the delivered group
        self._matches_version = -1
        self._match_count: collections.Counter = collections.Counter()  # entries per match
        self._changed = self.space.false  # region changed since the last coverage trim
        self.set_pairs(pairs)
        if subscribe:
            model.subscribe(self.on_update, weak=True)

    # --- configuration ------------------------------------------------------------------------
    def set_pairs(self, pairs: Iterable[tuple[Port, Port]] | None) -> None:
        """Select the (ingress, egress) pairs; None = every ordered pair of edge ports."""
        edges = list(self.model.topo.edge_ports())
        if pairs is None:
            sel = [(i, e) for i in edges for e in edges if i != e]
        else:
            sel = [(tuple(i), tuple(e)) for i, e in pairs]
        self.pairs = sel
        self.egresses: dict[Port, list[Port]] = {}
        for i, e in sel:
            self.egresses.setdefault(i, []).append(e)
        old = getattr(self, "state", {})
        self.state = {i: old.get(i) or _IngressState(self.space) for i in self.egresses}
        for st in self.state.values():
            st.built_version = -1
            st.stale = True
        self._order = list(self.egresses)
        self._rr = 0

    def set_critical(self, flows: Iterable[CriticalFlow]) -> None:
        """Probe each flow's header (or its match fields) from its ingress every period_s."""
        now = self.clock()
        self.critical = [
            [f, canonicalize(dict(f.header or f.match)), now] for f in flows if f.period_s > 0
        ]

    def set_rate(self, rate: float, burst: float | None = None) -> None:
        self.bucket.set_rate(rate, burst)

    # --- model updates ---------------------------------------------------------------------------
    def on_update(self, upd) -> None:
        """model.subscribe callback: remember what changed; plans are rebuilt lazily, and
        only for ingresses with a pair whose S_i or S_e the update changed."""
        if self._followed is not None and upd.version != self._followed + 1:
            self._all_stale()  # an update went by unseen
        self._followed = upd.version
        for i, _ in upd.pairs:
            st = self.state.get(i)
            if st is not None:
                st.stale = True
        if upd.exits:
            for i, egs in self.egresses.items():
                if any(e in upd.exits for e in egs):
                    self.state[i].stale = True
        # Every header whose forwarding the update may have changed lies in its region.
        self._changed = self._changed | upd.region
        if self._matches_version == upd.version - 1:
            self._follow_matches(upd.changes)
            self._matches_version = upd.version

    def _follow_matches(self, changes) -> None:
        """The distinct matches after entry changes (old, new), without reading every entry
        again (100k on the fat-tree: 90 ms an update)."""
        count, matches = self._match_count, self._matches
        for old, new in changes:
            if old is not None:
                f = old.match.fields
                count[f] -= 1
                if count[f] <= 0:
                    del count[f]
                    matches.pop(f, None)
            if new is not None:
                f = new.match.fields
                count[f] += 1
                if f not in matches:
                    matches[f] = self.space.match_bdd(f)

    def _all_stale(self) -> None:
        for st in self.state.values():
            st.stale = True

    def _trim_coverage(self) -> None:
        ch = self._changed
        if ch == self.space.false:
            return
        keep = ~ch
        for st in self.state.values():
            st.cov = st.cov & keep
            st.probed_cls.clear()
        self._changed = self.space.false

    def _plan(self, ingress: Port, st: _IngressState) -> IngressPlan:
        version = self.model.version
        # Updates name the pairs they change; without them (not subscribed, or an update
        # went by unseen) only an unchanged version keeps a plan.
        following = self._followed == version
        if st.plan is not None and (st.built_version == version or (following and not st.stale)):
            st.built_version = version  # the update did not touch this ingress's corpora
            return st.plan
        now = self.clock()
        if st.plan is not None and now - st.built_at < self.min_replan_s:
            return st.plan
        if self._seen_version != version:
            self._seen = {}
            self._seen_version = version
            self.counts.trim()
        self._trim_coverage()
        sel = set(self.egresses[ingress])
        corpora = {e: self.model.corpus(ingress, e) for e in self.egresses[ingress]}
        others = {
            e: self.model.reach(ingress, e)
            for e in self.model.topo.edge_ports()
            if e != ingress and e not in sel
        }
        st.plan = IngressPlan(
            self.space,
            ingress,
            corpora,
            others,
            rng=self.rng,
            seen=self._seen,
            version=version,
            random_share=self.random_share,
            shares=self.shares,
            classes=self.model.part.bdd_of,
            cache=self.counts,
            matches=self._match_bdds(),
            src_mac=self.model.host_macs().get(ingress),
        )
        st.built_version = version
        st.built_at = now
        st.stale = False
        return st.plan

    def _match_bdds(self) -> dict | None:
        """{match fields: BDD} of every distinct match among the model's entries, when the
        delivered group is on (BDDs kept across versions; None when it is off)."""
        if not self.shares or self.shares.get("delivered", 0.0) <= 0:
            return None
        if self._matches_version != self.model.version:  # not followed by on_update
            old = self._matches
            self._match_count = collections.Counter(e.match.fields for e in self.model.entries())
            self._matches = {
                f: old[f] if f in old else self.space.match_bdd(f) for f in self._match_count
            }
            self._matches_version = self.model.version
        return self._matches

    # --- probes -------------------------------------------------------------------------------
    def reprobe(self, ingress: Port, header: Mapping[str, int]) -> None:
        """Probe this header from this ingress once more, before anything else (the tester
        asks, to corroborate a fault's first sample). The latest 256 requests are kept."""
        if ingress in self.state:
            self._reprobes.append(Probe(ingress, dict(header), "reprobe", None))

    def confirm(self, ingress: Port, header: Mapping[str, int], copies: int) -> list | None:
        """Send this header from this ingress `copies` times, interleaved with the other
        probes (a finding's witness: with sFlow sampling 1/N, about 3N copies make it show
        at an exit with probability 95 %). None: the ingress is not fuzzed. Otherwise the
        queued item, [ingress, header, copies not sent yet, area, label]: copies 0 once
        all went out."""
        if ingress not in self.state or copies < 1:
            return None
        item = [ingress, dict(header), copies, "confirm", ""]
        self._confirm.append(item)
        return item

    def replay(self, ingress: Port, header: Mapping[str, int], label: str, copies: int) -> bool:
        """Send a lost delivered probe's header again, `copies` times, as probes of its own
        area (`label`): interleaved with the confirmation copies, handed to on_delivered as
        any delivered probe, so that the lost-probe count of the area gets them within a
        second (tester.probeloss). False if the ingress is not fuzzed."""
        if ingress not in self.state or copies < 1:
            return False
        self._confirm.append([ingress, dict(header), copies, "delivered", label])
        return True

    def sender(self, header: Mapping[str, int]) -> Port | None:
        """The ingress of a recent probe with this header (one of the latest RECENT), or
        None: a sampled probe's sender, to probe it again from where it came."""
        hit = self._sender.get(_sender_key(header))
        return None if hit is None else hit[0]

    def corroborate(self, ingress: Port, header: Mapping[str, int], sampling: int) -> list | None:
        """A suspicious sample's header, sent again 3N times at sampling 1/N (its copy is
        then sampled within about N / (rate * confirm_share) s, with probability 95 %
        within the 3N copies), as confirmation probes."""
        return self.confirm(ingress, header, min(CORROBORATE_MAX, 3 * max(1, sampling)))

    def next_probes(self, n: int) -> list[Probe]:
        """Up to n probes: re-probes, confirmation copies (up to confirm_share of n), then
        due critical flows, then one per ingress in turn."""
        out: list[Probe] = []
        while self._reprobes and len(out) < n:
            out.append(self._reprobes.popleft())
        quota = max(1, int(n * self.confirm_share))
        while self._confirm and len(out) < n and quota > 0:
            item = self._confirm[0]
            out.append(Probe(item[0], dict(item[1]), item[3], None, label=item[4]))
            self.confirm_sent += 1
            quota -= 1
            item[2] -= 1
            self._confirm.rotate(-1)  # round robin over the findings being confirmed
            if item[2] <= 0:
                self._confirm.remove(item)
        now = self.clock()
        for item in self.critical:
            if len(out) >= n:
                break
            f, header, due = item
            if due <= now:
                out.append(Probe(f.ingress, dict(header), "critical", None))
                item[2] = max(due + f.period_s, now)
        idle = 0
        while len(out) < n and self._order and idle < len(self._order):
            ingress = self._order[self._rr % len(self._order)]
            self._rr += 1
            st = self.state[ingress]
            pr = self._plan(ingress, st).next_probe(now=now)
            if pr is None:
                idle += 1
                continue
            idle = 0
            out.append(pr)
        recent, sender = self._recent, self._sender
        for pr in out:
            self.seq = (self.seq + 1) & 0xFFFFFFFF
            pr.seq = self.seq
            key = _sender_key(pr.header)
            sender[key] = (pr.ingress, pr.seq)
            recent.append((key, pr.seq))
        while len(recent) > RECENT:
            key, seq = recent.popleft()
            if sender[key][1] == seq:  # not sent again since
                del sender[key]
        return out

    def record(self, probes: Iterable[Probe]) -> None:
        """Account sent probes: counters and probed classes (coverage)."""
        classify = self.model.classify
        bdd_of = self.model.part.bdd_of
        contains = self.space.contains
        for pr in probes:
            self.sent_total += 1
            self.sent_by_area[pr.area] = self.sent_by_area.get(pr.area, 0) + 1
            st = self.state.get(pr.ingress)
            if st is None or pr.area in ("critical", "reprobe", "confirm"):
                continue
            st.sent += 1
            if st.cov_version != self.model.version:
                st.probed_cls.clear()
                st.cov_version = self.model.version
            c = classify(pr.header)
            if c not in st.probed_cls:
                st.probed_cls.add(c)
                st.cov = st.cov | bdd_of[c]
            plan = st.plan
            if plan is not None:
                for p in plan.pairs.values():
                    if not contains(p.s_i, pr.header):
                        p.probes += 1

    def step(self, injector: Injector, max_probes: int | None = None) -> int:
        """Send as many probes as the budget allows now (at most max_probes); returns the count."""
        k = self.bucket.available()
        if max_probes is not None:
            k = min(k, max_probes)
        if k <= 0:
            return 0
        probes = self.next_probes(k)
        granted = self.bucket.take(len(probes))
        probes = probes[:granted]
        by_in: dict[Port, list[bytes]] = {}
        frame = self.crafter.frame
        for pr in probes:
            by_in.setdefault(pr.ingress, []).append(frame(pr.header, pr.seq))
        for ingress, frames in by_in.items():
            injector.inject(ingress, frames)
        if self.on_critical is not None:
            for pr in probes:
                if pr.area == "critical":
                    self.on_critical(pr.ingress, pr.header)
        if self.on_delivered is not None:
            for pr in probes:
                if pr.area == "delivered":
                    self.on_delivered(pr.ingress, pr.header, pr.label)
        self.record(probes)
        return len(probes)

    async def run(self, injector: Injector, stop: asyncio.Event | None = None) -> None:
        """Probe continuously under the rate budget until stop is set."""
        stop = stop or asyncio.Event()
        while not stop.is_set():
            self.step(injector, max_probes=max(self.batch, int(self.bucket.rate / 20)))
            delay = self.bucket.wait_time(min(self.batch, int(self.bucket.burst)))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=max(delay, 0.001))

    # --- metrics --------------------------------------------------------------------------------
    def coverage(self, ingress: Port, egress: Port) -> dict:
        """Per-version coverage of one pair: the probed-class BDD, its share of the pair's
        uncovered space, and the probes from the ingress outside S_i."""
        st = self.state.get(ingress)
        if st is None or st.plan is None or egress not in st.plan.pairs:
            return {"coverage_ratio": 0.0, "probes": 0, "probed": None}
        p = st.plan.pairs[egress]
        sp = self.space
        probed = st.cov & p.uncovered
        total = sp.count(p.uncovered)
        ratio = sp.count(probed) / total if total else 1.0
        return {"coverage_ratio": ratio, "probes": p.probes, "probed": probed}

    def ingress_rate(self) -> float:
        """Probes per second that one ingress gets (ingresses take turns; critical flows
        first)."""
        crit = sum(1.0 / f.period_s for f, _, _ in self.critical)
        n = len(self._order)
        return max(self.bucket.rate - crit, 0.0) / n if n else 0.0

    def ingress_metrics(self, ingress: Port) -> dict:
        """One ingress's areas, how many were probed within `window_s`, the revisit period
        of each group and the expected (and p99) wait for the first probe of a hidden rule
        that takes a fraction f of one area (DETECT_FRACTIONS), in its slowest group."""
        st = self.state[ingress]
        plan = st.plan
        row = {
            "ingress": port_label(ingress),
            "areas": 0,
            "areas_recent": 0,
            "probes": st.sent,
            "revisit_s": {},
            "expected_detect_s": {},
            "p99_detect_s": {},
        }
        if plan is None:
            return row
        row["areas"], row["areas_recent"] = plan.area_stats(self.clock(), self.window_s)
        revisit = plan.revisit_s(self.ingress_rate())
        row["revisit_s"] = revisit
        # The random area is the whole uncovered space: a fraction of it is no bound.
        worst = max((v for g, v in revisit.items() if g != "random"), default=None)
        if worst is not None:
            for k, f in DETECT_FRACTIONS.items():
                row["expected_detect_s"][k] = worst / f
                row["p99_detect_s"][k] = worst * math.log(100) / f
        return row

    def area_ages(self, ingress: Port) -> list[tuple[str, str, int, float | None]]:
        """Every area of the ingress's plan: (group, name, probes, seconds since its last
        probe or None if never); [] before the first plan."""
        plan = self.state[ingress].plan
        return [] if plan is None else plan.area_ages(self.clock())

    @property
    def ingresses(self) -> list[Port]:
        return list(self._order)

    def metrics(self) -> dict:
        """Metrics-friendly snapshot: totals and one row per ingress (labels "dpid:port")."""
        rows = [self.ingress_metrics(i) for i in self._order]
        areas = sum(r["areas"] for r in rows)
        recent = sum(r["areas_recent"] for r in rows)
        exp = [r["expected_detect_s"]["1/256"] for r in rows if r["expected_detect_s"]]
        return {
            "probes_sent_total": self.sent_total,
            "probes_by_area": dict(self.sent_by_area),
            "model_version": self.model.version,
            "window_s": self.window_s,
            "areas": areas,
            "areas_recent": recent,
            "expected_detect_s_1_256": max(exp) if exp else None,
            "ingresses": rows,
        }

    def prometheus_samples(self) -> list[tuple[str, Mapping[str, str], float]]:
        """(metric name, labels, value); one series per ingress (and group or size), so
        the label set grows with the edge ports, not with their pairs."""
        m = self.metrics()
        out: list[tuple[str, Mapping[str, str], float]] = [
            ("pazz_fuzz_probes_sent_total", {}, float(m["probes_sent_total"]))
        ]
        for r in m["ingresses"]:
            ing = {"ingress": r["ingress"]}
            out.append(("pazz_fuzz_areas", ing, float(r["areas"])))
            out.append(("pazz_fuzz_areas_recent", ing, float(r["areas_recent"])))
            for g, v in r["revisit_s"].items():
                out.append(("pazz_fuzz_revisit_seconds", {**ing, "group": g}, v))
            for k, v in r["expected_detect_s"].items():
                out.append(("pazz_fuzz_expected_detect_seconds", {**ing, "fraction": k}, v))
        return out

    def describe(self, pr: Probe) -> str:
        return f"{pr.area} {port_label(pr.ingress)} {format_header(pr.header)}"
