"""Every metric that the alert rules and the Grafana panels query is one that pazzd exports."""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from cpc.interference import RELATIONS
from pazzd.interference import OVERWRITE
from pazzd.metrics import Metrics

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
NAME = re.compile(r"\b((?:pazz|process|python)_[a-z0-9_]+)\b")


def exported() -> set[str]:
    return set(exported_labels())


def exported_labels() -> dict[str, dict[str, set[str]]]:
    """Sample name -> label -> the values it takes, in a scrape of a daemon state with every
    part present (the proxy, the fuzzer, a tester, the scale-out)."""
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
        "ifmap_stale": {"s1": False},
        "intents": {"no_loops": 0},
        "interference": {("acl,router", r): 0 for r in (*RELATIONS, OVERWRITE)},  # as open_counts
        "agents": {"confirmed": 1, "diverged": 0, "pending": 0, "confirm_seconds_median": 1.5},
        "scaleout": {"connected": True, "journal_version": 3, "evidence": 0, "lag": {"w1": 0.1}},
    }
    text = generate_latest(Metrics(lambda: state).registry).decode()
    out: dict[str, dict[str, set[str]]] = {}
    for fam in text_string_to_metric_families(text):
        for sample in fam.samples:
            labels = out.setdefault(sample.name, {})
            for k, v in sample.labels.items():
                labels.setdefault(k, set()).add(v)
    return out


def alert_exprs() -> dict[str, str]:
    return {
        r["alert"]: r["expr"]
        for g in yaml.safe_load((DEPLOY / "pazz-alerts.yml").read_text())["groups"]
        for r in g["rules"]
    }


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


SELECTOR = re.compile(r"\b((?:pazz|process|python)_[a-z0-9_]+|up)\{([^}]*)\}")
MATCHER = re.compile(r'(\w+)\s*(=~|!~|!=|=)\s*"([^"]*)"')


def test_every_queried_label_value_is_exported():
    """A matcher on a label value that pazzd never exports (reason="takover", say) is an
    alert that can never fire: every value an alert names, each alternative of a regex
    matcher too, is one the exporter gives that metric; `job` is a job of prometheus.yml."""
    have = exported_labels()
    jobs = {
        j["job_name"]
        for j in yaml.safe_load((DEPLOY / "prometheus.yml").read_text())["scrape_configs"]
    }
    bad = []
    for alert, expr in alert_exprs().items():
        for name, body in SELECTOR.findall(expr):
            for label, op, value in MATCHER.findall(body):
                values = value.split("|") if op in ("=~", "!~") else [value]
                known = jobs if label == "job" else have.get(name, {}).get(label, set())
                bad += [f"{alert}: {name}{{{label}{op}{v!r}}}" for v in values if v not in known]
    assert not bad, bad


def test_the_label_check_sees_a_wrong_value():
    have = exported_labels()
    assert "takeover" in have["pazz_proxy_dropped_connections_total"]["reason"]
    assert "takover" not in have["pazz_proxy_dropped_connections_total"]["reason"]
    assert MATCHER.findall(SELECTOR.findall('x(pazz_a_total{reason=~"a|b"}[5m])')[0][1]) == [
        ("reason", "=~", "a|b")
    ]
