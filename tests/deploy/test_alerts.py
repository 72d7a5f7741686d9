"""deploy/pazz-alerts.yml: valid, unit-tested by promtool, every alert tested and documented."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.tools import require_tool

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
RULES = DEPLOY / "pazz-alerts.yml"
RULE_TESTS = DEPLOY / "pazz-alerts.test.yml"
OPERATIONS = ROOT / "docs" / "operations.md"


def _alerts() -> list[dict]:
    groups = yaml.safe_load(RULES.read_text())["groups"]
    return [r for g in groups for r in g["rules"] if "alert" in r]


def _promtool(*args: str, cwd: Path = DEPLOY) -> subprocess.CompletedProcess:
    tool = require_tool("promtool", "prometheus")
    return subprocess.run([tool, *args], cwd=cwd, capture_output=True, text=True, timeout=120)


def test_promtool_check_rules():
    r = _promtool("check", "rules", RULES.name)
    assert r.returncode == 0, r.stdout + r.stderr


def test_promtool_check_config():
    r = _promtool("check", "config", "prometheus.yml")
    assert r.returncode == 0, r.stdout + r.stderr


def test_promtool_test_rules():
    r = _promtool("test", "rules", RULE_TESTS.name)
    assert r.returncode == 0, r.stdout + r.stderr


def test_the_rule_tests_can_fail(tmp_path):
    """The unit tests catch the two defects of the old rules: vector matching on every label
    (PazzNoReports, PazzSflowLoss never fired) and one page per blackhole, not two."""
    shutil.copy(RULE_TESTS, tmp_path)
    rules = RULES.read_text()
    broken = rules.replace(
        'expr: pazz_faults_open{class!="blackhole"} > 0',
        "expr: sum by (class) (pazz_faults_open) > 0",
    ).replace(
        "expr: sum without (result) (rate(pazz_reports_total[5m])) == 0",
        "expr: rate(pazz_reports_total[5m]) == 0 and "
        "rate(pazz_sflow_datagrams_received_total[5m]) == 0",
    )
    assert broken != rules
    (tmp_path / RULES.name).write_text(broken)
    r = _promtool("test", "rules", RULE_TESTS.name, cwd=tmp_path)
    assert r.returncode != 0
    failed = set(re.findall(r"alertname: (\w+),", r.stdout + r.stderr))
    assert failed == {"PazzFaultOpen", "PazzNoReports"}, r.stdout + r.stderr


# Defects the unit tests must catch: (alert, the rule's text, a defective version).
DEFECTS = [
    (  # pages twice for one failure: no switch connected, so no controller connection
        "PazzControllerDisconnected",
        "unless on (job, instance) (max without (dpid) (pazz_switch_connected) == 0)",
        "unless on (job, instance) (pazz_controller_connected == 2)",
    ),
    (  # a switch down once and back is not flapping
        "PazzSwitchFlapping",
        "changes(pazz_switch_connected[15m]) >= 4",
        "changes(pazz_switch_connected[15m]) >= 2",
    ),
    (  # the flapping switch as PazzSwitchDisconnected sees it: never down a minute
        "PazzSwitchFlapping",
        "changes(pazz_switch_connected[15m]) >= 4",
        "pazz_switch_connected == 0",
    ),
    (  # idle connections are not takeovers
        "PazzSwitchTakeoverRefused",
        'pazz_proxy_dropped_connections_total{reason="takeover"}[10m]',
        "pazz_proxy_dropped_connections_total[10m]",
    ),
    (  # one burst of store errors is not a failing store
        "PazzFaultStoreFailing",
        "increase(pazz_fault_store_errors_total[1m]) > 0\n        for: 5m",
        "increase(pazz_fault_store_errors_total[1m]) > 0",
    ),
    (  # a target that is down is PazzDown's
        "PazzTargetMissing",
        'absent(up{job="pazzd"})',
        'up{job="pazzd"} == 0',
    ),
]


@pytest.mark.parametrize("alert,good,bad", DEFECTS, ids=[d[0] for d in DEFECTS])
def test_the_rule_tests_catch_a_defect(tmp_path, alert, good, bad):
    shutil.copy(RULE_TESTS, tmp_path)
    rules = RULES.read_text()
    assert rules.count(good) == 1, good
    (tmp_path / RULES.name).write_text(rules.replace(good, bad))
    r = _promtool("test", "rules", RULE_TESTS.name, cwd=tmp_path)
    assert r.returncode != 0
    assert set(re.findall(r"alertname: (\w+),", r.stdout + r.stderr)) == {alert}, r.stdout


def test_every_alert_fires_in_a_test_and_stays_silent_in_another():
    cases: dict[str, set[str]] = {}
    for t in yaml.safe_load(RULE_TESTS.read_text())["tests"]:
        for c in t.get("alert_rule_test", []):
            cases.setdefault(c["alertname"], set()).add(
                "fires" if c.get("exp_alerts") else "silent"
            )
    for a in _alerts():
        assert cases.get(a["alert"]) == {"fires", "silent"}, a["alert"]


def _anchors(markdown: str) -> set[str]:
    """GitHub-style anchors of the headings."""
    out = set()
    for line in markdown.splitlines():
        m = re.match(r"#+\s+(.*)", line)
        if m:
            text = re.sub(r"[^\w\- ]", "", m.group(1).strip().lower())
            out.add(text.replace(" ", "-"))
    return out


@pytest.mark.parametrize("alert", _alerts(), ids=lambda a: a["alert"])
def test_alert_keeps_instance_and_has_a_runbook(alert):
    ann = alert.get("annotations", {})
    assert ann.get("summary") and ann.get("description")
    assert alert["labels"]["severity"] in ("critical", "warning")
    url = ann.get("runbook_url", "")
    prefix = "file:///opt/pazz/docs/operations.md#"
    assert url.startswith(prefix), url
    assert url[len(prefix) :] in _anchors(OPERATIONS.read_text()), url
    # No aggregation that drops job/instance: one pazzd's failure is one alert of its own.
    assert not re.search(r"\b(sum|max|min|avg|count)\s+by\s*\(", alert["expr"]), alert["expr"]
