"""The model feed: the proxy's committed changes of the intended tables, applied to the cpc
model in batches (one re-walk per batch)."""

from __future__ import annotations

import contextlib
import logging
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass

import ofwire as of
from cpc import agents
from cpc.interference import connection_source
from cpc.rules import OFPFF_CHECK_OVERLAP, FlowMod, ModelError
from pazzd.proxy.store import Entry
from pazzd.proxy.table import Change, GroupChange

log = logging.getLogger("pazzd.proxy")

FULL64 = (1 << 64) - 1


@dataclass(frozen=True, slots=True)
class Batch:
    """A committed batch of one switch's changes: the cause of the model updates it makes
    (Update.cause). xids: the controllers' xids of its FlowMods."""

    dpid: int
    changes: tuple[Change, ...]
    xids: tuple[int, ...]


class ModelFeed:
    """Applies changes to `model` (None: nothing to feed); warns of entries whose effect
    differs between OpenFlow agents through log_limited(key, level, fmt, *args, every=)."""

    def __init__(self, model=None, log_limited: Callable[..., None] | None = None) -> None:
        self.model = model
        self.log_limited = log_limited
        self.agent_warnings = 0  # entries whose effect differs between agents (cpc.agents)
        # on_model_update(seconds): the time one batch of changes took to apply to the model.
        self.on_model_update: Callable[[float], None] | None = None
        self._instr_cache: dict[bytes, tuple | str] = {}  # instr -> result or error

    def load(self, flows: dict, groups: dict, path) -> None:
        """Load persisted entries and groups ({dpid: {key: Entry}}, {dpid: {gid: (type,
        buckets)}}) into the model at once."""
        if self.model is None or not (flows or groups):
            return
        ents, grps = [], []
        for dpid, gs in groups.items():
            for gid, (gtype, buckets) in gs.items():
                with contextlib.suppress(ModelError, of.ProtocolError, struct.error):
                    if dpid in self.model.topo.switches:
                        grps.append(of.group_to_cpc(dpid, gtype, gid, buckets))
        for dpid, entries in flows.items():
            if dpid not in self.model.topo.switches:
                continue
            for e in entries.values():
                with contextlib.suppress(ModelError, of.ProtocolError, struct.error):
                    ents.append(cpc_entry(dpid, e))
        try:
            self.model.add_entries(ents, grps)
        except ModelError as e:
            log.warning("persisted rules do not load into the model as a whole (%s)", e)
        log.info("loaded %d intended entries and %d groups from %s", len(ents), len(grps), path)

    def instructions(self, instr: bytes):
        """of.cpc_instructions, memoized: controllers send the same few instruction lists
        over and over (the model's Instructions are immutable). Raises ModelError, also
        for instructions that do not parse (a set_field's OXM, say)."""
        r = self._instr_cache.get(instr)
        if r is None:
            try:
                r = of.cpc_instructions(instr)
            except ModelError as e:
                r = str(e)
            except (of.ProtocolError, struct.error, ValueError, IndexError) as e:
                r = f"instructions do not parse: {e}"
            if len(self._instr_cache) >= 4096:
                self._instr_cache.clear()
            self._instr_cache[instr] = r
        if isinstance(r, str):
            raise ModelError(r)
        return r

    def call(self, dpid, name, *args) -> None:
        if self.model is None or dpid not in self.model.topo.switches:
            return
        try:
            getattr(self.model, name)(*args)
        except ModelError as e:
            log.warning("dpid %#x: model %s: %s", dpid, name, e)

    def feed(self, dpid: int, changes: list[Change], xids: tuple = ()) -> None:
        """Apply accepted changes of the intended table to the model, one re-walk per batch."""
        if self.model is None or not changes or dpid not in self.model.topo.switches:
            return
        # The model's subscribers find the batch on the Update (Update.cause).
        with self.model.caused_by(Batch(dpid, tuple(changes), tuple(xids))):
            self._apply(dpid, changes)

    def _apply(self, dpid: int, changes: list[Change]) -> None:
        m = self.model
        batch: list[FlowMod] = []
        t0 = time.perf_counter()

        def flush() -> None:
            if batch:
                _, errors = m.apply_many(batch)
                for _fm, e in errors:
                    log.warning("dpid %#x: model rejects a change: %s", dpid, e)
                self.agent_lint(m, batch)
                batch.clear()

        for ch in changes:
            if isinstance(ch, GroupChange):  # keep the order: FlowMods before a GroupMod go first
                flush()
                try:
                    if ch.group is None:
                        m.delete_group(dpid, ch.group_id)
                    else:
                        m.set_group(ch.group)
                except ModelError as e:
                    log.warning("dpid %#x: model rejects a change: %s", dpid, e)
                continue
            kind, new, old = ch.kind, ch.entry, ch.old
            if kind in ("add", "modify"):
                try:
                    ins, rid = self.instructions(new.instr)
                    match = of.cpc_match(new.mkey)
                except (ModelError, of.ProtocolError) as e:
                    log.warning(
                        "dpid %#x: entry not modelled (%s): table=%d priority=%d",
                        dpid,
                        e,
                        new.table,
                        new.priority,
                    )
                    if old is not None:
                        batch.extend(delete_mod(dpid, old))
                    continue
                cmd = "add" if kind == "add" else "modify_strict"
                batch.append(
                    FlowMod(
                        cmd,
                        dpid,
                        new.table,
                        new.priority,
                        match,
                        ins,
                        cookie=new.cookie,
                        rule_id=new.rule_id or rid,
                        idle_timeout=new.idle,
                        hard_timeout=new.hard,
                        # the switch checked overlaps when it accepted the entry
                        flags=new.flags & ~OFPFF_CHECK_OVERLAP,
                        source=connection_source(new.conn),
                    )
                )
            else:
                batch.extend(delete_mod(dpid, new))
        flush()
        if self.on_model_update is not None:
            try:
                self.on_model_update(time.perf_counter() - t0)
            except Exception:
                log.exception("on_model_update callback failed")

    def agent_lint(self, m, fms: list[FlowMod]) -> None:
        """Warn of entries whose effect differs between OpenFlow agents (docs/agents.md)."""
        for fm in fms:
            if fm.command not in ("add", "modify_strict"):
                continue
            e = fm.entry()
            warns = [w.message for w in agents.lint_entry(e)]
            warns += [
                f"overlaps {o.match} at priority {o.priority} with other instructions: which "
                "one a packet matches is the switch's choice"
                for o in m.ties(e)[:1]
            ]
            for w in warns:
                self.agent_warnings += 1
                if self.log_limited is not None:
                    self.log_limited(
                        "agent-lint", logging.WARNING, "dpid %#x: %s: %s", fm.dpid, e, w, every=10.0
                    )


def cpc_entry(dpid: int, e: Entry):
    fe = of.raw_entry_to_cpc(
        dpid, e.table, e.priority, e.mkey, e.cookie, e.instr, e.rule_id, e.idle, e.hard, e.flags
    )
    fe.source = connection_source(e.conn)
    return fe


def delete_mod(dpid: int, e: Entry) -> list[FlowMod]:
    try:
        match = of.cpc_match(e.mkey)
    except (ModelError, of.ProtocolError):
        return []
    return [
        FlowMod(
            "delete_strict",
            dpid,
            e.table,
            e.priority,
            match,
            cookie=e.cookie,
            cookie_mask=FULL64,
        )
    ]
