"""Algorithm 3 of the PAZZ paper and further: compare a report's tags with the model's.

Pure functions over `cpc.results.Expected` lists and the tag values; no model,
no I/O. `compare()` is what runs per report sample; on the consistent path it
only looks the actual tag pair up in a precomputed set (see `Alternatives`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from cpc.results import Expected, Hop, RuleRef
from cpc.tags import VERIFY_RULE_INIT, port_bits, set_verify_rule

__all__ = [
    "TYPE_A",
    "TYPE_P_ACTION",
    "TYPE_P_MATCH",
    "BLACKHOLE",
    "Alternatives",
    "Verdict",
    "compare",
    "compare_hop",
    "first_missing_hop",
    "in_filter",
    "switches_in_filter",
    "narrow_rule_candidates",
]

TYPE_A = "type_a"  # a header the model expects nowhere at this egress got there
TYPE_P_ACTION = "type_p_action"  # different path (same or different rules): a misroute
TYPE_P_MATCH = "type_p_match"  # same path, different rules: a match fault
BLACKHOLE = "blackhole"  # a critical flow stopped arriving


@functools.lru_cache(maxsize=1 << 16)
def hop_bits(dpid: int, in_port: int) -> int:
    return port_bits(dpid, in_port)


def in_filter(verify_port: int, port: tuple[int, int]) -> bool:
    """Are all three Bloom bits of port (dpid, in_port) set in verify_port: may the packet
    have entered there?"""
    b = hop_bits(*port)
    return verify_port & b == b


class Alternatives:
    """The model's expected alternatives for one (egress, header class, model version).

    Built once per cache entry; `tags` makes the per-sample check a set lookup.
    """

    __slots__ = ("expected", "tags", "rules")

    def __init__(self, expected: Sequence[Expected]) -> None:
        self.expected = tuple(expected)
        self.tags = frozenset((e.verify_port, e.verify_rule) for e in self.expected)
        self.rules = frozenset(e.verify_rule for e in self.expected)


@dataclass(frozen=True, slots=True)
class Verdict:
    """The outcome of comparing one report with its alternatives (only built for faults)."""

    kind: str  # TYPE_A, TYPE_P_ACTION or TYPE_P_MATCH
    location: str  # stable text key: "dpid:N", "ingress:...", "candidates:..."
    candidates: tuple[int, ...]  # dpids to poll, most likely first
    culprit: int | None  # the dpid blamed when localization by path is exact
    expected: Expected | None  # the alternative that matched best
    missing_hop: int | None  # index into expected.hops of the first missing hop
    detail: str = ""
    extra: dict = field(default_factory=dict)


def first_missing_hop(hops: Sequence[Hop], verify_port: int) -> int:
    """Index of the first hop whose three Bloom bits are not all in verify_port (len if none)."""
    for i, hop in enumerate(hops):
        if not in_filter(verify_port, (hop.dpid, hop.in_port)):
            return i
    return len(hops)


def switches_in_filter(verify_port: int, ports: Iterable[tuple[int, int]]) -> tuple[int, ...]:
    """The dpids with some (dpid, in_port) whose bits are all set in verify_port."""
    out = []
    seen = set()
    for dpid, port in ports:
        if dpid in seen:
            continue
        if in_filter(verify_port, (dpid, port)):
            seen.add(dpid)
            out.append(dpid)
    return tuple(sorted(out))


def _chain(hops: Sequence[Hop]) -> list[int]:
    """Verify_Rule after each hop (element i = value after hop i)."""
    v = VERIFY_RULE_INIT
    out = []
    for hop in hops:
        for r in hop.rules:
            v = set_verify_rule(v, hop.dpid, r.table, r.priority, r.cookie, r.rule_id)
        out.append(v)
    return out


def narrow_rule_candidates(
    exp: Expected,
    verify_rule: int,
    rules_at: Callable[[int], Iterable[RuleRef]] | None,
) -> tuple[tuple[int, ...], int | None]:
    """Switches on a same-path rule fault, narrowed where the chain allows.

    The CRC chain can't be inverted, so every hop is a candidate. When `rules_at(dpid)`
    lists the switch's known entries, try replacing one hop's rules by one known
    entry (or dropping the last of them): a hop where that reproduces verify_rule is
    where the packet matched another intended entry: it comes first and is returned
    as the culprit when it is the only one. A hidden entry (unknown identity) can't
    be reproduced: all hops stay candidates and the culprit is None.
    """
    hops = exp.hops
    path = tuple(dict.fromkeys(h.dpid for h in hops))
    if rules_at is None:
        return path, None
    prefix = [VERIFY_RULE_INIT] + _chain(hops)
    hits = []
    for i, hop in enumerate(hops):
        for ref in rules_at(hop.dpid):
            for k in range(len(hop.rules)):
                alt = list(hop.rules)
                alt[k] = ref
                v = prefix[i]
                for r in alt:
                    v = set_verify_rule(v, hop.dpid, r.table, r.priority, r.cookie, r.rule_id)
                for later in hops[i + 1 :]:
                    for r in later.rules:
                        v = set_verify_rule(v, later.dpid, r.table, r.priority, r.cookie, r.rule_id)
                if v == verify_rule:
                    hits.append(hop.dpid)
    if hits:
        hits = list(dict.fromkeys(hits))
        return tuple(hits) + tuple(d for d in path if d not in hits), (
            hits[0] if len(hits) == 1 else None
        )
    return path, None


def compare(
    alts: Alternatives,
    verify_port: int,
    verify_rule: int,
    ports: Iterable[tuple[int, int]] = (),
    rules_at: Callable[[int], Iterable[RuleRef]] | None = None,
) -> Verdict | None:
    """None when the report is consistent with one alternative, else the fault Verdict.

    - No alternatives, or none whose ingress hop is in Verify_Port: Type-a, candidates
      are the switches whose bits are in Verify_Port.
    - Verify_Rule equal to an alternative's but Verify_Port differs: the same entries
      took another path (e.g. a wrong output port onto a parallel link): Type-p action.
    - Verify_Rule matches none: the alternative with the longest prefix of hops present
      in Verify_Port is the reference. If all of its hops are present and Verify_Port
      equals its filter, the path is the same and the rules differ: Type-p match,
      localized by rule. Otherwise the first missing hop's predecessor misrouted:
      Type-p action.
    """
    if (verify_port, verify_rule) in alts.tags:
        return None
    if not alts.expected:
        cands = switches_in_filter(verify_port, ports)
        return Verdict(
            TYPE_A,
            "candidates:" + ",".join(map(str, cands)),
            cands,
            None,
            None,
            None,
            "header not expected at this egress",
        )
    best = None
    best_i = -1
    for e in alts.expected:
        i = first_missing_hop(e.hops, verify_port)
        # Prefer the longest matching prefix; on ties the exact Bloom filter, then same rules.
        score = (i, e.verify_port == verify_port, e.verify_rule == verify_rule)
        if best is None or score > best_i:
            best, best_i = e, score
    exp = best
    i = best_i[0]
    same_path = i == len(exp.hops) and exp.verify_port == verify_port
    if same_path:
        cands, culprit = narrow_rule_candidates(exp, verify_rule, rules_at)
        return Verdict(
            TYPE_P_MATCH,
            f"dpid:{culprit}" if culprit is not None else "path:" + ",".join(map(str, cands)),
            cands,
            culprit,
            exp,
            None,
            "same path, different rules",
        )
    if i == len(exp.hops):
        # Every expected hop is present but there are extra bits: a detour that came back.
        extra_ports = [p for p in ports if hop_bits(*p) & ~exp.verify_port & verify_port]
        cands = switches_in_filter(verify_port & ~exp.verify_port, extra_ports)
        if not cands:
            # The extra bits name no whole hop (Bloom collisions): the packet still left
            # the expected path at one of its switches.
            cands = tuple(dict.fromkeys(h.dpid for h in exp.hops))
        return Verdict(
            TYPE_P_ACTION,
            "detour:" + ",".join(map(str, cands)),
            cands,
            None,
            exp,
            None,
            "expected path plus extra switches",
        )
    if i == 0:
        # No alternative's ingress is in the filter: the model delivers this header to this
        # egress only from other ingresses, so where it did enter it was to be dropped or
        # sent elsewhere. That is a Type-a fault for this ingress (a bypassed ACL, say).
        cands = switches_in_filter(verify_port, ports)
        return Verdict(
            TYPE_A,
            "candidates:" + ",".join(map(str, cands)),
            cands,
            None,
            exp,
            0,
            "header not expected at this egress from the ingress it came from",
        )
    culprit = exp.hops[i - 1].dpid
    cands = (culprit,) + tuple(d for d in (exp.hops[i].dpid,) if d != culprit)
    return Verdict(
        TYPE_P_ACTION,
        f"dpid:{culprit}",
        cands,
        culprit,
        exp,
        i,
        f"hop {i} (dpid {exp.hops[i].dpid} in_port {exp.hops[i].in_port}) missing; "
        f"dpid {culprit} misrouted",
    )


def compare_hop(
    here: Alternatives,
    via: Alternatives,
    upstream: int,
    verify_port: int,
    verify_rule: int,
    ports: Iterable[tuple[int, int]] = (),
    rules_at: Callable[[int], Iterable[RuleRef]] | None = None,
) -> Verdict | None:
    """compare() for a per-hop sample: a packet sampled as it arrived over a link from
    switch `upstream`, its tags those of the switches before. here: the model's prefixes
    of the paths that arrive there; via: those of the paths through upstream, cut after
    its hop (Model.expected_at, expected_via).

    - Tags the model allows as the packet leaves upstream (a prefix through it, exactly):
      all went as intended up to upstream, which sent it down a link the model does not
      send it down from where it came in. Upstream misrouted it (Type-p action), whether
      or not the model brings the header here from other ingresses.
    - Otherwise, when the model brings the header here, compare() over those prefixes;
      when it never does, compare() over the prefixes through upstream says what went
      wrong up to there (no such prefix: Type-a).
    """
    if (verify_port, verify_rule) in here.tags:
        return None
    for e in via.expected:
        if (e.verify_port, e.verify_rule) == (verify_port, verify_rule):
            return Verdict(
                TYPE_P_ACTION,
                f"dpid:{upstream}",
                (upstream,),
                upstream,
                e,
                len(e.hops),
                f"dpid {upstream} sent it on by a link the model does not send it down",
            )
    if here.expected:
        return compare(here, verify_port, verify_rule, ports, rules_at)
    return compare(via, verify_port, verify_rule, ports, rules_at)
