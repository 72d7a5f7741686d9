"""Config validation: every error names file, line and key; check-config."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import yaml

from pazzd.config import ConfigError, load_config

from .helpers import base_config, write_config


def _text(tmp_path, extra: str) -> str:
    cfg = base_config(tmp_path)
    return yaml.safe_dump(cfg, sort_keys=False) + extra


@pytest.mark.parametrize(
    "extra, line_key, msg",
    [
        ("fuzz:\n  rate: fast\n", "fuzz.rate", "must be a float"),
        ("fuzz:\n  delivered_share: 0.95\n", "fuzz.delivered_share", "0.9"),
        ("tester:\n  workers: 0\n", "tester.workers", "at least 1"),
        ("critical_flows:\n  - name: x\n    from: s1:5\n    to: s9:5\n    header: ipv4_dst=10.0.1.1\n",
         "critical_flows[0].to", "s9"),
        ("critical_flows:\n  - name: x\n    from: s1:5\n    to: s2:5\n    header: bogus=1\n",
         "critical_flows[0].header", "unknown header field"),
        ("switches:\n  - switch: s1\n    colour: red\n", "switches[0].colour", "unknown key"),
        ("bogus: 1\n", "bogus", "unknown key"),
        ("switches: 5\n", "switches", "must be a list"),
        ("critical_flows: {a: 1}\n", "critical_flows", "must be a list"),
        ("log_level: loud\n", "log_level", "must be one of"),
    ],
)  # fmt: skip
def test_errors_name_file_line_and_key(tmp_path, extra, line_key, msg):
    text = _text(tmp_path, extra)
    path = tmp_path / "pazzd.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as ei:
        load_config(path)
    err = str(ei.value)
    assert err.startswith(f"{path}:"), err
    line = int(err.split(":")[1])
    key = line_key.split(".")[-1].split("[")[0]
    assert (
        key in text.splitlines()[line - 1]
        or line_key.split(".")[0].split("[")[0] in text.splitlines()[line - 1]
    ), (err, text.splitlines()[line - 1])
    assert f"{line_key}:" in err and msg in err, err


def test_listen_address_error_names_line(tmp_path):
    cfg = base_config(tmp_path)
    cfg["sflow"]["listen"] = "127.0.0.1:99999"
    path = write_config(tmp_path / "c.yaml", cfg)
    with pytest.raises(ConfigError, match=r"c\.yaml:\d+: sflow\.listen: port 99999 out of range"):
        load_config(path)


def test_workers_need_a_database_file(tmp_path):
    cfg = base_config(tmp_path, database=":memory:", tester={"workers": 2})
    path = write_config(tmp_path / "c.yaml", cfg)
    with pytest.raises(ConfigError, match=r"c\.yaml:\d+: database: tester.workers > 1 needs"):
        load_config(path)
    cfg["tester"]["workers"] = 1
    assert load_config(write_config(tmp_path / "c.yaml", cfg)).database == ":memory:"


def test_yaml_syntax_error_names_line(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("topology: x\nsflow: [\n")
    with pytest.raises(ConfigError, match=r"c\.yaml:\d+"):
        load_config(path)


def test_missing_topology_and_bad_topology_file(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("database: x.db\n")
    with pytest.raises(ConfigError, match="topology: required"):
        load_config(path)
    (tmp_path / "t.yaml").write_text(
        "switches:\n  - {name: s1, dpid: 1, ports: [1]}\nlinks:\n  - [s1:1, s2:1]\n"
    )
    path.write_text("topology: t.yaml\nrules: r.jsonl\n")
    (tmp_path / "r.jsonl").write_text("")
    with pytest.raises(ConfigError, match=r"c\.yaml:1: topology: .*t\.yaml:4"):
        load_config(path)


def test_good_config_and_defaults(tmp_path):
    cfg = base_config(tmp_path)
    cfg["critical_flows"] = [{"name": "h1-h2", "from": "s1:5", "to": "s2:5",
                              "header": "ipv4_dst=10.0.1.9,tcp_dst=80", "timeout": 4}]  # fmt: skip
    cfg["fuzz"] = {"enabled": True, "rate": 50, "pairs": [["s1:5", "s2:5"]]}
    c = load_config(write_config(tmp_path / "c.yaml", cfg))
    assert c.fuzz_delivered_share == 0.0  # probes into delivered space only when asked
    cfg["fuzz"]["delivered_share"] = 0.1
    assert load_config(write_config(tmp_path / "c.yaml", cfg)).fuzz_delivered_share == 0.1
    assert c.edge_ports == [(1, 5), (2, 5), (3, 5), (4, 5)]
    assert c.fuzz_pairs == [((1, 5), (2, 5))] and c.fuzz_rate == 50.0
    (cf,) = c.critical_flows
    assert cf.ingress == (1, 5) and cf.match == {"ipv4_dst": 0x0A000109}
    assert c.metrics_port == 0 and c.tester_workers == 1


def _check_config(*args):
    return subprocess.run([sys.executable, "-m", "pazzd.cli", "check-config", *args],
                          capture_output=True, text=True, timeout=60)  # fmt: skip


def test_pazzctl_check_config(tmp_path):
    good = write_config(tmp_path / "good.yaml", base_config(tmp_path))
    p = _check_config(str(good))
    assert p.returncode == 0 and "OK" in p.stdout, p.stderr
    p = _check_config(str(good), "--json")
    assert json.loads(p.stdout)["ok"] is True
    bad = tmp_path / "bad.yaml"
    bad.write_text(good.read_text() + "tester:\n  settle: -1\n")
    p = _check_config(str(bad))
    assert p.returncode == 2
    assert f"{bad}:" in p.stderr and "tester.settle: must be at least 0" in p.stderr
