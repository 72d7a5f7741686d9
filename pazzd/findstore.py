"""The findings store: pazzd's findings about the intended state (pazzd.records), in the
same SQLite file as the tester's fault store (tester.store), on a connection of its own.

The findings table was the fault store's migration 5; it is pazzd's now. Its schema
version is kept in a table of its own (`schema`, component "findings"), so that the two
stores migrate independently in one file. Opening a file the fault store had migrated to
version 5 takes its findings table over as it is (version 1 here). Rows are committed
before a caller reports them (WAL, as the fault store).
"""

from __future__ import annotations

import json
import threading
from typing import Any

from tester.store import OPEN, RESOLVED, connect

from .records import Finding, record_class

__all__ = ["FindingStore"]

COMPONENT = "findings"
_MIGRATIONS: list[str] = [
    # 1: the findings table (as the fault store's migration 5 made it)
    """
    CREATE TABLE IF NOT EXISTS findings (
        id INTEGER PRIMARY KEY,
        kind TEXT NOT NULL,
        key TEXT NOT NULL,
        name TEXT NOT NULL,
        severity TEXT NOT NULL,
        summary TEXT NOT NULL,
        detail TEXT NOT NULL,
        first_seen REAL NOT NULL,
        last_seen REAL NOT NULL,
        state TEXT NOT NULL,
        resolved_at REAL,
        confirmation TEXT,
        UNIQUE (kind, key)
    );
    CREATE INDEX IF NOT EXISTS findings_state ON findings (kind, state);
    """,
]
_COLS = (
    "id, kind, key, name, severity, summary, detail, first_seen, last_seen, state, resolved_at,"
    " confirmation"
)


def _record(r: tuple) -> Finding:
    fid, kind, key, name, sev, summary, detail, fs, ls, st, ra, conf = r
    det = json.loads(detail)
    return record_class(kind, det).from_json(
        {
            "id": fid,
            "kind": kind,
            "key": key,
            "name": name,
            "severity": sev,
            "summary": summary,
            "detail": det,
            "first_seen": fs,
            "last_seen": ls,
            "state": st,
            "resolved_at": ra,
            "confirmation": json.loads(conf) if conf else None,
        }
    )


class FindingStore:
    """Thread-safe (one connection, one lock); a path or ':memory:'."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._db = connect(path)
        self._migrate()

    @property
    def schema_version(self) -> int:
        r = self._db.execute("SELECT version FROM schema WHERE component=?", (COMPONENT,))
        row = r.fetchone()
        return row[0] if row else 0

    def _migrate(self) -> None:
        with self._lock:
            db = self._db
            db.execute("BEGIN IMMEDIATE")
            try:
                db.execute(
                    "CREATE TABLE IF NOT EXISTS schema (component TEXT PRIMARY KEY,"
                    " version INTEGER NOT NULL)"
                )
                have = self.schema_version
                for version, sql in enumerate(_MIGRATIONS, start=1):
                    if version <= have:
                        continue
                    for stmt in (s for s in sql.split(";") if s.strip()):
                        db.execute(stmt)
                    db.execute(
                        "INSERT INTO schema (component, version) VALUES (?, ?) ON CONFLICT"
                        " (component) DO UPDATE SET version=excluded.version",
                        (COMPONENT, version),
                    )
                db.execute("COMMIT")
            except Exception:
                if db.in_transaction:
                    db.execute("ROLLBACK")
                raise

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def open_finding(self, rec: Finding, now: float) -> tuple[int, bool]:
        """Insert, bump or reopen a finding (by its kind and key); (id, is_new_or_reopened).
        Committed on return, so a caller reports it only after it is durable."""
        det = json.dumps(rec.detail(), sort_keys=True)
        kind, key = rec.kind, rec.key
        with self._lock:
            db = self._db
            db.execute("BEGIN IMMEDIATE")
            try:
                row = db.execute(
                    "SELECT id, state FROM findings WHERE kind=? AND key=?", (kind, key)
                ).fetchone()
                if row is None:
                    cur = db.execute(
                        "INSERT INTO findings (kind, key, name, severity, summary, detail,"
                        " first_seen, last_seen, state) VALUES (?,?,?,?,?,?,?,?,?)",
                        (kind, key, rec.name, rec.severity, rec.summary, det, now, now, OPEN),
                    )
                    fid, fresh = cur.lastrowid, True
                else:
                    fid, state = row
                    fresh = state != OPEN
                    db.execute(
                        "UPDATE findings SET name=?, severity=?, summary=?, detail=?, last_seen=?,"
                        " state=?, resolved_at=NULL, confirmation=CASE WHEN ? THEN NULL"
                        " ELSE confirmation END WHERE id=?",
                        (rec.name, rec.severity, rec.summary, det, now, OPEN, int(fresh), fid),
                    )
                db.execute("COMMIT")
            except Exception:
                if db.in_transaction:
                    db.execute("ROLLBACK")
                raise
        return fid, fresh

    def resolve_finding(self, kind: str, key: str, now: float) -> int | None:
        """Resolve the open finding (kind, key); returns its id, or None if none was open."""
        with self._lock:
            row = self._db.execute(
                "SELECT id FROM findings WHERE kind=? AND key=? AND state=?", (kind, key, OPEN)
            ).fetchone()
            if row is None:
                return None
            self._db.execute(
                "UPDATE findings SET state=?, resolved_at=? WHERE id=?", (RESOLVED, now, row[0])
            )
            return row[0]

    def set_confirmation(self, finding_id: int, confirmation: Any) -> None:
        """What the data plane showed when the finding's probes went out."""
        with self._lock:
            self._db.execute(
                "UPDATE findings SET confirmation=? WHERE id=?",
                (json.dumps(confirmation, sort_keys=True), finding_id),
            )

    def finding(self, finding_id: int) -> Finding | None:
        with self._lock:
            r = self._db.execute(f"SELECT {_COLS} FROM findings WHERE id=?", (finding_id,))
            row = r.fetchone()
        return _record(row) if row else None

    def findings(self, kind: str | None = None, state: str | None = None) -> list[Finding]:
        where, args = [], []
        if kind is not None:
            where.append("kind=?")
            args.append(kind)
        if state is not None:
            where.append("state=?")
            args.append(state)
        sql = f"SELECT {_COLS} FROM findings"
        if where:
            sql += " WHERE " + " AND ".join(where)
        with self._lock:
            rs = self._db.execute(sql + " ORDER BY id", args).fetchall()
        return [_record(r) for r in rs]

    def open_finding_keys(self, kind: str) -> dict[str, int]:
        """key -> id of the open findings of a kind: what a check compares against after a
        restart."""
        with self._lock:
            return dict(
                self._db.execute(
                    "SELECT key, id FROM findings WHERE kind=? AND state=?", (kind, OPEN)
                ).fetchall()
            )
