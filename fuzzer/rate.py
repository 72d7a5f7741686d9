"""A token bucket for the probe budget (packets per second shared by all pairs)."""

from __future__ import annotations

import time
from collections.abc import Callable


class TokenBucket:
    """`rate` tokens per second, at most `burst` saved up; the clock is injectable for tests.

    take(n) grants min(n, available) tokens at once and returns how many; wait_time(n) says
    how long until n tokens are available. Over any interval of length T the tokens granted
    are at most burst + rate * T.
    """

    def __init__(
        self,
        rate: float = 1000.0,
        burst: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if rate <= 0:
            raise ValueError("rate must be positive")
        self.rate = float(rate)
        self.burst = float(burst if burst is not None else max(1.0, rate / 10))
        self.clock = clock
        self._tokens = self.burst
        self._t = clock()

    def _refill(self) -> None:
        now = self.clock()
        if now > self._t:
            self._tokens = min(self.burst, self._tokens + (now - self._t) * self.rate)
        self._t = max(self._t, now)

    def available(self) -> int:
        self._refill()
        return int(self._tokens)

    def take(self, n: int) -> int:
        self._refill()
        k = max(0, min(int(n), int(self._tokens)))
        self._tokens -= k
        return k

    def wait_time(self, n: int = 1) -> float:
        self._refill()
        need = min(float(n), self.burst) - self._tokens
        return max(0.0, need / self.rate)

    def set_rate(self, rate: float, burst: float | None = None) -> None:
        self._refill()
        self.rate = float(rate)
        self.burst = float(burst if burst is not None else max(1.0, rate / 10))
        self._tokens = min(self._tokens, self.burst)
