"""Checks of the intended state itself, kept up to date on every committed update.

The model says what the controller's rules do; these checks say whether that is what the
operator wants. Each policy is a predicate over the outcomes (cpc.walk.Outcome) of one
header sent in at one ingress, evaluated for whole classes at once:

  loop_free       no outcome is a forwarding loop (the header comes back to a (switch,
                  in_port) it passed, unchanged). NICE's NoForwardingLoops.
  blackhole_free  no outcome is a drop that no entry decided: a table-miss, an output to a
                  down port, to a port that leads nowhere or to the input port, a group that
                  does not exist. A drop entry (an ACL) is intended and not a blackhole.
                  NICE's NoBlackHoles, within a scope (ingresses, headers).
  reach           some outcome leaves at the policy's egress.
  isolate         no outcome leaves at the egress.
  waypoint        every outcome that leaves at the egress passed one of the `via` switches.
  reply           (Plankton-neo's request/reply class) for every header that leaves at the
                  egress, the reply (addresses, ports and MACs swapped, as it left) sent in
                  at the egress leaves at the ingress.

A header violates a policy when it is in the policy's header set and its outcomes from one
of the policy's ingresses break the predicate; with a SELECT group, any bucket's outcome
counts (reach: some bucket reaches the egress).

Incremental: each class's violations are recomputed when the class is named in an Update
(its walk, its headers or its entries changed); a reply policy, which relates two
directions, is recomputed when the update changed the pairs of either direction. A
violation is keyed by what an operator would call one problem: a loop by its cycle, a
blackhole by where and why it drops, the other policies by their ingress; the classes
behind it are counted, and its witness is one representative header of them
(cpc.witness).
"""

from __future__ import annotations

import weakref
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import NamedTuple

from .fields import FIELD_NAMES, WIDTH
from .model import Model, Update
from .results import Delivery, Port
from .witness import witness_from

__all__ = [
    "KINDS",
    "Changes",
    "IntentChecker",
    "Policy",
    "Violation",
    "blackhole_reason",
    "cycle_of",
    "reply_header",
]

_MISS = "table-miss in table "
KINDS = ("loop_free", "blackhole_free", "reach", "isolate", "waypoint", "reply")
_SCOPED = ("loop_free", "blackhole_free")  # src: ingresses in scope (empty: every edge port)

# The reply of a header: these fields swap with their partners.
_SWAP = (("ipv4_src", "ipv4_dst"), ("tp_src", "tp_dst"), ("eth_src", "eth_dst"))


@dataclass(frozen=True)
class Policy:
    """One check of the intended state. match: ((field, value, mask), ...) in model field
    names, the headers it is about (empty: all). src: the ingresses; dst: the egress
    (reach, isolate, waypoint, reply); via: the waypoint switches. enforce: the proxy's
    guard refuses FlowMods that would violate it."""

    name: str
    kind: str
    src: tuple[Port, ...] = ()
    dst: Port | None = None
    match: tuple[tuple[str, int, int], ...] = ()
    via: frozenset[int] = frozenset()
    enforce: bool = False

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"policy {self.name!r}: unknown kind {self.kind!r}")
        if self.kind not in _SCOPED and (self.dst is None or not self.src):
            raise ValueError(f"policy {self.name!r}: {self.kind} needs from and to")
        if self.kind == "waypoint" and not self.via:
            raise ValueError(f"policy {self.name!r}: waypoint needs via")


