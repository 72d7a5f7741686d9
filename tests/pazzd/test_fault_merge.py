"""Two faults of one cause: a fault whose localization names the same switch and entry as
an older open fault (a misroute seen once as a missing hop and once as a detour) is folded
into it: resolved, marked merged_into, and folded again if another sample reopens it."""

from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace

from pazzd.faults import FaultEvents
from tester.engine import FaultEvent, LocalizationRequest
from tester.store import OPEN, RESOLVED, FaultStore

CAUSE = "table=0,priority=24,ip,nw_dst=10.0.1.0/24,actions=set_verify_rule:7,output:3"


class Counter:
    def __init__(self) -> None:
        self.n = 0

    def labels(self, *_):
        return self

    def inc(self) -> None:
        self.n += 1

    def observe(self, _) -> None:
        pass


class Localizer:
    """Answers as pazzd.localize does for a changed entry on s2 (or nothing)."""

    def __init__(self, answers: dict) -> None:
        self.answers = answers
        self.polls = 0

    async def localize(self, row):
        self.polls += 1
        return self.answers[row.location]


def _record(store: FaultStore, location: str) -> tuple[int, bool]:
    return store.record(
        "type_p_action", location, "cls:3", time.time(), b"", {}, (3, 5), [], None, {}
    )


def test_a_second_fault_with_the_same_cause_is_folded_into_the_first(tmp_path):
    store = FaultStore(str(tmp_path / "faults.db"))
    metrics = SimpleNamespace(
        localize=Counter(), faults_detected=Counter(), detection_latency=Counter()
    )
    changed = {"dpid": 2, "switch": "s2", "finding": "changed", "cause": CAUSE}
    loc = Localizer(
        {
            "dpid:2": changed,
            "detour:1,2,3": changed,
            "dpid:4": {
                "dpid": 4,
                "switch": "s4",
                "finding": "changed",
                "cause": CAUSE.replace("3", "4"),
            },
        }
    )
    ev = FaultEvents(store, metrics, loc, None)
    ev.tester = SimpleNamespace(answer_localization=store.set_polled)  # as the tester stores it
    a, _ = _record(store, "dpid:2")
    b, _ = _record(store, "detour:1,2,3")
    c, _ = _record(store, "dpid:4")
    asyncio.run(ev.localize(a))
    ans_b = asyncio.run(ev.localize(b))
    asyncio.run(ev.localize(c))
    assert ans_b["merged_into"] == a
    assert store.get(a).state == OPEN and store.get(c).state == OPEN  # another entry: kept
    assert store.get(b).state == RESOLVED and store.get(b).polled["merged_into"] == a
    # Another sample of b reopens it in the store; the daemon folds it again, uncounted.
    fid, new = _record(store, "detour:1,2,3")
    assert (fid, new) == (b, True) and store.get(b).state == OPEN
    ev.fault(FaultEvent(b, "type_p_action", "detour:1,2,3", "cls:3", (3, 5), {}, (1,), True))
    assert store.get(b).state == RESOLVED and metrics.faults_detected.n == 0
    # ... and its localization request polls no switch: the entry is the open fault's.
    polls = loc.polls
    ev.spawn = asyncio.run
    ev.localize_soon(LocalizationRequest(b, "type_p_action", (1,), {}, (3, 5), "detour:1,2,3"))
    assert loc.polls == polls
    # Once the first fault is gone, the second stands on its own again.
    store.resolve(a, time.time())
    _record(store, "detour:1,2,3")
    ev.fault(FaultEvent(b, "type_p_action", "detour:1,2,3", "cls:3", (3, 5), {}, (1,), True))
    assert store.get(b).state == OPEN and metrics.faults_detected.n == 1


def test_an_older_fault_without_a_culprit_is_folded_into_one_that_names_it(tmp_path):
    """A misrouted packet judged a hop further on names only candidates (Type-a there);
    the sample right after the misroute names the switch. Same entry: the one that names
    the switch stays open, whichever came first."""
    store = FaultStore(str(tmp_path / "faults.db"))
    metrics = SimpleNamespace(
        localize=Counter(), faults_detected=Counter(), detection_latency=Counter()
    )
    changed = {"dpid": 2, "switch": "s2", "finding": "changed", "cause": CAUSE}
    loc = Localizer({"hop:3:2": changed, "dpid:2": changed})
    ev = FaultEvents(store, metrics, loc, None)
    ev.tester = SimpleNamespace(answer_localization=store.set_polled)
    now = time.time()
    a, _ = store.record(
        "type_a", "hop:3:2", "c3", now, b"", {}, (3, 2), [], None, {"culprit": None}
    )
    b, _ = store.record(
        "type_p_action", "dpid:2", "c3", now, b"", {}, (3, 2), [], None, {"culprit": 2}
    )
    asyncio.run(ev.localize(a))
    ans_b = asyncio.run(ev.localize(b))
    assert "merged_into" not in ans_b and store.get(b).state == OPEN
    assert store.get(a).state == RESOLVED and store.get(a).polled["merged_into"] == b
    assert store.get(a).polled["cause"] == CAUSE  # its own answer kept
    # Another sample of the Type-a reopens it; it is folded again, uncounted.
    store.record(
        "type_a", "hop:3:2", "c3", time.time(), b"", {}, (3, 2), [], None, {"culprit": None}
    )
    ev.fault(FaultEvent(a, "type_a", "hop:3:2", "c3", (3, 2), {}, (2, 4), True))
    assert store.get(a).state == RESOLVED and metrics.faults_detected.n == 0
    # Both without a culprit: the younger is folded into the older, as before.
    c, _ = store.record("type_a", "hop:4:1", "c9", now, b"", {}, (4, 1), [], None, {})
    loc.answers["hop:4:1"] = changed
    store.resolve(b, time.time())
    d, _ = store.record("type_a", "hop:4:2", "c9", now, b"", {}, (4, 2), [], None, {})
    loc.answers["hop:4:2"] = changed
    asyncio.run(ev.localize(c))
    assert asyncio.run(ev.localize(d))["merged_into"] == c
