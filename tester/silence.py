"""How long a critical flow may stay silent before its silence is improbable.

Pure functions and a small sample counter for tester.timers.BlackholeMonitor; the
derivation, with numbers, is in docs/tester.md ("Blackholes").

- `poisson_lower(n, a)` / `poisson_upper(n, a)`: one-sided confidence bounds on the mean
  of a Poisson count n (the exact Garwood bounds): the mean is below `poisson_lower` (or
  above `poisson_upper`) with probability at most a.
- `silence_threshold(lam, per_hour)`: the silence t after which a Poisson stream of rate
  lam has fewer than `per_hour` gaps longer than t per hour: 3600 lam e^(-lam t) = per_hour.
- `run_needed(p_in, p_out, events_per_hour, per_hour)`: how many ingress samples in a row,
  none of them followed by a report, are improbable enough.
- `Series`: sample counts by arrival time, batched, with counts over a window.
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from functools import lru_cache
from statistics import NormalDist

__all__ = ["Series", "poisson_lower", "poisson_upper", "run_needed", "silence_threshold"]

HOUR = 3600.0
_EXACT_UP_TO = 400  # counts above: Wilson-Hilferty (relative error < 1e-4 there)


def _at_least(n: int, mu: float) -> float:
    """P(Poisson(mu) >= n), n >= 1: the regularized lower incomplete gamma P(n, mu)."""
    if mu <= 0.0:
        return 0.0
    if mu > n + 1:  # the series converges slowly there: sum the complement's terms instead
        term = math.exp(-mu)
        s = term
        for k in range(1, n):
            term *= mu / k
            s += term
        return max(0.0, 1.0 - s)
    term = math.exp(n * math.log(mu) - mu - math.lgamma(n + 1))
    s = term
    k = 1
    while term > 1e-18 * s:
        term *= mu / (n + k)
        s += term
        k += 1
    return min(1.0, s)


def _wilson_hilferty(n: float, z: float) -> float:
    return n * (1.0 - 1.0 / (9.0 * n) + z / (3.0 * math.sqrt(n))) ** 3


@lru_cache(maxsize=4096)
def poisson_lower(n: int, a: float) -> float:
    """The mean mu with P(Poisson(mu) >= n) = a: below it with probability <= a."""
    if n <= 0:
        return 0.0
    if n > _EXACT_UP_TO:
        return _wilson_hilferty(n, NormalDist().inv_cdf(a))
    lo, hi = 0.0, n + 10.0 * math.sqrt(n) + 10.0
    for _ in range(80):
        mid = (lo + hi) / 2
        if _at_least(n, mid) > a:
            hi = mid
        else:
            lo = mid
    return lo  # the lower end of the bracket: never above the exact bound


@lru_cache(maxsize=4096)
def poisson_upper(n: int, a: float) -> float:
    """The mean mu with P(Poisson(mu) <= n) = a: above it with probability <= a."""
    if n + 1 > _EXACT_UP_TO:
        return _wilson_hilferty(n + 1, NormalDist().inv_cdf(1.0 - a))
    lo, hi = 0.0, n + 10.0 * math.sqrt(n + 1) + 20.0
    for _ in range(80):
        mid = (lo + hi) / 2
        if 1.0 - _at_least(n + 1, mid) > a:
            lo = mid
        else:
            hi = mid
    return hi


def silence_threshold(lam: float, per_hour: float) -> float:
    """t with 3600 lam e^(-lam t) = per_hour: the expected number of gaps longer than t,
    per hour, of a Poisson stream of rate lam (>= 1/t, so any faster stream has fewer)."""
    return max(math.log(HOUR * lam / per_hour), 1.0) / lam


def run_needed(p_in: float, p_out: float, events_per_hour: float, per_hour: float) -> int:
    """Ingress samples in a row without a report that a delivered flow shows at most
    `per_hour` times an hour, when `events_per_hour` reports arrive.

    Each packet is sampled at the ingress with probability p_in and at the egress with
    p_out, independently. Of the packets sampled anywhere, a share
    q = p_in (1 - p_out) / (p_in (1 - p_out) + p_out) is sampled at the ingress only.
    A run of m such packets starts after each report (and once at the start), so
    (events_per_hour + 1) q^m <= per_hour."""
    if p_out >= 1.0:
        return 1  # every delivered packet is reported: one unreported packet is proof
    q = p_in * (1.0 - p_out) / (p_in * (1.0 - p_out) + p_out)
    return max(1, math.ceil(math.log(per_hour / (events_per_hour + 1.0)) / math.log(q)))


class Series:
    """Counts of samples by arrival time. Arrivals closer than `merge` seconds form one
    batch (one sFlow flush); `count` and `window` work on batches."""

    def __init__(self, merge: float = 0.1) -> None:
        self.merge = merge
        self.times: list[float] = []  # batch arrival times (the latest sample of each)
        self.cum: list[int] = []  # samples up to and including each batch
        self.rate = 0  # the sampling rate N of the latest sample
        self._base = 0  # samples in pruned batches

    def __bool__(self) -> bool:
        return bool(self.times)

    def add(self, t: float, sampling_rate: int, n: int = 1) -> None:
        """n samples that arrived at t. One that arrived before the latest batch (relayed
        late by another reader) joins that batch."""
        self.rate = sampling_rate
        total = (self.cum[-1] if self.cum else self._base) + n
        if self.times and t - self.times[-1] <= self.merge:
            self.times[-1] = max(self.times[-1], t)
            self.cum[-1] = total
        else:
            self.times.append(t)
            self.cum.append(total)

    @property
    def first(self) -> float | None:
        return self.times[0] if self.times else None

    @property
    def last(self) -> float | None:
        return self.times[-1] if self.times else None

    def _before(self, i: int) -> int:
        return self.cum[i - 1] if i > 0 else self._base

    def count(self, lo: float, hi: float) -> int:
        """Samples of batches that arrived in (lo, hi]."""
        i, j = bisect_right(self.times, lo), bisect_right(self.times, hi)
        return self._before(j) - self._before(i) if j > i else 0

    def window(self, end: float, span: float) -> tuple[int, float]:
        """(samples, seconds) of the rate window that ends at the batch arriving at `end`,
        that batch left out: its arrival is what ends the window. A window reaching back
        to the first batch starts at that batch, which is left out as well."""
        j = bisect_left(self.times, end)
        start = end - span
        if not self.times or start <= self.times[0]:
            i, start = 1, self.times[0] if self.times else end
        else:
            i = bisect_left(self.times, start)
        n = self._before(j) - self._before(i) if j > i else 0
        return n, end - start

    def prune(self, before: float) -> None:
        """Forget batches that arrived before `before` (keep at least the latest)."""
        i = min(bisect_left(self.times, before), len(self.times) - 1)
        if i > 0:
            self._base = self.cum[i - 1]
            del self.times[:i], self.cum[:i]


# The share of a critical flow's probe reports (marked, reported 1 in 1) assumed lost on
# the way to the tester: UDP loss and the switch's probe-report rate limit. A bound, not a
# measurement: the probe rule's false-alarm rate scales with its `probe_run_needed`-th power.
PROBE_LOSS = 0.01


def probe_run_needed(period_s: float, per_hour: float, loss: float = PROBE_LOSS) -> int:
    """Probes in a row sent and not reported that alarm: a delivering flow probed every
    period_s shows such a run, each probe a possible start, at most (3600 / period_s) *
    loss**m times an hour; the least m with that <= per_hour."""
    starts = HOUR / period_s
    return max(1, math.ceil(math.log(per_hour / starts) / math.log(loss)))