class Violation:
    """An open violation. key: stable across updates and restarts (policy and detail);
    detail: the loop cycle, where and why a blackhole drops, or the ingress and egress;
    classes: how many classes violate it.

    The witness is picked when first read, from the state then: a violation that opens and
    closes between two reads (a route deleted and re-added) costs no witness. witness: a
    header that violates it, sent in at `ingress`; reply: for a reply policy, the reply
    header that does not make it back; paths: the model's outcomes for the witness (and
    reply_paths for the reply)."""

    __slots__ = ("key", "policy", "detail", "classes", "_pick", "_w")

    def __init__(self, key: str, policy: Policy, detail: str, classes: int, pick) -> None:
        self.key = key
        self.policy = policy
        self.detail = detail
        self.classes = classes
        self._pick = pick  # () -> the witness's fields, from the checker's state now
        self._w: dict | None = None

    @property
    def picked(self) -> bool:
        return self._w is not None

    def _get(self, name: str):
        if self._w is None:
            self._w = self._pick()
        return self._w[name]

    ingress = property(lambda self: self._get("ingress"))
    witness = property(lambda self: self._get("witness"))
    paths = property(lambda self: self._get("paths"))
    reply = property(lambda self: self._get("reply"))
    reply_paths = property(lambda self: self._get("reply_paths"))
    witness_class = property(lambda self: self._get("witness_class"))

    def __repr__(self) -> str:
        return f"Violation({self.key!r}, classes={self.classes})"


class Changes(NamedTuple):
    """What an evaluation changed: violations opened and resolved, and open ones whose
    witness changed (the witness left the violating headers)."""

    opened: list[Violation]
    resolved: list[Violation]
    changed: list[Violation]


def blackhole_reason(reason: str) -> bool:
    """Is a drop with this reason a blackhole (no entry decided it)? The model and the
    reference data plane word their reasons alike."""
    return reason != "dropped by the entry's actions"


def cycle_of(d: Delivery) -> tuple[tuple[int, int], ...]:
    """A loop outcome's cycle of (dpid, in_port): from the first port the path enters
    twice to its second entry, rotated to start at its smallest. The model's walk can
    pass a port again before it calls the path a loop (an ALL group's copies are walk
    states of their own); the packet loops from the first repeat on, as one packet at a
    time (cpc.refdp) sees it."""
    seen: dict[tuple[int, int], int] = {}
    for j, h in enumerate(d.hops):
        at = (h.dpid, h.in_port)
        if at in seen:
            cyc = [(x.dpid, x.in_port) for x in d.hops[seen[at] : j]]
            k = cyc.index(min(cyc))
            return tuple(cyc[k:] + cyc[:k])
        seen[at] = j
    raise ValueError("not a loop: no port entered twice")


def reply_header(h: dict[str, int]) -> dict[str, int]:
    r = dict(h)
    for a, b in _SWAP:
        if a in h or b in h:
            r[a], r[b] = h.get(b, 0), h.get(a, 0)
    return r


