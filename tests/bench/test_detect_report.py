"""bench/detect.py's summary, table and CDF plot from result files (the lab run itself is
a bench, not a test): counts from a synthetic result, checked by hand."""

from __future__ import annotations

import json

from bench.detect import plot, summarize, table


def _fault(kind, any_s, dp_s, localized=False, audit=False):
    return {
        "kind": kind,
        "any_s": any_s,
        "dataplane_s": dp_s,
        "localized": localized,
        "audit_localized": audit,
        "unattributed": [],
    }


def _doc():
    runs = [
        {
            "faults": [
                _fault("acl_bypass", 0.1, 0.1, True),
                _fault("misroute", 4.0, None, audit=True),
                _fault("rewrite_changed", None, None),
            ],
            "startup_false_alarms": [],
            "false_alarms": [{"id": 9}],
            "churn_flowmods": 100,
        },
        {
            "faults": [_fault("acl_bypass", 0.3, 0.3, True), _fault("misroute", 2.0, 5.0, True)],
            "startup_false_alarms": [{"id": 1}],
            "false_alarms": [],
            "churn_flowmods": 50,
        },
    ]
    return {
        "sampling": 1,
        "fuzz_rate": 1000.0,
        "horizon_s": 60.0,
        "runs": runs,
        "summary": summarize(runs),
    }


def test_summary_counts():
    s = _doc()["summary"]
    assert (s["cases"], s["detected_any"], s["detected_dataplane"], s["localized_right"]) == (
        5,
        4,
        3,
        4,
    )
    assert (s["false_alarms"], s["startup_false_alarms"], s["churn_flowmods"]) == (1, 1, 150)
    acl = s["per_kind"]["acl_bypass"]
    assert acl["dataplane_median_s"] == 0.2 and acl["dataplane_max_s"] == 0.3
    mis = s["per_kind"]["misroute"]
    assert (mis["detected_any"], mis["detected_dataplane"], mis["localized_right_dataplane"]) == (
        2,
        1,
        1,
    )
    assert s["per_kind"]["rewrite_changed"]["detected_any"] == 0


def test_table_and_plot(tmp_path):
    doc = _doc()
    lines = table(doc).splitlines()
    assert "| acl_bypass | 2 | 2 | 0.2 | 2 | 0.2 / 0.3 / 0.3 | 2 |" in lines
    assert "| misroute | 2 | 2 | 3.0 | 1 | 5.0 / 5.0 / 5.0 | 2 |" in lines
    assert "| **all** | 5 | 4 |" in lines[-1]
    path = tmp_path / "r.json"
    path.write_text(json.dumps(doc))
    out = tmp_path / "cdf.png"
    plot([str(path), str(path)], str(out))
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out.stat().st_size > 10_000
