"""The fuzzer: plans per ingress, a shared packet budget, critical flows, coverage.

    fz = Fuzzer(model, rate=1000)                 # all edge pairs; model.subscribe(fz.on_update)
    fz.set_critical([CriticalFlow((1, 5), parse_header("tcp,nw_dst=10.0.0.2,tp_dst=80"))])
    await fz.run(injector, stop_event)            # or fz.step(injector) from your own loop
    fz.metrics()                                  # coverage per pair, probes, areas exhausted

Scheduling: ingresses take turns (one probe each per round); each ingress's plan
(fuzzer.plan.IngressPlan) is rebuilt lazily from the model's corpus when the model has
changed since it was built (model.subscribe pushes every Update), at most once per
`min_replan_s` per ingress. A token bucket (`rate` packets per second, `burst`) limits
all probes together; due critical flows go first.

Coverage, per pair (i, e): the probed classes of ingress i (the union of the model's
classes, `model.part.bdd_of[model.classify(h)]`, of every probe sent from i in the
current model version) restricted to the pair's uncovered space V ∧ ¬S_i(i, e); the ratio
is its share of that space, by header count. A model update keeps only the coverage
outside the region it touched.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from cpc.fields import format_header
from cpc.results import Port

from .craft import Crafter
from .hspace import CountCache, canonicalize, valid_headers
from .inject import Injector
from .plan import IngressPlan, Probe
from .rate import TokenBucket

__all__ = ["CriticalFlow", "Fuzzer", "port_label"]


def port_label(p: Port) -> str:
    return f"{p[0]}:{p[1]}"


@dataclass
class CriticalFlow:
    """A header the operator wants probed continuously from an ingress (every `period_s`)."""

    ingress: Port
    header: dict[str, int]
    period_s: float = 1.0
    name: str = ""
    next_due: float = field(default=0.0, compare=False)


class _IngressState:
    __slots__ = ("plan", "built_version", "built_at", "probed_cls", "cov", "cov_version", "sent",
                 "stale")  # fmt: skip

    def __init__(self, space) -> None:
        self.plan: IngressPlan | None = None
        self.built_version = -1
        self.stale = True  # an update changed one of the ingress's corpora since the plan
        self.built_at = -1e18
        self.probed_cls: set[int] = set()
        self.cov = space.false  # headers of probed classes (this and earlier versions)
        self.cov_version = -1
        self.sent = 0


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
        random_share: float = 0.25,
        min_replan_s: float = 1.0,
        crafter: Crafter | None = None,
        subscribe: bool = True,
    ) -> None:
        self.model = model
        self.space = model.space
        self.clock = clock
        self.bucket = TokenBucket(rate, burst, clock)
        self.rng = random.Random(seed)
        self.batch = batch
        self.random_share = random_share
        self.min_replan_s = min_replan_s
        self.crafter = crafter or Crafter()
        self.valid = valid_headers(self.space)
        self.critical: list[CriticalFlow] = []
        self.sent_total = 0
        self.sent_by_area: dict[str, int] = {}
        self.seq = 0
        self._seen: dict = {}
        self._seen_version = -1
        self._followed = None  # the model version the last Update told about (None: none yet)
        self.counts = CountCache(self.space)
        self._changed = self.space.false  # region changed since the last coverage trim
        self.set_pairs(pairs)
        if subscribe:
            model.subscribe(self.on_update)

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
        now = self.clock()
        self.critical = []
        for f in flows:
            f.header = canonicalize(f.header)
            f.next_due = now
            self.critical.append(f)

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
        region = upd.region
        bdd_of = self.model.part.bdd_of
        for c in upd.classes:  # group and port changes move classes without a match region
            b = bdd_of.get(c)
            if b is not None:
                region = region | b
        self._changed = self._changed | region

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
            self.space, ingress, corpora, others, rng=self.rng, seen=self._seen,
            version=version, random_share=self.random_share, cache=self.counts,
        )  # fmt: skip
        st.built_version = version
        st.built_at = now
        st.stale = False
        return st.plan

    # --- probes -------------------------------------------------------------------------------
    def _probed(self, st: _IngressState):
        return lambda area: (area & ~st.cov) == self.space.false

    def next_probes(self, n: int) -> list[Probe]:
        """Up to n probes: due critical flows first, then one per ingress in turn."""
        out: list[Probe] = []
        now = self.clock()
        for f in self.critical:
            if len(out) >= n:
                break
            if f.next_due <= now:
                out.append(Probe(f.ingress, dict(f.header), "critical", None))
                f.next_due = max(f.next_due + f.period_s, now)
        idle = 0
        while len(out) < n and self._order and idle < len(self._order):
            ingress = self._order[self._rr % len(self._order)]
            self._rr += 1
            st = self.state[ingress]
            pr = self._plan(ingress, st).next_probe(self._probed(st))
            if pr is None:
                idle += 1
                continue
            idle = 0
            out.append(pr)
        for pr in out:
            self.seq = (self.seq + 1) & 0xFFFFFFFF
            pr.seq = self.seq
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
            if st is None or pr.area == "critical":
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
        """Coverage of one pair: probed-class BDD, ratio, probe count, areas exhausted."""
        st = self.state.get(ingress)
        if st is None or st.plan is None or egress not in st.plan.pairs:
            return {"coverage_ratio": 0.0, "probes": 0, "areas_exhausted": 0, "probed": None}
        p = st.plan.pairs[egress]
        sp = self.space
        probed = st.cov & p.uncovered
        total = sp.count(p.uncovered)
        ratio = sp.count(probed) / total if total else 1.0
        sweep_ex = p.sweep == sp.false or (p.sweep & ~st.cov) == sp.false
        random_ex = (st.plan._residual & ~st.cov) == sp.false
        return {
            "coverage_ratio": ratio,
            "probes": p.probes,
            "areas_exhausted": int(sweep_ex) + int(p.boundary_done) + int(random_ex),
            "probed": probed,
        }

    def metrics(self) -> dict:
        """Metrics-friendly snapshot: totals and one row per pair (labels as "dpid:port")."""
        rows = []
        for i, e in self.pairs:
            c = self.coverage(i, e)
            rows.append({
                "ingress": port_label(i), "egress": port_label(e),
                "coverage_ratio": c["coverage_ratio"], "probes": c["probes"],
                "areas_exhausted": c["areas_exhausted"],
            })  # fmt: skip
        return {
            "probes_sent_total": self.sent_total,
            "probes_by_area": dict(self.sent_by_area),
            "model_version": self.model.version,
            "pairs": rows,
        }

    def prometheus_samples(self) -> list[tuple[str, Mapping[str, str], float]]:
        """(metric name, labels, value) for pazz_fuzz_coverage_ratio / pazz_fuzz_probes_sent_total."""
        m = self.metrics()
        out: list[tuple[str, Mapping[str, str], float]] = [
            ("pazz_fuzz_probes_sent_total", {}, float(m["probes_sent_total"]))
        ]
        for r in m["pairs"]:
            labels = {"ingress": r["ingress"], "egress": r["egress"]}
            out.append(("pazz_fuzz_coverage_ratio", labels, r["coverage_ratio"]))
            out.append(("pazz_fuzz_pair_probes", labels, float(r["probes"])))
            out.append(("pazz_fuzz_areas_exhausted", labels, float(r["areas_exhausted"])))
        return out

    def describe(self, pr: Probe) -> str:
        return f"{pr.area} {port_label(pr.ingress)} {format_header(pr.header)}"