class IntentChecker:
    """Holds every policy's violations for the model it watches.

    check_all() evaluates from scratch (start-up, new policies); on_update(upd), given to
    Model.subscribe, keeps them up to date. Both return the Changes.
    """

    def __init__(self, model: Model, policies: Iterable[Policy] = ()) -> None:
        self.model = model
        self.space = model.space
        self.policies: list[Policy] = []
        self._h: list = []  # per policy: the BDD of its headers
        self._src: list[frozenset] = []
        # per policy: class_id -> {detail: (ingress, BDD of the class's violating headers)}
        self._bad: list[dict[int, dict]] = []
        # per policy: detail -> classes that violate it
        self._where: list[dict[str, set[int]]] = []
        self._reply_bad: list[dict[str, tuple]] = []  # reply policies: detail -> (ingress, BDD)
        self.open: dict[str, Violation] = {}
        self._swap = {}
        for a, b in _SWAP:
            for i in range(WIDTH[a]):
                self._swap[f"{a}_{i}"] = f"{b}_{i}"
                self._swap[f"{b}_{i}"] = f"{a}_{i}"
        self.set_policies(policies)

    # --- policies ----------------------------------------------------------------------------
    def set_policies(self, policies: Iterable[Policy]) -> None:
        """Replace the policies (a reload); call check_all() after."""
        policies = list(policies)
        names = [p.name for p in policies]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise ValueError(f"duplicate policy names: {sorted(dup)}")
        edges = set(self.model.topo.edge_ports())
        for p in policies:
            for port in (*p.src, *([p.dst] if p.dst else [])):
                if port not in edges:
                    raise ValueError(f"policy {p.name!r}: {port} is not an edge port")
            for f, _, _ in p.match:
                if f not in FIELD_NAMES:
                    raise ValueError(f"policy {p.name!r}: unknown field {f!r}")
        self.policies = policies
        self._h = [self.space.match_bdd(p.match) if p.match else self.space.true for p in policies]
        self._src = [frozenset(p.src or edges) for p in policies]
        self._bad = [{} for _ in policies]
        self._where = [defaultdict(set) for _ in policies]
        self._reply_bad = [{} for _ in policies]

    def policy(self, name: str) -> Policy | None:
        return next((p for p in self.policies if p.name == name), None)

    # --- evaluation --------------------------------------------------------------------------
    def check_all(self) -> Changes:
        walks = self.model.index.walks
        for i, p in enumerate(self.policies):
            self._bad[i].clear()
            self._where[i].clear()
            if p.kind == "reply":
                self._reply_bad[i] = self._reply(i)
                continue
            for class_id in walks:
                self._class(i, class_id)
        return self._settle(None, None)

    def on_update(self, upd: Update) -> Changes:
        if not self.policies:
            return Changes([], [], [])
        walks = self.model.index.walks
        classes = list(upd.classes | upd.reshaped)
        replies = set()  # the reply policies evaluated again
        for i, p in enumerate(self.policies):
            if p.kind == "reply":
                pairs = upd.pairs
                if any((s, p.dst) in pairs or (p.dst, s) in pairs for s in p.src):
                    self._reply_bad[i] = self._reply(i)
                    replies.add(i)
                continue
            for class_id in classes:
                old = self._bad[i].pop(class_id, None)
                if old:
                    for detail in old:
                        w = self._where[i].get(detail)
                        if w is not None:
                            w.discard(class_id)
                            if not w:
                                del self._where[i][detail]
                if class_id in walks:
                    self._class(i, class_id)
        return self._settle(set(classes), replies)

    def _class(self, i: int, class_id: int) -> None:
        """The violations of policy i by one class."""
        p, space = self.policies[i], self.space
        cls, pol_h = self.model.part.bdd_of[class_id], self._h[i]
        memo: list = []

        def class_h():
            """The class's headers in the policy's set, computed when first needed: most
            classes an update touches are decided by their walk's summaries alone."""
            if not memo:
                memo.append(cls if pol_h is space.true else cls & pol_h)
            return memo[0]

        src = self._src[i]
        found: dict[str, tuple] = {}
        kind = p.kind
        walk = self.model.index.walks[class_id]
        outcomes = self._outcomes(p, walk, class_id, src, class_h, found)
        if outcomes is not None:
            if kind != "reach":
                outcomes = [
                    (o, d) for o in outcomes if (d := self._outcome_detail(p, o)) is not None
                ]
                if not outcomes:
                    return
            h = class_h()
            if h == space.false:
                return
        else:  # decided without spelling the paths out
            if found:
                self._bad[i][class_id] = found
                for detail in found:
                    self._where[i][detail].add(class_id)
            return
        if kind == "reach":
            by_ing: dict[Port, list] = {ing: [] for ing in p.src}
            for o in outcomes:
                if o.kind == "egress" and o.egress == p.dst:
                    by_ing[o.ingress].append(o.src if o.src is not None else space.true)
            for ing, good in by_ing.items():
                bad = h & ~space.union(good) if good else h
                if bad != space.false:
                    found[self._port_detail(ing)] = (ing, bad)
        else:
            seen = set()  # multipath: many paths of one ingress end at one place alike
            for o, detail in outcomes:
                if o.src is None:
                    last = o.hops[-1]
                    key = (detail, o.ingress, last.dpid, last.in_port)
                    if key in seen:
                        continue
                    seen.add(key)
                bad = h & o.src if o.src is not None else h
                if kind == "blackhole_free" and o.reason.startswith(_MISS):
                    bad = bad & self._missed(o)
                if bad == space.false:
                    continue
                prev = found.get(detail)
                found[detail] = (o.ingress, bad if prev is None else prev[1] | bad)
        if found:
            self._bad[i][class_id] = found
            for detail in found:
                self._where[i][detail].add(class_id)

    def _outcomes(self, p: Policy, walk, class_id: int, src, class_h, found: dict):
        """The outcomes policy p must read from, or None when the walk's summaries decide
        (then `found` holds the violations). Spelling every path out is the costly part of
        a check: a fat-tree class has thousands."""
        kind = p.kind
        if kind in _SCOPED:
            ends = walk.ends()
            if kind == "loop_free" and not any(k == "loop" for k, _ in ends):
                return None
            if kind == "blackhole_free" and not any(
                k == "drop" and blackhole_reason(r) for k, r in ends
            ):
                return None
        elif class_id not in self.model.index.rewriting:
            pairs = walk.pair_set()
            if kind in ("reach", "isolate"):
                # every header of a class that no rewrite splits takes the same paths
                for ing in p.src:
                    if ((ing, p.dst) in pairs) == (kind == "isolate"):
                        h = class_h()
                        if h != self.space.false:
                            found[self._port_detail(ing)] = (ing, h)
                return None
            if kind == "waypoint":
                src = frozenset(ing for ing in p.src if (ing, p.dst) in pairs)
                if not src:
                    return None
        return walk.expanded_from(src, class_id)

    def _missed(self, o):
        """The ingress headers of a table-miss outcome that no entry matched: in table 0 a
        drop-only entry forwards like the table-miss (cpc.model._behaviour), so a class walk
        ends both the same way; the table's miss region tells them apart."""
        hop = o.hops[-1]
        el = self.model.element_for(hop.dpid, int(o.reason[len(_MISS) :]), hop.in_port)
        if el is None:
            return self.space.true
        miss = el.ident.miss
        if o.rewritten and o.final_hdr is not None:
            # the header as it reached the table; back to the ingress headers it came from
            return self.space.exist_fields(o.final_hdr & miss, list(o.rw))
        return miss

    def _port_detail(self, ing: Port) -> str:
        return self.model.topo.port_name(ing)

    def _outcome_detail(self, p: Policy, o) -> str | None:
        """The detail under which outcome o violates policy p, or None."""
        name = self.model.topo.port_name
        if p.kind == "loop_free":
            if o.kind != "loop":
                return None
            return "loop " + " > ".join(name(x) for x in cycle_of(o.delivery()))
        if p.kind == "blackhole_free":
            if o.kind != "drop" or not blackhole_reason(o.reason):
                return None
            return f"{self.model.topo.switches[o.hops[-1].dpid].name}: {o.reason}"
        if o.kind != "egress" or o.egress != p.dst:
            return None
        if p.kind == "isolate":
            return name(o.ingress)
        if p.kind == "waypoint":
            return None if any(hop.dpid in p.via for hop in o.hops) else name(o.ingress)
        raise AssertionError(p.kind)

    def _reply(self, i: int) -> dict[str, tuple]:
        """A reply policy's violations, from scratch: the headers that reach dst from an
        ingress whose reply, as it left, does not reach that ingress from dst."""
        p, space, m = self.policies[i], self.space, self.model
        out = {}
        for ing in p.src:
            back = m.reach(p.dst, ing)
            no_reply = ~self.space.bdd.let(self._swap, back)  # headers whose reply fails
            bad_parts = []
            for class_id, walk in m.index.walks.items():
                if (ing, p.dst) not in walk.pair_set():
                    continue
                cls = m.part.bdd_of[class_id] & self._h[i]
                if cls == space.false:
                    continue
                if class_id not in m.index.rewriting:  # every header leaves as it came
                    bad_parts.append(cls & no_reply)
                    continue
                for o in walk.expanded_from({ing}, class_id):
                    if o.kind != "egress" or o.egress != p.dst:
                        continue
                    if o.rewritten and o.final_hdr is not None:
                        # the header as it left; back to the ingress headers it came from
                        left = o.final_hdr & no_reply
                        pre = space.exist_fields(left, list(o.rw))
                        src = o.src if o.src is not None else m.part.bdd_of[class_id]
                        bad_parts.append(cls & src & pre)
                    else:
                        bad_parts.append(cls & no_reply)
            bad = space.union(bad_parts)
            if bad != space.false:
                out[self._port_detail(ing)] = (ing, bad)
        return out

    # --- findings ----------------------------------------------------------------------------
    def _current(self) -> dict[str, tuple[int, str, int]]:
        """key -> (policy index, detail, classes) of every violation now."""
        cur = {}
        for i, p in enumerate(self.policies):
            if p.kind == "reply":
                for detail in self._reply_bad[i]:
                    cur[f"{p.name}|{detail}"] = (i, detail, 1)
            else:
                for detail, cs in self._where[i].items():
                    cur[f"{p.name}|{detail}"] = (i, detail, len(cs))
        return cur

    def _settle(self, touched: set[int] | None, replies: set[int] | None) -> Changes:
        """Open and resolve against the violations now; touched: the classes evaluated
        again, replies: the reply policies (None: all), whose open violations may need
        another witness."""
        cur = self._current()
        resolved = [self.open.pop(k) for k in list(self.open) if k not in cur]
        opened, changed = [], []
        for key, (i, detail, n) in cur.items():
            v = self.open.get(key)
            if v is None:
                v = self.open[key] = self._violation(key, i, detail, n)
                opened.append(v)
                continue
            v.classes = n  # not a change worth storing by itself
            if not v.picked:
                continue  # it will be picked from the state it is read in
            if touched is None:
                stale = True
            elif v.witness_class is None:  # a reply policy's
                stale = i in replies
            else:
                stale = v.witness_class in touched
            if stale and not self._still_witness(i, v):
                v._w = None  # picked again when read
                changed.append(v)
        return Changes(opened, resolved, changed)

    def _still_witness(self, i: int, v: Violation) -> bool:
        """Does the witness still violate? Class ids change under it (a split, a merge):
        the witness is looked up again rather than its class."""
        if self.policies[i].kind == "reply":
            found = self._reply_bad[i].get(v.detail)
        else:
            c = self.model.classify(v.witness)
            found = self._bad[i].get(c, {}).get(v.detail)
            if found is not None:
                v._w["witness_class"] = c
        return found is not None and self.space.contains(found[1], v.witness)

    def violating(self, name: str, detail: str | None = None):
        """The BDD of the headers that violate a policy (under one detail, if given); with
        the ingress they violate it from unknown: for tests and witnesses."""
        i = next(k for k, p in enumerate(self.policies) if p.name == name)
        if self.policies[i].kind == "reply":
            parts = [b for d, (_, b) in self._reply_bad[i].items() if detail in (None, d)]
        else:
            parts = [
                b
                for found in self._bad[i].values()
                for d, (_, b) in found.items()
                if detail in (None, d)
            ]
        return self.space.union(parts)

    def _violation(self, key: str, i: int, detail: str, n: int) -> Violation:
        checker = weakref.ref(self)  # no cycle through the checker's BDDs
        return Violation(key, self.policies[i], detail, n, lambda: checker()._pick(i, detail))

    def _pick(self, i: int, detail: str) -> dict:
        """A violation's witness and paths, from the state now (it is open: the checker
        holds violating headers under its detail)."""
        p = self.policies[i]
        class_id = None
        if p.kind == "reply":
            ing, bdd = self._reply_bad[i][detail]
        else:
            class_id = min(self._where[i][detail])
            ing, bdd = self._bad[i][class_id][detail]
        hdr, paths = witness_from(self.model, ing, bdd)
        out = {
            "ingress": ing,
            "witness": hdr,
            "witness_class": class_id,
            "paths": paths,
            "reply": None,
            "reply_paths": [],
        }
        if p.kind == "reply":
            for d, final in self.model.trace_headers(ing, hdr):
                if d.kind == "egress" and d.egress == p.dst:
                    out["reply"] = reply_header(final)
                    out["reply_paths"] = self.model.trace(p.dst, out["reply"])
                    break
        return out
