"""OpenFlow 1.3 FlowMod semantics on the proxy's intended entries (raw bytes, every field).

The cpc model sees only what it can represent; this table holds every entry the
controller installed, so that the audit can compare the whole switch table.
"""

from __future__ import annotations

from dataclasses import dataclass

import ofwire as of
from cpc.rules import Group
from ofwire.consts import OFPG_ANY, OFPP_ANY
from pazzd.proxy.store import Entry


@dataclass(frozen=True, slots=True)
class Writer:
    """Who made a change: the controller connection's name, the FlowMod (its command,
    cookie and mask, match) and the xid that connection gave it."""

    conn: str
    xid: int
    fm: of.RawFlowMod


@dataclass(slots=True)
class EntryChange:
    """A change of one intended entry: kind "add" (old: the entry it replaced, or None),
    "modify" (old: the entry before) or "delete" (entry: the entry deleted, old None)."""

    kind: str
    entry: Entry
    old: Entry | None = None
    by: Writer | None = None  # the FlowMod that made it (None: the proxy's own re-ID)


@dataclass(slots=True)
class GroupChange:
    """A group set (group: the model's Group) or deleted or not modelled (group None)."""

    group_id: int
    group: Group | None


Change = EntryChange | GroupChange


class IntendedTable:
    """The intended flow entries of one switch, keyed by (table, priority, canonical match)."""

    def __init__(self) -> None:
        self.entries: dict[tuple[int, int, bytes], Entry] = {}
        self._fields: dict[bytes, dict] = {}

    def fields(self, mkey: bytes) -> dict:
        f = self._fields.get(mkey)
        if f is None:
            # Matches of deletes and of entries long gone would pile up: a bounded cache.
            if len(self._fields) >= max(4096, 2 * len(self.entries)):
                self._fields.clear()
            f = self._fields[mkey] = of.match_fields(mkey)
        return f

    def select(self, fm: of.RawFlowMod, strict: bool) -> list[Entry]:
        """Entries a MODIFY or DELETE applies to (OpenFlow 1.3.1 section 6.4)."""
        if strict and fm.table == of.OFPTT_ALL:  # a DELETE_STRICT in every table
            cands = [
                e for e in self.entries.values() if (e.priority, e.mkey) == (fm.priority, fm.mkey)
            ]
        elif strict:
            e = self.entries.get((fm.table, fm.priority, fm.mkey))
            cands = [e] if e is not None else []
        else:
            want = self.fields(fm.mkey)
            cands = [
                e
                for e in self.entries.values()
                if (fm.table == of.OFPTT_ALL or e.table == fm.table)
                and (not want or of.within(self.fields(e.mkey), want))
            ]
        out = []
        deleting = fm.command in (of.FC_DELETE, of.FC_DELETE_STRICT)
        for e in cands:
            if (e.cookie ^ fm.cookie) & fm.cookie_mask:
                continue
            if deleting and (fm.out_port != OFPP_ANY or fm.out_group != OFPG_ANY):
                ports, groups = of.action_targets(e.instr)
                if fm.out_port != OFPP_ANY and fm.out_port not in ports:
                    continue
                if fm.out_group != OFPG_ANY and fm.out_group not in groups:
                    continue
            out.append(e)
        return out

    def apply(self, fm: of.RawFlowMod, rule_id: int, conn: str = "") -> list[EntryChange]:
        """Apply an accepted FlowMod that controller connection `conn` sent; returns the
        changes (instructions without the ID). An entry keeps the connection that added
        it, as it keeps its cookie."""
        changes: list[EntryChange] = []
        if fm.command == of.FC_ADD:
            e = Entry(
                fm.table,
                fm.priority,
                fm.mkey,
                fm.oxm,
                fm.cookie,
                fm.instr,
                rule_id,
                fm.flags,
                fm.idle,
                fm.hard,
                conn,
            )
            old = self.entries.get(e.key)
            self.entries[e.key] = e
            changes.append(EntryChange("add", e, old))
        elif fm.command in (of.FC_MODIFY, of.FC_MODIFY_STRICT):
            for old in self.select(fm, fm.command == of.FC_MODIFY_STRICT):
                new = Entry(
                    old.table,
                    old.priority,
                    old.mkey,
                    old.oxm,
                    old.cookie,
                    fm.instr,
                    rule_id,
                    fm.flags,
                    fm.idle,
                    fm.hard,
                    old.conn,
                )
                self.entries[old.key] = new
                changes.append(EntryChange("modify", new, old))
        else:
            for old in self.select(fm, fm.command == of.FC_DELETE_STRICT):
                del self.entries[old.key]
                changes.append(EntryChange("delete", old))
        return changes

    def remove(self, key) -> Entry | None:
        return self.entries.pop(key, None)
