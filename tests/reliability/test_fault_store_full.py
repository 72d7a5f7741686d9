"""With the fault store's disk full, faults wait in a bounded memory
queue and are recorded once it has room again; none is dropped without being counted."""

from __future__ import annotations

import sqlite3

import pytest

from tester.emit import ReferenceEmitter, synthetic_ifmap
from tester.engine import Tester
from tester.store import FaultStore
from tests.tester.tester_helpers import (
    ALL_PORTS,
    BAD,
    EGRESS,
    GOOD,
    HDR,
    FakeModel,
    expected,
)

N = 20


def _headers():
    return [{**HDR, "ipv4_dst": 0x0A000300 + i} for i in range(N)]


@pytest.fixture
def setup(tmp_path):
    hdrs = _headers()
    model = FakeModel({(EGRESS, h["ipv4_dst"]): [expected(GOOD)] for h in hdrs})
    store = FaultStore(str(tmp_path / "faults.db"))
    events = []
    t = Tester(model, store, synthetic_ifmap(ALL_PORTS), on_fault=events.append, resolve_after=1e9)
    yield t, store, events, hdrs
    store.close()


def _fault(t, header, now) -> None:
    em = ReferenceEmitter()
    em.add(EGRESS, header, *_tags(BAD))
    for d in em.flush():
        t.process_datagram(d, now)


def _tags(hops):
    from tests.tester.tester_helpers import tags_of

    return tags_of(hops)


def _fill_disk(store: FaultStore) -> None:
    """SQLite's own 'database or disk is full' (SQLITE_FULL): no page beyond this size."""
    db = store._db
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    pages = db.execute("PRAGMA page_count").fetchone()[0]
    db.execute(f"PRAGMA max_page_count={pages}")


def _free_disk(store: FaultStore) -> None:
    store._db.execute("PRAGMA max_page_count=1073741823")


def test_disk_full_faults_wait_and_are_recorded_later(setup):
    t, store, events, hdrs = setup
    for i in range(3):
        _fault(t, hdrs[i], 1.0)
    _fill_disk(store)
    for i in range(3, N):
        _fault(t, hdrs[i], 2.0 + i)
    recorded_while_full = len(store.faults())
    assert recorded_while_full < N, recorded_while_full  # the disk really was full
    assert t.stats.fault_store_errors > 0
    assert t.stats.faults_unrecorded == N - recorded_while_full
    t.tick(30.0)  # still full: nothing lost, nothing recorded twice
    assert len(store.faults()) == recorded_while_full
    _free_disk(store)
    t.tick(31.0)
    rows = store.faults()
    assert len(rows) == N
    assert sorted(r.header["ipv4_dst"] for r in rows) == sorted(h["ipv4_dst"] for h in hdrs)
    assert t.stats.faults_unrecorded == 0 and t.stats.faults_dropped == 0
    assert len({e.fault_id for e in events if e.new}) == N
    # A fault recorded late keeps the time of its sample.
    last = max(rows, key=lambda r: r.header["ipv4_dst"])
    assert last.first_seen == 2.0 + N - 1


def _shown(store, t, state=None):
    from pazzd.faultlist import fault_list

    return fault_list(store, t.unrecorded(), state)


def _open_total(store, t) -> int:
    from pazzd.faultlist import faults_open

    return sum(faults_open(store, t.unrecorded()).values())


def test_disk_full_faults_are_shown_and_counted_while_they_wait(setup):
    """What `pazzctl faults` and pz_faults_open read (pazzd.faultlist over the store and
    the tester's queue): all N faults the whole time, the waiting ones marked unsaved."""
    t, store, events, hdrs = setup
    for i in range(3):
        _fault(t, hdrs[i], 1.0)
    _fill_disk(store)
    for i in range(3, N):
        _fault(t, hdrs[i], 2.0 + i)
        shown = _shown(store, t)
        assert len(shown) == i + 1 == _open_total(store, t)
    t.tick(30.0)  # a retry that fails changes nothing
    shown = _shown(store, t, "open")
    assert len(shown) == N == _open_total(store, t)
    unsaved = [f for f in shown if not f["saved"]]
    assert len(unsaved) == N - 3 and all(f["id"] is None for f in unsaved)
    stored = _stored_after_room(store, t)
    assert sorted(f["header"] for f in shown) == sorted(r.header["text"] for r in stored)
    assert _open_total(store, t) == N and all(f["saved"] for f in _shown(store, t))


def _full(*_a, **_kw):
    raise sqlite3.OperationalError("database or disk is full")


def _stored_after_room(store, t):
    _free_disk(store)
    t.tick(31.0)
    return store.faults()


def test_a_waiting_sample_of_a_stored_fault_shows_what_the_store_will_hold(setup):
    """A stored fault, one resolved and reopened, and one open and seen again, while the
    disk is full: shown once each, as the store has them once it has room again."""
    t, store, events, hdrs = setup
    _fault(t, hdrs[0], 1.0)
    _fault(t, hdrs[1], 1.0)
    first, second = store.faults()
    store.resolve(first.id, 2.0)
    # Updates of a row fit in the pages it has: the store fails as a full disk makes it.
    record = store.record
    store.record = _full
    _fault(t, hdrs[0], 5.0)  # reopens the resolved one
    _fault(t, hdrs[1], 6.0)  # one more sample of the open one
    store.record = record
    assert t.stats.faults_unrecorded == 2
    shown = _shown(store, t)
    assert [f["id"] for f in shown] == [first.id, second.id]
    assert [f["saved"] for f in shown] == [False, False]
    assert _open_total(store, t) == 2
    assert [f["id"] for f in _shown(store, t, "open")] == [first.id, second.id]
    assert _shown(store, t, "resolved") == []
    from pazzd.answers import fault_json

    after = [fault_json(r) for r in _stored_after_room(store, t)]
    fields = ("id", "state", "count", "reopened", "first_seen", "last_seen", "resolved_at")
    assert [{k: f[k] for k in fields} for f in shown] == [{k: f[k] for k in fields} for f in after]
    assert all(f["saved"] for f in _shown(store, t))


def test_queue_is_bounded_and_drops_are_counted(setup):
    t, store, events, hdrs = setup
    t.MAX_UNRECORDED = 5
    _fill_disk(store)
    for i in range(N):
        _fault(t, hdrs[i], 1.0)
    before = len(store.faults())
    assert t.stats.faults_unrecorded == 5
    assert t.stats.faults_dropped == N - before - 5
    _free_disk(store)
    t.tick(2.0)
    assert len(store.faults()) + t.stats.faults_dropped == N


def test_store_errors_are_exported():
    from prometheus_client import generate_latest

    from pazzd.metrics import Metrics

    st = {"fault_store_errors": 17, "faults_unrecorded": 4, "faults_dropped": 2}
    text = generate_latest(Metrics(lambda: {"tester": st}).registry).decode()
    assert "pazz_fault_store_errors_total 17.0" in text
    assert "pazz_faults_unrecorded 4.0" in text
    assert "pazz_faults_dropped_total 2.0" in text
