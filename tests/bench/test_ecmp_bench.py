"""bench/ecmp.py on the k=4 fat-tree: the JSON it prints, one path per ingress with the
SELECT pick and every ECMP path without it."""

from __future__ import annotations

import json

from bench import ecmp


def run(capsys, *extra: str) -> dict:
    assert ecmp.main(["--k", "4", "--queries", "15", "--max-gb", "0", *extra]) == 0
    return json.loads(capsys.readouterr().out)


def test_ecmp_bench_reports_one_path_per_ingress(capsys):
    out = run(capsys)
    assert out["switches"] == 20 and out["hosts"] == 16 and out["select_groups"] > 0
    assert out["queries"] == 15 and "error" not in out
    assert out["answers_mean"] == 15  # every other host's port, one path each
    assert out["expected_us_p50"] > 0 and out["allows_us_p50"] > 0 and out["at_us_p50"] > 0
    assert out["rss_mb"] >= out["rss_mb_built"] > 0


def test_ecmp_bench_without_the_pick_counts_every_path(capsys):
    out = run(capsys, "--every-bucket")
    # The 12 hosts in other pods are 4 paths away (2 aggregation x 2 core switches), the
    # 2 on the pod's other edge switch 2, the one on the same edge switch 1: 48 + 4 + 1.
    assert out["select"] is False and out["answers_mean"] == 53
