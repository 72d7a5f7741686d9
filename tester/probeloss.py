"""Lost probes: the fuzzer's probes into delivered space that no exit reported.

With marked reports (`sflow.marked_reports`) the patched switches report every probe at
the edge port it leaves by, 1 in 1, whatever the sFlow rate (docs/verify-header.md). So a
probe the model delivers and no exit reports was lost on the way: a blackhole, in space
that no critical flow watches and that production traffic, sampled at 1/N, crosses too
rarely to show it (a route deleted behind the controller's back, a SELECT bucket that
drops). The fuzzer's delivered group (`fuzz.delivered_share`) probes every distinct match
of the intended entries from every ingress; this module counts, per (ingress, area), the
probes of the area that came back and those that did not.

An area alarms when, of its last WINDOW probes judged, at least LOST were lost, while the
ingress's other probes came back (OTHERS of them since the first of those losses), and
so many losses are improbable (TAIL) at the loss rate of the ingress's other areas over
the same time (at least PROBE_LOSS): the loss is the area's, not the collector's, the
injector's or the whole ingress's. (A blackhole may take part of the other areas too, a
/8's probes that land in a deleted /24: their losses raise the rate the area is compared
with, but a whole area lost stands out from any rate short of all.) A window, not a run
in a row, because a blackhole may take only part of an area (the flows a SELECT group
hashes to one bucket). A probe counts
as lost only when the model delivers it, every exit it would leave by has reported
something (an exit without sFlow never reports), its report had time to come (the batch,
the latency and the probe's way) and no model update held its header back meanwhile
(`TransientGuard`: the switches may have been between two states).

A lost probe's exact header is sent again (`replay`, REPLAY_COPIES copies, as probes of
its area): a blackhole that takes a few headers of a large area (a route typed wide that
sends them back where they came from) then fills the area's window within a second, where
the area's own probes would land there too rarely. A header is replayed at most once in
REPLAY_AGAIN_S, and an ingress at most REPLAYS_PER_MIN times a minute (at most
REPLAY_COPIES * REPLAYS_PER_MIN / 60 probes a second on top of the fuzz rate). Copies that
come back clear the header: a report of one copy counts for all of them.

The false-alarm bound: if reports are lost independently with probability at most
PROBE_LOSS (1 %), a window of 24 probes holds 8 losses with probability at most
C(24, 8) * 0.01**8 < 1e-10; at 1,000 probes/s, every one a new window, that is under
4e-4 alarms an hour. Checked by simulation in tests/tester/test_probeloss.py.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from cpc.results import Port

from .detect import in_filter
from .silence import PROBE_LOSS
from .timers import PROBE_FLIGHT

__all__ = ["LOST", "REPLAY_COPIES", "WINDOW", "LossAlarm", "ProbeLoss"]

WINDOW = 24  # the area's last probes judged
LOST = 8  # of them lost, to alarm
OTHERS = 8  # other probes of the ingress reported since the area's first loss
OTHERS_KEPT = 600.0  # s: how far back an ingress's judged probes are kept for OTHERS
TAIL = 1e-9  # the area's losses, this improbable at the other areas' loss rate

MAX_PENDING = 200_000  # probes awaiting their reports (beyond: the oldest are forgotten)
REPLAY_COPIES = LOST  # copies of a lost probe's header: all lost fill the window's LOST
REPLAY_AGAIN_S = 30.0  # a header is replayed at most once in this time
REPLAYS_PER_MIN = 30  # lost headers replayed per ingress and minute, at most


@dataclass
class LossAlarm:
    """An area's probes from one ingress are lost: `lost` of its last `judged`."""

    ingress: Port
    area: str
    header: dict  # the latest lost probe's header, as sent
    exits: list  # where the model delivers it
    since: float  # when the first of the lost probes in the window was sent
    now: float
    lost: int
    judged: int
    others: int  # the ingress's other probes reported since `since`


def binomial_tail(n: int, k: int, p: float) -> float:
    """P(X >= k) for X ~ Binomial(n, p)."""
    return sum(math.comb(n, j) * p**j * (1 - p) ** (n - j) for j in range(k, n + 1))


class _Pending:
    __slots__ = ("t", "ingress", "area", "key", "header", "seen")

    def __init__(self, t: float, ingress: Port, area: str, key: tuple, header: dict):
        self.t, self.ingress, self.area, self.key, self.header = t, ingress, area, key, header
        self.seen = False


class _Area:
    __slots__ = ("recent", "alarmed")

    def __init__(self) -> None:
        self.recent: deque[tuple[float, bool]] = deque(maxlen=WINDOW)  # (sent, lost)
        self.alarmed = False


