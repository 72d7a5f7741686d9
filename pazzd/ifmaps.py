"""The sFlow ifIndex map as pazzd keeps it across reloads and OVSDB outages.

The map is the config's `sflow.interfaces` plus one part per switch OVSDB
(`switches[].ovsdb`, read for its `agent`). A part is replaced only by a good read: when
an OVSDB cannot be read (at start, on reload, or since), its switch keeps the part read
last and is *stale*; the daemon retries it with a bounded back-off (1, 2, 4 ... 60 s)
until a read succeeds. Without the old part, every report of that switch would go
unchecked (counted as unknown_interface) until the next reload.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from cpc.results import Port
from tester.ifmap import IfMap, OvsdbError

from .config import Config

__all__ = ["InterfaceMaps", "RETRY_MAX", "RETRY_MIN"]

log = logging.getLogger("pazzd")

RETRY_MIN = 1.0  # seconds to the first retry of an OVSDB that could not be read
RETRY_MAX = 60.0  # the back-off doubles up to this

Source = tuple[str, str]  # (ovsdb, agent)
Read = Callable[[str], tuple[dict[int, Port], dict[Port, str]]]


@dataclass
class _Part:
    switches: tuple[str, ...]  # the switches[] entries that read this OVSDB for this agent
    mapping: dict[int, Port] | None = None  # the last good read; None: never read
    probe: dict[Port, str] = field(default_factory=dict)
    read_at: float | None = None  # wall time of the last good read
    error: str | None = None  # why the latest read failed; None: the part is current
    failed_since: float | None = None  # wall time of the first failure since a good read
    attempts: int = 0  # failed reads since the last good one
    next_try: float = 0.0  # monotonic time of the next retry


class InterfaceMaps:
    """read(ovsdb) -> (ifindex -> port, port -> verify-probe), raising OvsdbError. Not
    thread-safe: the daemon calls refresh() from one thread at a time (its reload lock)."""

    def __init__(self, read: Read) -> None:
        self.read = read
        self.parts: dict[Source, _Part] = {}

    @staticmethod
    def sources(cfg: Config) -> dict[Source, tuple[str, ...]]:
        out: dict[Source, list[str]] = {}
        for sw in cfg.switches:
            if sw.ovsdb:
                name = cfg.topology.switches[sw.dpid].name
                out.setdefault((sw.ovsdb, sw.agent or "0.0.0.0"), []).append(name)
        return {k: tuple(v) for k, v in out.items()}

    def refresh(self, cfg: Config, only_due: bool = False) -> list[str]:
        """Read the OVSDBs of cfg (blocking: run it in a thread). only_due: only the stale
        ones whose retry is due. Returns a warning per switch whose map is stale after it;
        an OVSDB no longer in cfg is forgotten."""
        now = time.monotonic()
        wanted = self.sources(cfg)
        for src in list(self.parts):
            if src not in wanted:
                del self.parts[src]
        todo = []
        for src, names in wanted.items():
            part = self.parts.setdefault(src, _Part(names))
            part.switches = names
            if not (only_due and (part.error is None or part.next_try > now)):
                todo.append(src)
        # All at once, a thread each: N OVSDBs that do not answer cost one timeout, not N.
        if todo:
            with ThreadPoolExecutor(min(len(todo), 32), thread_name_prefix="pazzd-ovsdb") as ex:
                results = list(ex.map(self._fetch, todo))
            for src, got in zip(todo, results, strict=True):  # applied in the config's order
                self._apply(src, self.parts[src], got)
        return self.warnings()

    def _fetch(self, src: Source):
        try:
            return self.read(src[0])
        except OvsdbError as e:
            return e

    def _apply(self, src: Source, part: _Part, got) -> None:
        db, agent = src
        if isinstance(got, OvsdbError):
            e = got
            part.error = str(e)
            part.attempts += 1
            part.failed_since = part.failed_since or time.time()
            delay = min(RETRY_MAX, RETRY_MIN * 2 ** min(part.attempts - 1, 16))
            part.next_try = time.monotonic() + delay
            kept = (
                f"keeping the map read {time.time() - part.read_at:.0f} s ago "
                f"({len(part.mapping)} interfaces)"
                if part.mapping is not None
                else "no map yet: its reports go unchecked"
            )
            log.warning(
                "sFlow ifIndex map of switch %s not refreshed: OVSDB %s (agent %s): %s; %s; "
                "retry %d in %.0f s",
                ",".join(part.switches),
                db,
                agent,
                e,
                kept,
                part.attempts,
                delay,
            )
            return
        mapping, probe = got
        if part.error is not None:
            log.warning(
                "sFlow ifIndex map of switch %s refreshed from OVSDB %s after %d failed "
                "reads: %d interfaces",
                ",".join(part.switches),
                db,
                part.attempts,
                len(mapping),
            )
        else:
            log.info("sFlow ifIndex map: %d interfaces from %s (agent %s)", len(mapping), db, agent)
        part.mapping, part.probe, part.read_at = mapping, probe, time.time()
        part.error, part.failed_since, part.attempts = None, None, 0

    def build(self, cfg: Config) -> IfMap:
        """The map in force: cfg's sflow.interfaces, then every OVSDB's last good read."""
        m = IfMap.from_config(cfg.sflow.interfaces)
        for (_db, agent), part in self.parts.items():
            if part.mapping is not None:
                m.add_ovsdb(agent, part.mapping, part.probe)
        return m

    def due(self) -> bool:
        """Is a stale OVSDB's retry due?"""
        now = time.monotonic()
        return any(p.error is not None and p.next_try <= now for p in self.parts.values())

    def stale(self) -> list[dict]:
        """The stale OVSDBs, for status."""
        now, mono = time.time(), time.monotonic()
        return [
            {
                "switches": list(p.switches),
                "ovsdb": db,
                "agent": agent,
                "error": p.error,
                "failed_for_s": round(now - (p.failed_since or now), 1),
                "attempts": p.attempts,
                "map_age_s": None if p.read_at is None else round(now - p.read_at, 1),
                "interfaces": 0 if p.mapping is None else len(p.mapping),
                "next_retry_s": round(max(0.0, p.next_try - mono), 1),
            }
            for (db, agent), p in self.parts.items()
            if p.error is not None
        ]

    def stale_switches(self) -> dict[str, bool]:
        """Every switch with an OVSDB: is its map stale?"""
        return {n: p.error is not None for p in self.parts.values() for n in p.switches}

    def warnings(self) -> list[str]:
        out = []
        for (db, _agent), p in self.parts.items():
            if p.error is None:
                continue
            kept = (
                f"keeping the map read {time.time() - p.read_at:.0f} s ago"
                if p.read_at is not None
                else "no map yet, its reports go unchecked"
            )
            out.append(
                f"switch {','.join(p.switches)}: sFlow ifIndex map not refreshed, OVSDB {db}: "
                f"{p.error}; {kept}; retrying"
            )
        return out
