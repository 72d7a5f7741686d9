"""Config validation: every error names file, line and key; check-config."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import yaml

from fuzzer.plan import DELIVERED_SHARE_MARKED
from pazzd.config import ConfigError, load_config
from pazzd.wiring import delivered_share

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
        (
            "critical_flows:\n  - name: x\n    from: s1:5\n    to: s9:5\n    header: ipv4_dst=10.0.1.1\n",
            "critical_flows[0].to",
            "s9",
        ),
        (
            "critical_flows:\n  - name: x\n    from: s1:5\n    to: s2:5\n    header: bogus=1\n",
            "critical_flows[0].header",
            "unknown header field",
        ),
        ("switches:\n  - switch: s1\n    colour: red\n", "switches[0].colour", "unknown key"),
        ("bogus: 1\n", "bogus", "unknown key"),
        ("switches: 5\n", "switches", "must be a list"),
        ("critical_flows: {a: 1}\n", "critical_flows", "must be a list"),
        ("log_level: loud\n", "log_level", "must be one of"),
        ("agents:\n  share: 2\n", "agents.share", "at most 1.0"),
        ("agents:\n  delay: soon\n", "agents.delay", "must be a float"),
        ("agents:\n  probes_per_entry: 0\n", "agents.probes_per_entry", "at least 1"),
        ("agents:\n  group_twice: crash\n", "agents.group_twice", "refuse or warn"),
        ("agents:\n  probes: 3\n", "agents.probes", "unknown key"),
    ],
)
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
    cfg["critical_flows"] = [
        {
            "name": "h1-h2",
            "from": "s1:5",
            "to": "s2:5",
            "header": "ipv4_dst=10.0.1.9,tcp_dst=80",
            "timeout": 4,
        }
    ]
    cfg["fuzz"] = {"enabled": True, "rate": 50, "pairs": [["s1:5", "s2:5"]]}
    c = load_config(write_config(tmp_path / "c.yaml", cfg))
    # Probes into delivered space by default only where the switches drop them at the exit.
    assert c.fuzz.delivered_share is None and delivered_share(c) == DELIVERED_SHARE_MARKED > 0
    cfg["sflow"] = {**cfg.get("sflow", {}), "marked_reports": False}
    assert delivered_share(load_config(write_config(tmp_path / "c.yaml", cfg))) == 0.0
    cfg["fuzz"]["delivered_share"] = 0.1
    assert delivered_share(load_config(write_config(tmp_path / "c.yaml", cfg))) == 0.1
    del cfg["sflow"]["marked_reports"]
    assert c.edge_ports == [(1, 5), (2, 5), (3, 5), (4, 5)]
    assert c.fuzz.pairs == [((1, 5), (2, 5))] and c.fuzz.rate == 50.0
    (cf,) = c.critical_flows
    assert cf.ingress == (1, 5) and cf.match == {"ipv4_dst": 0x0A000109}
    assert c.metrics.port == 0 and c.tester.workers == 1
    assert (c.agents.confirm, c.agents.delay, c.agents.share) == (True, 1.0, 0.25)
    assert (c.agents.probes_per_entry, c.agents.group_twice) == (3, "refuse")


def _check_config(*args):
    return subprocess.run(
        [sys.executable, "-m", "pazzd.cli", "check-config", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


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
    # With --json the error is JSON on stderr, nothing on stdout, and the same exit status.
    p = _check_config(str(bad), "--json")
    assert p.returncode == 2 and p.stdout == ""
    err = json.loads(p.stderr)
    assert err["status"] == 2 and "tester.settle: must be at least 0" in err["error"]


# --- check-config validates everything the start needs ------------------------------------


def _line_of(text: str, needle: str) -> int:
    """The 1-based line of the last line that contains needle (found in the text written)."""
    return [i for i, ln in enumerate(text.splitlines(), 1) if needle in ln][-1]


def _expect_error(path, key: str, line: int, *words: str) -> str:
    p = _check_config(str(path))
    assert p.returncode == 2, (p.stdout, p.stderr)
    err = p.stderr.strip()
    assert err.startswith(f"pazzctl: {path}:{line}: {key}: "), err
    for w in words:
        assert w in err, err
    assert "Traceback" not in err
    return err


@pytest.mark.parametrize(
    "extra, key, needle, words",
    [
        (
            "critical_flows:\n  - name: x\n    from: s1:5\n    to: s2:99\n    header: ipv4_dst=10.0.1.1\n",
            "critical_flows[0].to",
            "to: s2:99",
            ["switch s2 has no port 99"],
        ),
        (
            "critical_flows:\n  - name: x\n    from: s1:5\n    to: s1:2\n    header: ipv4_dst=10.0.1.1\n",
            "critical_flows[0].to",
            "to: s1:2",
            ["s1:2 is a link port"],
        ),
        (
            "sflow:\n  interfaces:\n    - {agent: 10.0.0.1, ifindex: 7, port: s3:42}\n",
            "sflow.interfaces[0].port",
            "port: s3:42",
            ["switch s3 has no port 42"],
        ),
        ("fuzz:\n  pairs:\n    - [s1:5, s4:77]\n", "fuzz.pairs[0]", "s4:77", ["no port 77"]),
        ("fuzz:\n  inject:\n    s1:66: veth0\n", "fuzz.inject.s1:66", "s1:66", ["no port 66"]),
        (
            "metrics:\n  listen: no-such-host.invalid:9473\n",
            "metrics.listen",
            "no-such-host",
            ["cannot resolve host 'no-such-host.invalid'"],
        ),
        (
            "log_level: info\n",
            "log_level",
            "log_level: info",
            ["duplicate key (first given on line"],
        ),
    ],
)
def test_check_config_rejects(tmp_path, extra, key, needle, words):
    cfg = base_config(tmp_path)
    section = extra.split(":", 1)[0]
    if section != "log_level":  # the duplicate-key case appends a second log_level
        cfg.pop(section, None)
    cfg["log_level"] = "debug"
    text = yaml.safe_dump(cfg, sort_keys=False) + extra
    path = tmp_path / "c.yaml"
    path.write_text(text)
    _expect_error(path, key, _line_of(text, needle), *words)


def test_duplicate_key_in_a_section(tmp_path):
    text = _text(tmp_path, "tester:\n  settle: 1\n  settle: 5\n")
    path = tmp_path / "c.yaml"
    path.write_text(text)
    _expect_error(path, "settle", _line_of(text, "settle: 5"), "first given on line")
    with pytest.raises(ConfigError, match="duplicate key"):
        load_config(path)  # at start and reload too, not only in check-config


def test_check_config_parses_the_rules(tmp_path):
    cfg = base_config(tmp_path)
    rules = tmp_path / "rules.jsonl"
    good = rules.read_text().splitlines()
    rules.write_text("\n".join([*good[:3], '{"dpid": 1, "flow": oops', *good[3:]]))
    text = yaml.safe_dump(cfg, sort_keys=False)
    path = write_config(tmp_path / "c.yaml", cfg)
    _expect_error(path, "rules", _line_of(text, "rules:"), f"{rules}:4")
    rules.write_text("\n".join([*good, good[-1].replace(good[-1][:11], '{"dpid": 9,')]))
    assert '"dpid": 9' in rules.read_text()
    _expect_error(path, "rules", _line_of(text, "rules:"), "switch dpid 9 is not in the topology")


def test_check_config_rejects_a_corrupt_database(tmp_path):
    cfg = base_config(tmp_path)
    text = yaml.safe_dump(cfg, sort_keys=False)
    path = write_config(tmp_path / "c.yaml", cfg)
    db = tmp_path / "faults.db"
    db.write_bytes(b"this is not SQLite" * 300)
    _expect_error(path, "database", _line_of(text, "database:"), str(db), "not a readable")
    db.unlink()  # absent: pazzd creates it
    assert _check_config(str(path)).returncode == 0


def test_check_config_warns_of_agent_dependent_entries(tmp_path):
    """Entries whose effect is the switch's choice (docs/agents.md) draw warnings, not errors."""
    cfg = base_config(tmp_path)
    good = write_config(tmp_path / "good.yaml", cfg)
    p = _check_config(str(good), "--json")
    assert p.returncode == 0 and json.loads(p.stdout)["warnings"] == []
    rules = tmp_path / "rules.jsonl"
    lines = rules.read_text().splitlines()
    lines += [
        '{"dpid": 1, "flow": "table=3,priority=7,ip,nw_dst=10.9.0.0/16,actions=output:1"}',
        '{"dpid": 1, "flow": "table=3,priority=7,tcp,actions=output:2"}',
        '{"dpid": 1, "flow": "table=3,priority=6,actions=mod_nw_dst:10.9.0.1,output:1"}',
    ]
    rules.write_text("\n".join(lines) + "\n")
    p = _check_config(str(good))
    assert p.returncode == 0, p.stderr
    warnings = [ln for ln in p.stdout.splitlines() if ln.startswith("warning:")]
    n = len(lines)
    assert len(warnings) == 2, p.stdout
    assert f"rules.jsonl:{n - 1}" in warnings[1] and "[equal-priority-overlap]" in warnings[1]
    assert f"rules.jsonl:{n}" in warnings[0] and "[set-field-prerequisite]" in warnings[0]


