"""The faults pazzd shows (`pazzctl faults`, the API, the web view) and counts
(pazz_faults_open): the fault store's rows, and the faults waiting in memory for the
store while it fails (disk full, a read-only file), marked `saved: false`.

A waiting fault that the store already has (the same kind, location and header class)
is that row with the waiting sample on top: open again, seen later, one more sample.
A waiting fault the store does not have yet has no id (`id: null`) until it is stored.
"""

from __future__ import annotations

from tester.store import OPEN
from tester.unsaved import key

from .answers import fault_json, header_text
from .metrics import FAULT_CLASSES

__all__ = ["fault_list", "faults_open"]


def _latest(unsaved: list[dict]) -> dict[tuple, dict]:
    """One waiting fault per store key, the latest sample (workers may hold the same one)."""
    out: dict[tuple, dict] = {}
    for f in unsaved:
        k = key(f)
        if k not in out or f["seen"] >= out[k]["seen"]:
            out[k] = f
    return out


def _unsaved_json(f: dict, stored: dict | None) -> dict:
    """A waiting fault in the shape of fault_json, on top of its stored row if any."""
    if stored is None:
        stored = {
            "id": None,
            "first_seen": f["seen"],
            "count": 0,
            "reopened": 0,
            "polled": None,
            "audit": None,
            "state": OPEN,
        }
    return {
        **stored,
        "kind": f["kind"],
        "location": f["location"],
        "header_class": f["header_class"],
        "state": OPEN,
        "last_seen": f["seen"],
        "count": stored["count"] + 1,
        "reopened": stored["reopened"] + (stored["state"] != OPEN),
        "header": header_text(f["header"]),
        "egress": f["egress"],
        "expected": f["expected"],
        "actual": f["actual"],
        "localization": f["localization"],
        "resolved_at": None,
        "saved": False,
    }


def fault_list(
    store,
    unsaved: list[dict],
    state: str | None = None,
    since: int | None = None,
    changed_since: float | None = None,
) -> list[dict]:
    """fault_json of the store's faults (state: only those; since: ids above it;
    changed_since: seen or resolved then or later), with the waiting ones: stored rows
    first, by id, then new waiting faults (no id yet), oldest first."""
    if not unsaved:
        return [
            fault_json(r) for r in store.faults(state, since_id=since, changed_since=changed_since)
        ]
    waiting = _latest(unsaved)
    out = []
    for r in store.faults():  # all: a waiting sample may reopen a resolved fault
        f = fault_json(r)
        w = waiting.pop(key(r), None)
        out.append(f if w is None else _unsaved_json(w, f))
    out += [_unsaved_json(w, None) for w in sorted(waiting.values(), key=lambda w: w["seen"])]
    return [
        f
        for f in out
        if (state is None or f["state"] == state)
        and (since is None or f["id"] is None or f["id"] > since)
        and (
            changed_since is None
            or max(f["last_seen"] or 0, f["resolved_at"] or 0) >= changed_since
        )
    ]


def faults_open(store, unsaved: list[dict] = ()) -> dict[str, int]:
    """Open faults per class, every class present: the store's open rows and the waiting
    faults that are not one of them."""
    out = dict.fromkeys(FAULT_CLASSES, 0)
    if store is None:
        return out
    rows = store.faults(OPEN)
    for r in rows:
        out[r.kind] = out.get(r.kind, 0) + 1
    if unsaved:
        stored = {key(r) for r in rows}
        for k in _latest(unsaved).keys() - stored:
            out[k[0]] = out.get(k[0], 0) + 1
    return out
