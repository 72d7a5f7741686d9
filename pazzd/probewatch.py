"""Probe a header and watch what the exits report of it: the core of every data-plane
confirmation (pazzd.confirm for intent findings, pazzd.entries for new entries).

`send` has the fuzzer send a header from an ingress in `copies` copies (a share of each
probe batch: fuzzer.engine) and registers a tester watch for it (tester.engine.watches):
every judged report of the header at an exit is kept on the returned Watch, with its
egress, tags, whether the model allows them, and its time. Several watches may share a
header's watch key (the fields a report is recognized by); each sees every report of it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from cpc.topology import Topology
from tester.engine import watch_key

__all__ = ["MAX_COPIES", "ProbeWatch", "Watch"]

MAX_COPIES = 2000
MAX_REPORTS = 32  # kept per watch


@dataclass
class Watch:
    ingress: tuple[int, int]
    header: dict
    key: tuple
    reports: list = field(default_factory=list)
    # on_report(watch, report): called after a report is kept (an early verdict)
    on_report: Callable | None = None


class ProbeWatch:
    """tester: its `watches`; fuzzer: `confirm()`; copies: per probe by default (3N for
    sFlow sampling 1/N: the header shows at an exit with probability about 95 %)."""

    def __init__(self, tester, fuzzer, topo: Topology, sampling_rate: int) -> None:
        self.tester = tester
        self.fuzzer = fuzzer
        self.topo = topo
        self.copies = min(MAX_COPIES, 3 * max(1, sampling_rate))
        self._by_key: dict[tuple, list[Watch]] = {}

    def watched(self) -> list[tuple]:
        """The watch keys in use: a new probe should differ from them (tester.WATCH_FIELDS)."""
        return list(self._by_key)

    def ingresses(self) -> list:
        """The ingresses the fuzzer sends from."""
        return self.fuzzer.ingresses

    def send(self, ingress, header: dict, copies: int | None = None, on_report=None):
        """Probe; the Watch, or None when the fuzzer does not send from that ingress."""
        w = Watch(ingress, dict(header), watch_key(header), on_report=on_report)
        self._by_key.setdefault(w.key, []).append(w)
        self.tester.watches[w.key] = self._report
        if not self.fuzzer.confirm(ingress, header, copies or self.copies):
            self.close(w)
            return None
        return w

    def close(self, w: Watch) -> None:
        """Stop watching (the fuzzer's remaining copies still go out)."""
        rest = [x for x in self._by_key.get(w.key, ()) if x is not w]
        if rest:
            self._by_key[w.key] = rest
        else:
            self._by_key.pop(w.key, None)
            self.tester.watches.pop(w.key, None)

    def _report(self, egress, hdr, vport, vrule, allowed, now) -> None:
        for w in list(self._by_key.get(watch_key(hdr), ())):
            if len(w.reports) >= MAX_REPORTS:
                continue
            r = {
                "egress": self.topo.port_name(egress),
                "verify_port": f"0x{vport:08x}",
                "verify_rule": f"0x{vrule:04x}",
                "allowed": allowed,
                "time": now,
            }
            w.reports.append(r)
            if w.on_report is not None:
                w.on_report(w, r)