def test_blackhole_bound_settings(tmp_path):
    """tester.blackhole_false_alarms and .blackhole_max_silence reach the monitor; a value
    out of range names the key."""
    from pazzd.wiring import blackholes

    cfg = base_config(tmp_path)
    cfg["tester"] = {"blackhole_false_alarms": 1e-4, "blackhole_max_silence": 30}
    cfg["critical_flows"] = [
        {"name": "f", "from": "s1:5", "to": "s4:5", "header": "ipv4_dst=10.0.3.1"}
    ]
    c = load_config(write_config(tmp_path / "pazzd.yaml", cfg))
    assert (c.tester.blackhole_false_alarms, c.tester.blackhole_max_silence) == (1e-4, 30.0)
    m = blackholes(c, None)
    assert (m.per_hour, m.max_silence) == (1e-4, 30.0)
    cfg["tester"] = {"blackhole_false_alarms": 0.5}
    with pytest.raises(ConfigError, match=r"tester\.blackhole_false_alarms: must be at most"):
        load_config(write_config(tmp_path / "pazzd.yaml", cfg))


def test_fuzz_host_macs(tmp_path):
    """fuzz.host_macs: a MAC per edge port, parsed; a bad or group address names the key."""
    cfg = base_config(tmp_path)
    cfg["fuzz"] = {"host_macs": {"s1:5": "00:00:00:00:01:05"}}
    c = load_config(write_config(tmp_path / "pazzd.yaml", cfg))
    assert c.fuzz.host_macs == {(1, 5): 0x0105}
    for bad, msg in (("01:00:5e:00:00:01", "group"), ("nope", "must be a MAC address")):
        cfg["fuzz"] = {"host_macs": {"s1:5": bad}}
        with pytest.raises(ConfigError, match=rf"fuzz\.host_macs\.s1:5: .*{msg}"):
            load_config(write_config(tmp_path / "pazzd.yaml", cfg))
