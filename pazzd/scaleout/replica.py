"""A worker's copy of the primary's model, kept by the journal (pazzd.scaleout.journal).

`load` builds it from a snapshot; `apply` replays one committed update, at the primary's
time of it (the hold-back of reports, TransientGuard, counts from there, as on the
primary); `tick` moves `as_of`, the latest time up to which the copy is known to be the
primary's model. Samples newer than `as_of` wait (pazzd.scaleout.worker): a replica
that lags defers, it never judges against an older model.
"""

from __future__ import annotations

import copy
import time

from cpc import ofctl
from cpc.model import Model
from cpc.rules import FlowMod, ModelError
from cpc.selecthash import group_bucket
from tester.ifmap import IfMap
from tester.timers import TransientGuard

__all__ = ["Replica", "ReplicaError"]

FULL64 = (1 << 64) - 1


class ReplicaError(RuntimeError):
    """The primary's model cannot be copied here (another topology)."""


def _ifmap(entries) -> IfMap:
    m = IfMap()
    for e in entries:
        m.add(e.agent, e.if_index, (e.dpid, e.port), sub_agent=e.sub_agent)
    return m


class Replica:
    def __init__(
        self,
        topology,
        fingerprint: str,
        select_hash: bool = True,
        host_macs: dict | None = None,
        settle: float = 2.0,
    ) -> None:
        self.topology = topology
        self.fingerprint = fingerprint
        self.select_hash = select_hash
        self.host_macs = host_macs or {}
        self.settle = settle
        self.model: Model | None = None
        self.guard: TransientGuard | None = None
        self.ifmap = IfMap()
        self.epoch = ""
        self.version = -1
        self.as_of = 0.0  # the copy is the primary's model up to this (wall) time
        self.stale = False  # a record is missing: wait for the next snapshot
        self.loads = 0
        self.applied = 0
        self.primary_version = -1  # the latest version a tick named

    def load(self, head, parts: list) -> None:
        """Build the copy from a snapshot's head and its parts (ModelRecords)."""
        if head.topology != self.fingerprint:
            raise ReplicaError(
                f"the primary's topology (fingerprint {head.topology}) is not this worker's "
                f"({self.fingerprint}): run both with the same topology file"
            )
        topo = copy.deepcopy(self.topology)
        topo.down = set()
        entries, groups = [], []
        for rec in parts:
            for c in rec.changes:
                if c.kind == "add":
                    entries.append(ofctl.parse_flow(c.text, c.dpid).entry())
                elif c.kind == "group":
                    groups.append(ofctl.parse_group(c.text, c.dpid))
                elif c.kind == "port_down":
                    topo.down.add((c.dpid, c.number))
        model = Model(topo)
        if self.select_hash:
            model.select = group_bucket
        model.set_host_macs(self.host_macs)
        model.add_entries(entries, groups)
        self.model = model
        self.guard = TransientGuard(settle=self.settle, clock=time.time)
        self.ifmap = _ifmap(head.ifmap)
        self.epoch, self.version = head.epoch, head.version
        self.as_of = head.time
        self.stale = False
        self.loads += 1

    def needs_snapshot(self, epoch: str) -> bool:
        return self.model is None or self.stale or epoch != self.epoch

    def apply(self, rec) -> bool:
        """Replay one committed update; False when it cannot be (another epoch, a gap:
        the copy waits for a snapshot)."""
        if self.model is None or rec.epoch != self.epoch:
            return False
        if rec.version <= self.version:
            return True  # in the snapshot already
        if rec.version != self.version + 1:
            self.stale = True
            return False
        m, fms = self.model, []

        def flush() -> None:
            if fms:
                upd, _errors = m.apply_many(fms)
                self.guard.on_model_update(upd, now=rec.time)
                fms.clear()

        for c in rec.changes:
            try:
                if c.kind == "add":
                    fm = ofctl.parse_flow(c.text, c.dpid)
                    fms.append(fm)
                elif c.kind == "remove":
                    e = ofctl.parse_flow(c.text, c.dpid)
                    fms.append(
                        FlowMod(
                            "delete_strict",
                            c.dpid,
                            e.table,
                            e.priority,
                            e.match,
                            cookie=e.cookie,
                            cookie_mask=FULL64,
                        )
                    )
                else:
                    flush()
                    if c.kind == "group":
                        upd = m.set_group(ofctl.parse_group(c.text, c.dpid))
                    elif c.kind == "ungroup":
                        upd = m.delete_group(c.dpid, c.number)
                    else:
                        upd = m.port_status(c.dpid, c.number, c.kind == "port_up")
                    self.guard.on_model_update(upd, now=rec.time)
            except ModelError:
                self.stale = True  # the copy would differ from here on
                return False
        flush()
        if rec.has_ifmap:
            self.ifmap = _ifmap(rec.ifmap)
        self.version = rec.version
        self.as_of = max(self.as_of, rec.time)
        self.applied += 1
        return True

    def tick(self, t) -> None:
        """The primary was at version t.version at time t.time."""
        if t.epoch != self.epoch:
            return
        self.primary_version = max(self.primary_version, t.version)
        if self.version >= t.version:
            self.as_of = max(self.as_of, t.time)

    def lag(self, now: float) -> float:
        return max(0.0, now - self.as_of) if self.model is not None else float("inf")
