"""The fault store: one SQLite file in WAL mode, one row per distinct fault.

A fault is keyed by (kind, location, header class). Each new sample of it bumps
`count` and `last_seen` and replaces the evidence; its header joins the few distinct
headers kept for localization (`headers`: the first and the latest, HEADERS_MAX in all).
Rows are written and committed before anything is reported (callers report after
`record()` returns).
Schema changes are migrations keyed on PRAGMA user_version.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from dataclasses import dataclass
from typing import Any

__all__ = ["FaultStore", "FaultRow", "OPEN", "RESOLVED", "connect"]

OPEN = "open"
RESOLVED = "resolved"

_MIGRATIONS: list[str] = [
    # 1: the faults table
    """
    CREATE TABLE faults (
        id INTEGER PRIMARY KEY,
        kind TEXT NOT NULL,
        location TEXT NOT NULL,
        header_class TEXT NOT NULL,
        first_seen REAL NOT NULL,
        last_seen REAL NOT NULL,
        count INTEGER NOT NULL,
        evidence TEXT NOT NULL,
        header TEXT NOT NULL,
        egress TEXT NOT NULL,
        expected TEXT NOT NULL,
        actual TEXT NOT NULL,
        localization TEXT NOT NULL,
        state TEXT NOT NULL,
        resolved_at REAL,
        UNIQUE (kind, location, header_class)
    );
    CREATE INDEX faults_state ON faults (state);
    """,
    # 2: the answers of flow-table polling, and how often a fault was reopened
    """
    ALTER TABLE faults ADD COLUMN polled TEXT;
    ALTER TABLE faults ADD COLUMN reopened INTEGER NOT NULL DEFAULT 0;
    """,
    # 3: what the proxy's audit sees of the fault's entry (pazzd/audit.py)
    """
    ALTER TABLE faults ADD COLUMN audit TEXT;
    """,
    # 4: a few distinct headers of the fault, for localization (NULL: only `header`)
    """
    ALTER TABLE faults ADD COLUMN headers TEXT;
    """,
    # 5: (the findings table of pazzd, which now keeps it itself: pazzd/findstore.py; the
    # version stays taken so that files already at 5 migrate the same way as new ones)
    """
    SELECT 1;
    """,
]
HEADERS_MAX = 8  # distinct headers kept per fault: the first one and the latest others


@dataclass(frozen=True, slots=True)
class FaultRow:
    id: int
    kind: str
    location: str
    header_class: str
    first_seen: float
    last_seen: float
    count: int
    evidence: str
    header: dict
    egress: tuple | None
    expected: Any
    actual: Any
    localization: Any
    state: str
    resolved_at: float | None
    polled: Any
    reopened: int
    audit: Any = None
    headers: list | None = None  # distinct headers seen, oldest first (None: before v4)


_COLS = (
    "id, kind, location, header_class, first_seen, last_seen, count, evidence, header, egress, "
    "expected, actual, localization, state, resolved_at, polled, reopened, audit, headers"
)


def _row(r: tuple) -> FaultRow:
    (fid, kind, loc, hc, fs, ls, cnt, ev, hdr, eg, exp, act, locz, st, ra, polled, reo, aud, hs) = r
    return FaultRow(
        fid,
        kind,
        loc,
        hc,
        fs,
        ls,
        cnt,
        ev,
        json.loads(hdr),
        tuple(json.loads(eg)) if json.loads(eg) is not None else None,
        json.loads(exp),
        json.loads(act),
        json.loads(locz),
        st,
        ra,
        json.loads(polled) if polled else None,
        reo,
        json.loads(aud) if aud else None,
        json.loads(hs) if hs else None,
    )


def _with_header(headers_json: str | None, header: dict) -> str:
    """The kept headers plus this one if new: distinct, at most HEADERS_MAX, in the order
    first seen. The first header stays (the fault as it opened), the rest are the latest."""
    hs = json.loads(headers_json) if headers_json else []
    if header not in hs:
        hs.append(header)
        if len(hs) > HEADERS_MAX:
            del hs[1]
    return json.dumps(hs, sort_keys=True)


def connect(path: str) -> sqlite3.Connection:
    """A connection as every store of the file keeps one: WAL, autocommit (transactions
    are explicit), waiting up to 5 s for another writer."""
    db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    db.execute("PRAGMA busy_timeout=5000")
    return db


class FaultStore:
    """Thread-safe (one connection, one lock); open with a path or ':memory:'."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._db = connect(path)
        self._migrate()

    @property
    def schema_version(self) -> int:
        return self._db.execute("PRAGMA user_version").fetchone()[0]

    def _migrate(self) -> None:
        with self._lock:
            have = self.schema_version
            for version, sql in enumerate(_MIGRATIONS, start=1):
                if version <= have:
                    continue
                try:
                    self._db.executescript(
                        f"BEGIN IMMEDIATE;{sql};PRAGMA user_version={version};COMMIT;"
                    )
                except Exception:
                    if self._db.in_transaction:
                        self._db.execute("ROLLBACK")
                    raise

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def record(
        self,
        kind: str,
        location: str,
        header_class: str,
        now: float,
        evidence: bytes,
        header: dict,
        egress: tuple | None,
        expected: Any,
        actual: Any,
        localization: Any,
        audit: Any = None,
    ) -> tuple[int, bool]:
        """Insert or bump a fault; returns (id, is_new_or_reopened). Committed on return.
        audit: what the proxy's audit sees of the fault's entry (None: leave as it is)."""
        aud = json.dumps(audit) if audit is not None else None
        args_json = (
            json.dumps(header, sort_keys=True),
            json.dumps(list(egress) if egress is not None else None),
            json.dumps(expected),
            json.dumps(actual),
            json.dumps(localization),
        )
        with self._lock:
            db = self._db
            db.execute("BEGIN IMMEDIATE")
            try:
                row = db.execute(
                    "SELECT id, state, headers FROM faults"
                    " WHERE kind=? AND location=? AND header_class=?",
                    (kind, location, header_class),
                ).fetchone()
                if row is None:
                    cur = db.execute(
                        "INSERT INTO faults (kind, location, header_class, first_seen, last_seen, count,"
                        " evidence, header, egress, expected, actual, localization, state, headers,"
                        " audit) VALUES (?,?,?,?,?,1,?,?,?,?,?,?,?,?,?)",
                        (
                            kind,
                            location,
                            header_class,
                            now,
                            now,
                            evidence.hex(),
                            *args_json,
                            OPEN,
                            _with_header(None, header),
                            aud,
                        ),
                    )
                    fid, fresh = cur.lastrowid, True
                else:
                    fid, state, hs = row
                    fresh = state != OPEN
                    db.execute(
                        "UPDATE faults SET last_seen=?, count=count+1, evidence=?, header=?, egress=?,"
                        " expected=?, actual=?, localization=?, state=?, resolved_at=NULL,"
                        " reopened=reopened+?, headers=?, audit=COALESCE(?, audit) WHERE id=?",
                        (
                            now,
                            evidence.hex(),
                            *args_json,
                            OPEN,
                            int(fresh),
                            _with_header(hs, header),
                            aud,
                            fid,
                        ),
                    )
                db.execute("COMMIT")
            except Exception:
                if db.in_transaction:  # SQLITE_FULL has rolled it back already
                    db.execute("ROLLBACK")
                raise
        return fid, fresh

    def set_audit(self, fault_id: int, audit: Any) -> None:
        with self._lock:
            self._db.execute("UPDATE faults SET audit=? WHERE id=?", (json.dumps(audit), fault_id))

    def resolve(self, fault_id: int, now: float) -> bool:
        with self._lock:
            cur = self._db.execute(
                "UPDATE faults SET state=?, resolved_at=? WHERE id=? AND state=?",
                (RESOLVED, now, fault_id, OPEN),
            )
            return cur.rowcount == 1

    def set_polled(self, fault_id: int, answer: Any) -> None:
        with self._lock:
            self._db.execute(
                "UPDATE faults SET polled=? WHERE id=?", (json.dumps(answer), fault_id)
            )

    def get(self, fault_id: int) -> FaultRow | None:
        with self._lock:
            r = self._db.execute(f"SELECT {_COLS} FROM faults WHERE id=?", (fault_id,)).fetchone()
        return _row(r) if r else None

    def faults(
        self,
        state: str | None = None,
        since_id: int | None = None,
        changed_since: float | None = None,
    ) -> list[FaultRow]:
        """The faults by id; only those in `state`, with an id above since_id, or seen or
        resolved at changed_since or later (what a follower polls for)."""
        where, args = [], []
        if state is not None:
            where.append("state=?")
            args.append(state)
        if since_id is not None:
            where.append("id>?")
            args.append(since_id)
        if changed_since is not None:
            where.append("(last_seen>=? OR resolved_at>=?)")
            args += [changed_since, changed_since]
        cond = f" WHERE {' AND '.join(where)}" if where else ""
        with self._lock:
            rs = self._db.execute(f"SELECT {_COLS} FROM faults{cond} ORDER BY id", args).fetchall()
        return [_row(r) for r in rs]

    def open_by_class(self) -> dict[str, list[int]]:
        """Open fault ids per header class: what the tester watches for resolution."""
        out: dict[str, list[int]] = {}
        with self._lock:
            for fid, hc in self._db.execute(
                "SELECT id, header_class FROM faults WHERE state=?", (OPEN,)
            ):
                out.setdefault(hc, []).append(fid)
        return out
