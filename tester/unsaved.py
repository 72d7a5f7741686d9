"""Faults the store has not taken yet (disk full, a read-only or broken file), as plain
JSON-able data: the tester keeps them in memory and retries them (Tester.unrecorded);
pazzd shows and counts them, marked unsaved, until they are stored."""

from __future__ import annotations

__all__ = ["as_dict", "key"]


def as_dict(args: tuple) -> dict:
    """The arguments of FaultStore.record() (evidence and audit left out) as a dict."""
    kind, location, header_class, now, _evidence, header, egress, expected, actual, loc = args[:10]
    return {
        "kind": kind,
        "location": location,
        "header_class": header_class,
        "seen": now,
        "header": header,
        "egress": list(egress) if egress is not None else None,
        "expected": expected,
        "actual": actual,
        "localization": loc,
    }


def key(f) -> tuple[str, str, str]:
    """What makes a fault one row of the store: (kind, location, header class); f is an
    as_dict() or a FaultRow."""
    if isinstance(f, dict):
        return f["kind"], f["location"], f["header_class"]
    return f.kind, f.location, f.header_class
