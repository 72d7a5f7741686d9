"""The findings table: durable, keyed by (kind, key), reopened and resolved like faults."""

import sqlite3

from tester.store import OPEN, RESOLVED, FaultStore


def test_open_bump_resolve_reopen(tmp_path):
    path = str(tmp_path / "f.db")
    st = FaultStore(path)
    fid, fresh = st.open_finding(
        "intent", "loop:1", "no_loops", "warning", "a loop", {"a": 1}, 10.0
    )
    assert fresh
    again, fresh2 = st.open_finding(
        "intent", "loop:1", "no_loops", "warning", "a loop", {"a": 2}, 11.0
    )
    assert (again, fresh2) == (fid, False)
    st.set_confirmation(fid, {"seen": True})
    st.close()

    # durable: another connection (what a restarted daemon opens) sees it committed
    db = sqlite3.connect(path)
    assert db.execute("SELECT state, last_seen FROM findings WHERE id=?", (fid,)).fetchone() == (
        OPEN,
        11.0,
    )
    db.close()

    st = FaultStore(path)
    row = st.finding(fid)
    assert row.detail == {"a": 2} and row.confirmation == {"seen": True}
    assert st.open_finding_keys("intent") == {"loop:1": fid}
    assert st.open_finding_keys("interference") == {}
    assert st.resolve_finding("intent", "loop:1", 12.0) == fid
    assert st.resolve_finding("intent", "loop:1", 13.0) is None
    assert st.finding(fid).state == RESOLVED and st.finding(fid).resolved_at == 12.0

    # found again: the same row reopens, and the old confirmation no longer applies
    fid3, fresh3 = st.open_finding("intent", "loop:1", "no_loops", "warning", "a loop", {}, 14.0)
    assert (fid3, fresh3) == (fid, True)
    assert st.finding(fid).confirmation is None and st.finding(fid).resolved_at is None


def test_kinds_and_states_filter():
    st = FaultStore(":memory:")
    a, _ = st.open_finding("intent", "k", "reach", "critical", "s", {}, 1.0)
    b, _ = st.open_finding("interference", "k", "shadowing", "warning", "s", {}, 1.0)
    st.resolve_finding("interference", "k", 2.0)
    assert [f.id for f in st.findings()] == [a, b]
    assert [f.id for f in st.findings(kind="intent")] == [a]
    assert [f.id for f in st.findings(state=RESOLVED)] == [b]
    assert st.findings(kind="agent") == []
    assert st.faults() == []  # faults and findings are separate tables
