"""The findings store (pazzd.findstore): durable typed records, keyed by (kind, key),
reopened and resolved like faults; in the fault store's file, which it takes over from
files the fault store made (its migration 5)."""

from __future__ import annotations

import json
import sqlite3

from pazzd.findstore import FindingStore
from pazzd.records import (
    AgentFinding,
    IntentFinding,
    InterferenceFinding,
    OverwriteFinding,
    PacketInFinding,
    record_from_json,
)
from tester.store import OPEN, RESOLVED, FaultStore


def loop(**kw) -> IntentFinding:
    return IntentFinding(
        key="loop:1",
        name="no_loops",
        severity="warning",
        summary="a loop",
        policy="no_loops",
        check="loop_free",
        detail_text="s1 s2",
        **kw,
    )


def test_open_bump_resolve_reopen(tmp_path):
    path = str(tmp_path / "f.db")
    st = FindingStore(path)
    fid, fresh = st.open_finding(loop(classes=1), 10.0)
    assert fresh
    again, fresh2 = st.open_finding(loop(classes=2), 11.0)
    assert (again, fresh2) == (fid, False)
    st.set_confirmation(fid, {"verdict": "agrees"})
    st.close()

    # durable: another connection (what a restarted daemon opens) sees it committed
    db = sqlite3.connect(path)
    state, last, detail = db.execute(
        "SELECT state, last_seen, detail FROM findings WHERE id=?", (fid,)
    ).fetchone()
    db.close()
    assert (state, last) == (OPEN, 11.0)
    assert json.loads(detail)["classes"] == 2 and json.loads(detail)["detail"] == "s1 s2"

    st = FindingStore(path)
    rec = st.finding(fid)
    assert type(rec) is IntentFinding and rec.classes == 2 and rec.detail_text == "s1 s2"
    assert rec.confirmation == {"verdict": "agrees"}
    assert st.open_finding_keys("intent") == {"loop:1": fid}
    assert st.open_finding_keys("interference") == {}
    assert st.resolve_finding("intent", "loop:1", 12.0) == fid
    assert st.resolve_finding("intent", "loop:1", 13.0) is None
    assert st.finding(fid).state == RESOLVED and st.finding(fid).resolved_at == 12.0

    # found again: the same row reopens, and the old confirmation no longer applies
    fid3, fresh3 = st.open_finding(loop(), 14.0)
    assert (fid3, fresh3) == (fid, True)
    assert st.finding(fid).confirmation is None and st.finding(fid).resolved_at is None


def test_kinds_and_states_filter():
    st = FindingStore(":memory:")
    a, _ = st.open_finding(loop(), 1.0)
    b, _ = st.open_finding(InterferenceFinding(key="k", name="a,b", relation="shadowing"), 1.0)
    st.resolve_finding("interference", "k", 2.0)
    assert [f.id for f in st.findings()] == [a, b]
    assert [f.id for f in st.findings(kind="intent")] == [a]
    assert [f.id for f in st.findings(state=RESOLVED)] == [b]
    assert st.findings(kind="agent") == []


def test_a_file_the_fault_store_migrated_to_5_keeps_its_findings(tmp_path):
    """A database of an earlier pazzd: the findings table made by the fault store's
    migration 5, a finding in it. Both stores open it; the finding is read back typed."""
    path = str(tmp_path / "old.db")
    FaultStore(path).close()  # faults at version 5; the findings table as 5 made it:
    db = sqlite3.connect(path)
    db.executescript(
        """
        CREATE TABLE findings (
            id INTEGER PRIMARY KEY, kind TEXT NOT NULL, key TEXT NOT NULL, name TEXT NOT NULL,
            severity TEXT NOT NULL, summary TEXT NOT NULL, detail TEXT NOT NULL,
            first_seen REAL NOT NULL, last_seen REAL NOT NULL, state TEXT NOT NULL,
            resolved_at REAL, confirmation TEXT, UNIQUE (kind, key));
        CREATE INDEX findings_state ON findings (kind, state);
        """
    )
    detail = {"reason": "wider", "switch": "s1", "table": 0, "priority": 7, "probes": []}
    db.execute(
        "INSERT INTO findings VALUES (1, 'agent', 'k', 's1', 'critical', 'wide', ?, 1, 2,"
        " 'open', NULL, NULL)",
        (json.dumps(detail),),
    )
    db.commit()
    db.close()
    faults = FaultStore(path)  # the fault store at 5 already: nothing to do
    st = FindingStore(path)
    assert st.schema_version == 1
    (rec,) = st.findings()
    assert type(rec) is AgentFinding and (rec.reason, rec.priority) == ("wider", 7)
    assert faults.faults() == []  # faults and findings are separate tables
    # A new file: the fault store makes no findings table; this store does.
    new = str(tmp_path / "new.db")
    FaultStore(new)
    FindingStore(new).open_finding(loop(), 1.0)
    assert sqlite3.connect(new).execute("PRAGMA user_version").fetchone()[0] == 5


def test_records_round_trip_through_json():
    recs = [
        loop(via=["s2"], enforce=True, cause={"source": "start-up"}),
        loop(reply="tcp", reply_header={"tp_dst": 1}, reply_paths=[]),
        PacketInFinding(key="direct_paths|s1", name="direct_paths", check="direct_paths"),
        InterferenceFinding(key="k", name="a,b", relation="shadowing", extra={"severity": "x"}),
        OverwriteFinding(key="overwrite|1", name="a,b", writer="a", owner="b", count=3),
        AgentFinding(key="k", name="s1", reason="dropped", probes=[{"kind": "inside"}]),
    ]
    for r in recs:
        back = record_from_json(json.loads(json.dumps(r.to_json())))
        assert type(back) is type(r) and back == r, (r, back)
    # detail keys a record does not name are kept, not lost
    j = recs[0].to_json()
    j["detail"]["newer"] = 1
    assert record_from_json(j).to_json()["detail"]["newer"] == 1
    # optional keys are left out when absent, as the checks always stored them
    assert "reply" not in recs[0].to_json()["detail"]