class ProbeLoss:
    """sent() for every delivered-group probe handed to the injector, seen() for every
    marked report, check() about once a second for new alarms and recoveries.

    delivers(ingress, header): the model's exits for the header sent in at ingress, or None
    when it does not deliver it everywhere (a drop, a loop, the controller) or cannot say.
    held(header, since): a model update held reports of the header back after `since`.
    key(header): the fields a report is recognized by (tester.engine.watch_key)."""

    def __init__(
        self,
        delivers: Callable[[Port, dict], list[Port] | None],
        key: Callable[[dict], tuple],
        held: Callable[[dict, float], bool] | None = None,
        *,
        batch: float = 1.0,
        latency: float = 0.5,
        replay: Callable[[Port, dict, str, int], object] | None = None,
    ) -> None:
        self.delivers = delivers
        self.key = key
        self.held = held
        self.replay = replay  # replay(ingress, header, area, copies): send the header again
        self._replayed: dict[tuple, float] = {}  # (ingress, key) -> when last replayed
        self._replay_times: dict[Port, deque[float]] = {}  # per ingress, the last minute's
        self.replays = 0
        self.late = batch + latency + PROBE_FLIGHT
        self._pending: deque[_Pending] = deque()
        self._by_key: dict[tuple, list[_Pending]] = {}
        self._areas: dict[tuple[Port, str], _Area] = {}
        # per ingress: (sent, lost, area) of its probes judged, for the OTHERS rule
        self._judged: dict[Port, deque[tuple[float, bool, str]]] = {}
        self.reporting: set[Port] = set()  # exits that have reported a probe
        self.sent_total = self.seen_total = self.lost_total = self.unjudged = 0

    def sent(self, ingress: Port, header: dict, area: str, now: float) -> None:
        if len(self._pending) >= MAX_PENDING:
            self._forget(self._pending.popleft())
        p = _Pending(now, ingress, area, self.key(header), header)
        self._pending.append(p)
        self._by_key.setdefault(p.key, []).append(p)
        self.sent_total += 1

    def seen(self, egress: Port, header: dict, verify_port: int) -> None:
        """A marked report at egress: the probes of that header from an ingress its
        Verify_Port holds came back (wherever they left: a wrong exit is the tester's to
        judge)."""
        self.reporting.add(egress)
        for p in self._by_key.get(self.key(header), ()):
            if not p.seen and in_filter(verify_port, p.ingress):
                p.seen = True

    def check(self, now: float) -> tuple[list[LossAlarm], list[tuple[Port, str]]]:
        """(new alarms, areas that recovered: of an alarmed area, at most one probe of its
        window lost now)."""
        alarms: list[LossAlarm] = []
        recovered: list[tuple[Port, str]] = []
        pending = self._pending
        while pending and pending[0].t <= now - self.late:
            p = pending.popleft()
            self._forget(p)
            lost = not p.seen
            exits = self._judgeable(p) if lost else None
            if lost and exits is None:
                self.unjudged += 1
                continue
            self.seen_total += not lost
            self.lost_total += lost
            judged = self._judged.setdefault(p.ingress, deque())
            judged.append((p.t, lost, p.area))
            while judged and judged[0][0] < p.t - OTHERS_KEPT:
                judged.popleft()
            if lost and self.replay is not None:
                self._replay(p, now)
            area = self._areas.setdefault((p.ingress, p.area), _Area())
            area.recent.append((p.t, lost))
            n_lost = sum(x for _, x in area.recent)
            if area.alarmed:
                if n_lost <= 1:
                    area.alarmed = False
                    recovered.append((p.ingress, p.area))
                continue
            if not lost or n_lost < LOST:
                continue
            since = next(t for t, x in area.recent if x)
            others = [x for t, x, a in judged if t >= since and a != p.area]
            ok = len(others) - sum(others)
            rate = max(PROBE_LOSS, sum(others) / len(others)) if others else 1.0
            if ok >= OTHERS and binomial_tail(len(area.recent), n_lost, rate) <= TAIL:
                area.alarmed = True
                n = len(area.recent)
                alarms.append(
                    LossAlarm(p.ingress, p.area, p.header, exits, since, now, n_lost, n, ok)
                )
        return alarms, recovered

    def _replay(self, p: _Pending, now: float) -> None:
        """Send a lost probe's header again, within the replay budget."""
        k = (p.ingress, p.key)
        last = self._replayed.get(k)
        if last is not None and now - last < REPLAY_AGAIN_S:
            return
        times = self._replay_times.setdefault(p.ingress, deque())
        while times and times[0] <= now - 60.0:
            times.popleft()
        if len(times) >= REPLAYS_PER_MIN:
            return
        times.append(now)
        if len(self._replayed) > 10_000:  # forget what is past its REPLAY_AGAIN_S
            self._replayed = {x: t for x, t in self._replayed.items() if now - t < REPLAY_AGAIN_S}
        self._replayed[k] = now
        self.replays += 1
        self.replay(p.ingress, p.header, p.area, REPLAY_COPIES)

    def _judgeable(self, p: _Pending) -> list[Port] | None:
        """The exits of a probe not reported, if it counts as lost: the model delivers it to
        exits that report, and no update held its header back while it was on its way."""
        if self.held is not None and self.held(p.header, p.t):
            return None
        exits = self.delivers(p.ingress, p.header)
        return exits if exits and all(e in self.reporting for e in exits) else None

    def _forget(self, p: _Pending) -> None:
        same = self._by_key.get(p.key)
        if same is not None:
            same.remove(p)
            if not same:
                del self._by_key[p.key]

    def stats(self) -> dict[str, int]:
        return {
            "probe_loss_sent": self.sent_total,
            "probe_loss_reported": self.seen_total,
            "probe_loss_lost": self.lost_total,
            "probe_loss_unjudged": self.unjudged,
            "probe_loss_alarmed_areas": sum(a.alarmed for a in self._areas.values()),
            "probe_loss_replays": self.replays,
        }
