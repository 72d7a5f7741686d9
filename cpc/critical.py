"""A critical flow: traffic the operator names in pazzd's config (`critical_flows`). The
tester alarms when its reports stop (tester.timers.BlackholeMonitor); the fuzzer probes it
from its ingress every `period_s` (fuzzer.engine.Fuzzer.set_critical)."""

from __future__ import annotations

from dataclasses import dataclass

from .results import Port

__all__ = ["CriticalFlow"]


@dataclass(frozen=True)
class CriticalFlow:
    name: str
    ingress: Port
    egress: Port | None
    match: dict  # exact header fields (cpc.fields names) that identify the flow at ingress
    timeout: float = 30.0  # T_cfg: the least time without reports before an alarm
    header: dict | None = None  # the full header as it enters at ingress (model lookups)
    grace: float | None = None  # no alarm before armed + grace; None: the monitor's grace
    expect_traffic: bool = False  # alarm even if the flow was never seen
    period_s: float = 1.0  # the fuzzer probes it this often (0: never)

    def matches(self, header: dict) -> bool:
        return all(header.get(k) == v for k, v in self.match.items())
