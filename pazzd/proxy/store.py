"""The intended rule state and the rule IDs, persisted in SQLite (WAL).

Rows are written in one transaction per batch (`flush()`), which the proxy calls after each
burst of messages; IDs are written in the same batch as the FlowMod that first used them,
before the proxy's barrier for it goes out, and freed when their key is neither intended
nor in flight any more (a rejected ADD, a delete, a timeout).
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path

SCHEMA = """
CREATE TABLE IF NOT EXISTS ids (
    dpid INTEGER, tbl INTEGER, priority INTEGER, mkey BLOB, rule_id INTEGER,
    PRIMARY KEY (dpid, tbl, priority, mkey));
CREATE UNIQUE INDEX IF NOT EXISTS ids_by_id ON ids (rule_id);
CREATE TABLE IF NOT EXISTS flows (
    dpid INTEGER, tbl INTEGER, priority INTEGER, mkey BLOB, oxm BLOB, cookie INTEGER,
    instr BLOB, rule_id INTEGER, flags INTEGER, idle INTEGER, hard INTEGER,
    PRIMARY KEY (dpid, tbl, priority, mkey));
CREATE TABLE IF NOT EXISTS groups (
    dpid INTEGER, group_id INTEGER, type INTEGER, buckets BLOB,
    PRIMARY KEY (dpid, group_id));
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value INTEGER);
"""
# Columns added since: (table, column, definition), added to an older database at open.
ADDED = (("flows", "conn", "TEXT NOT NULL DEFAULT ''"),)


def _s64(v: int) -> int:
    return v - (1 << 64) if v >= 1 << 63 else v


def _u64(v: int) -> int:
    return v + (1 << 64) if v < 0 else v


@dataclass(slots=True)
class Entry:
    """One intended flow entry: the controller's own bytes plus the proxy's rule ID."""

    table: int
    priority: int
    mkey: bytes  # canonical match (ofwire.canonical_match)
    oxm: bytes  # the match as the controller sent it
    cookie: int
    instr: bytes  # instructions as the controller sent them (without the ID action)
    rule_id: int
    flags: int = 0
    idle: int = 0
    hard: int = 0
    conn: str = ""  # the controller connection that added it (its name)

    @property
    def key(self) -> tuple[int, int, bytes]:
        return (self.table, self.priority, self.mkey)


class Store:
    def __init__(self, path: str | Path | None = None) -> None:
        self.path = str(path) if path else ":memory:"
        self.db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        if self.path != ":memory:":
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA synchronous=NORMAL")
        self.db.executescript(SCHEMA)
        for tbl, col, definition in ADDED:
            have = {r[1] for r in self.db.execute(f"PRAGMA table_info({tbl})")}
            if col not in have:
                self.db.execute(f"ALTER TABLE {tbl} ADD COLUMN {col} {definition}")
        self._ids: dict[tuple[int, int, int, bytes], int] = {}
        self._used: set[int] = set()
        for dpid, tbl, prio, mkey, rid in self.db.execute("SELECT * FROM ids"):
            self._ids[(_u64(dpid), tbl, prio, bytes(mkey))] = rid
            self._used.add(rid)
        row = self.db.execute("SELECT value FROM meta WHERE key='next_id'").fetchone()
        self._next = row[0] if row else 1
        self._pending_ids: list[tuple] = []
        self._pending: dict[tuple, tuple | None] = {}  # (dpid, tbl, prio, mkey) -> row|None
        self._pending_groups: dict[tuple[int, int], tuple | None] = {}

    # --- IDs ---------------------------------------------------------------------------------
    def rule_id(self, dpid: int, table: int, priority: int, mkey: bytes) -> int:
        """The rule ID of (dpid, table, priority, match), allocated on first use."""
        k = (dpid, table, priority, mkey)
        rid = self._ids.get(k)
        if rid is None:
            rid = self._next
            while rid in self._used or rid == 0:
                rid = (rid + 1) & 0xFFFFFFFF
            self._next = (rid + 1) & 0xFFFFFFFF or 1
            self._ids[k] = rid
            self._used.add(rid)
            self._pending_ids.append(("put", (_s64(dpid), table, priority, mkey, rid)))
        return rid

    def free_id(self, dpid: int, table: int, priority: int, mkey: bytes) -> bool:
        """Forget the ID of a key that is no longer intended (and not in flight). IDs are
        handed out in increasing order, so a freed one comes back only after 2^32 others."""
        k = (dpid, table, priority, mkey)
        rid = self._ids.pop(k, None)
        if rid is None:
            return False
        self._used.discard(rid)
        self._pending_ids.append(("del", (_s64(dpid), table, priority, mkey)))
        return True

    @property
    def id_count(self) -> int:
        return len(self._ids)

    def known_id(self, dpid: int, table: int, priority: int, mkey: bytes) -> int | None:
        return self._ids.get((dpid, table, priority, mkey))

    # --- flows and groups --------------------------------------------------------------------
    def put(self, dpid: int, e: Entry) -> None:
        self._pending[(dpid, e.table, e.priority, e.mkey)] = (
            _s64(dpid),
            e.table,
            e.priority,
            e.mkey,
            e.oxm,
            _s64(e.cookie),
            e.instr,
            e.rule_id,
            e.flags,
            e.idle,
            e.hard,
            e.conn,
        )

    def delete(self, dpid: int, key: tuple[int, int, bytes]) -> None:
        self._pending[(dpid, *key)] = None

    def put_group(self, dpid: int, gid: int, gtype: int, buckets: bytes) -> None:
        self._pending_groups[(dpid, gid)] = (_s64(dpid), gid, gtype, buckets)

    def delete_group(self, dpid: int, gid: int) -> None:
        self._pending_groups[(dpid, gid)] = None

    def flush(self) -> None:
        if not (self._pending_ids or self._pending or self._pending_groups):
            return
        db = self.db
        db.execute("BEGIN")
        try:
            if self._pending_ids:
                for op, row in self._pending_ids:  # in order: a key may come and go
                    if op == "put":
                        db.execute("INSERT OR REPLACE INTO ids VALUES (?,?,?,?,?)", row)
                    else:
                        db.execute(
                            "DELETE FROM ids WHERE dpid=? AND tbl=? AND priority=? AND mkey=?", row
                        )
                db.execute("INSERT OR REPLACE INTO meta VALUES ('next_id', ?)", (self._next,))
            puts = [r for r in self._pending.values() if r is not None]
            dels = [(_s64(k[0]), k[1], k[2], k[3]) for k, r in self._pending.items() if r is None]
            if dels:
                db.executemany(
                    "DELETE FROM flows WHERE dpid=? AND tbl=? AND priority=? AND mkey=?", dels
                )
            if puts:
                db.executemany(
                    "INSERT OR REPLACE INTO flows VALUES (?,?,?,?,?,?,?,?,?,?,?,?)", puts
                )
            for (dpid, gid), r in self._pending_groups.items():
                if r is None:
                    db.execute("DELETE FROM groups WHERE dpid=? AND group_id=?", (_s64(dpid), gid))
                else:
                    db.execute("INSERT OR REPLACE INTO groups VALUES (?,?,?,?)", r)
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        self._pending_ids.clear()
        self._pending.clear()
        self._pending_groups.clear()

    def load(self) -> tuple[dict[int, dict], dict[int, dict]]:
        """({dpid: {key: Entry}}, {dpid: {group_id: (type, buckets)}}) as persisted."""
        flows: dict[int, dict] = {}
        for r in self.db.execute("SELECT * FROM flows"):
            dpid, tbl, prio, mkey, oxm, cookie, instr, rid, flags, idle, hard, conn = r
            e = Entry(
                tbl,
                prio,
                bytes(mkey),
                bytes(oxm),
                _u64(cookie),
                bytes(instr),
                rid,
                flags,
                idle,
                hard,
                conn,
            )
            flows.setdefault(_u64(dpid), {})[e.key] = e
        groups: dict[int, dict] = {}
        for dpid, gid, gtype, buckets in self.db.execute("SELECT * FROM groups"):
            groups.setdefault(_u64(dpid), {})[gid] = (gtype, bytes(buckets))
        return flows, groups

    def close(self) -> None:
        """Idempotent: a bounded shutdown may close it twice."""
        if getattr(self, "_closed", False):
            return
        self._closed = True
        self.flush()
        self.db.close()
