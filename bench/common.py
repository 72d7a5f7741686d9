"""Small helpers shared by the benchmark scripts."""

from __future__ import annotations

import json
import resource
import statistics
from pathlib import Path


def rss_mb() -> float:
    """Peak resident set size of this process, in MiB."""
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def pct(values: list[float], q: float) -> float:
    """The q-th percentile (0..100) of values, nearest rank."""
    if not values:
        return float("nan")
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(q / 100 * (len(s) - 1))))]


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def readd_flowmods(e):
    """A FlowMod that deletes entry e (strict, its cookie exactly) and one that adds it back:
    the update the model benches time."""
    from cpc.rules import FlowMod

    return (
        FlowMod(
            "delete_strict",
            e.dpid,
            e.table,
            e.priority,
            e.match,
            cookie=e.cookie,
            cookie_mask=(1 << 64) - 1,
        ),
        FlowMod(
            "add",
            e.dpid,
            e.table,
            e.priority,
            e.match,
            e.instructions,
            cookie=e.cookie,
            rule_id=e.rule_id,
        ),
    )


def emit_json(report: dict, out: str | None = None) -> None:
    """Print a bench's JSON report, and write it to `out` too when given."""
    text = json.dumps(report, indent=1)
    if out:
        Path(out).write_text(text + "\n")
    print(text)
