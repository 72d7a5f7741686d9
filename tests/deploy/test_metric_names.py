"""Every metric that the alert rules and the Grafana panels query is one that pazzd exports."""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from pazzd.metrics import Metrics

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
NAME = re.compile(r"\b((?:pazz|process|python)_[a-z0-9_]+)\b")


def exported() -> set[str]:
    """Sample names of a scrape of a daemon state with every part present (the proxy, the
    fuzzer, a tester)."""
    state = {
        "tester": {"datagrams": 1, "consistent": 1},
        "faults_open": {},
        "fuzz": {
            "probes_sent_total": 1,
            "ingresses": [
                {
                    "ingress": "s1:1",
                    "areas": 2,
                    "areas_recent": 1,
                    "revisit_s": {"sweep": 1.0},
                    "expected_detect_s": {"1/256": 2.0},
                },
            ],
        },
        "proxy_on": True,
        "proxy": {"stalled": 0},
        "switches": {1: True},
        "controller_connected": True,
        "intents": {"no_loops": 0},
        "interference": {("acl,router", "shadowing"): 0},
    }
    text = generate_latest(Metrics(lambda: state).registry).decode()
    return {s.name for fam in text_string_to_metric_families(text) for s in fam.samples}


def queried() -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for g in yaml.safe_load((DEPLOY / "pazz-alerts.yml").read_text())["groups"]:
        for r in g["rules"]:
            out.setdefault(f"alert {r['alert']}", set()).update(NAME.findall(r["expr"]))
    for p in json.loads((DEPLOY / "grafana-dashboard.json").read_text())["panels"]:
        for t in p.get("targets", []):
            out.setdefault(f"panel {p['title']}", set()).update(NAME.findall(t["expr"]))
    return out


def test_every_queried_metric_is_exported():
    have = exported()
    missing = {where: names - have for where, names in queried().items() if names - have}
    assert not missing, missing


def test_the_removed_metrics_are_gone_everywhere():
    root = DEPLOY.parent
    for path in [*root.glob("deploy/**/*"), *root.glob("docs/*.md"), *root.glob("pazzd/**/*.py")]:
        if not path.is_file():
            continue
        text = path.read_text()
        for old in ("pazz_fuzz_coverage_ratio", "pazz_sflow_datagrams_total"):
            assert old not in text, f"{path}: {old}"
