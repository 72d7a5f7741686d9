"""The controller connection of each intended entry survives a restart, and a database
written before entries had one opens with the column added."""

from __future__ import annotations

import sqlite3

from pazzd.proxy.store import Entry, Store

OLD_FLOWS = """CREATE TABLE flows (
    dpid INTEGER, tbl INTEGER, priority INTEGER, mkey BLOB, oxm BLOB, cookie INTEGER,
    instr BLOB, rule_id INTEGER, flags INTEGER, idle INTEGER, hard INTEGER,
    PRIMARY KEY (dpid, tbl, priority, mkey))"""


def test_connection_survives_a_restart_and_old_databases_open(tmp_path):
    path = tmp_path / "proxy.db"
    db = sqlite3.connect(path)
    db.execute(OLD_FLOWS)
    db.execute("INSERT INTO flows VALUES (1, 0, 10, x'01', x'02', 7, x'', 3, 0, 0, 0)")
    db.commit()
    db.close()
    s = Store(path)
    (old,) = s.load()[0][1].values()
    assert (old.priority, old.cookie, old.conn) == (10, 7, "")
    s.put(1, Entry(0, 20, b"\x03", b"\x04", 0, b"", 4, conn="lbctl"))
    s.close()
    flows = Store(path).load()[0][1]
    assert {(e.priority, e.conn) for e in flows.values()} == {(10, ""), (20, "lbctl")}
