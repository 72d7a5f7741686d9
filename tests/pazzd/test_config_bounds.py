"""Every number in pazzd.yaml has bounds: an absurd magnitude (1e308, 10**30), a negative
one, infinity and NaN are refused, each with one error naming the file, the key's line
and the key. The options are found by reading the sections' dataclasses, so a new option
without bounds fails here."""

from __future__ import annotations

import dataclasses
import math

import pytest
import yaml

from pazzd.config import SECTIONS, ConfigError, load_config

from .helpers import base_config

NUMERIC = [
    (key, f)
    for key, (sec, _) in SECTIONS.items()
    for f in dataclasses.fields(sec)
    if f.metadata.get("option") and f.type in ("int", "float", "float | None")
]
ABSURD = [1e308, -1e308, math.inf, -math.inf, math.nan, 10**30, -(10**30)]


def test_every_numeric_option_has_both_bounds():
    unbounded = [
        f"{key}.{f.name}"
        for key, f in NUMERIC
        if f.metadata["lo"] is None or f.metadata["hi"] is None
    ]
    assert len(NUMERIC) >= 20  # the sections' numbers were found
    assert unbounded == []


def _refused(tmp_path, cfg: dict, key: str, needle: str) -> str:
    """The error of cfg: one line, naming the file, the line that holds needle (found in
    the text written) and the key."""
    text = yaml.safe_dump(cfg, sort_keys=False)
    path = tmp_path / "pazzd.yaml"
    path.write_text(text)
    lines = [i for i, ln in enumerate(text.splitlines(), 1) if needle in ln]
    assert len(lines) == 1, (needle, text)
    with pytest.raises(ConfigError) as e:
        load_config(path)
    msg = str(e.value)
    assert msg.startswith(f"{path}:{lines[0]}: {key}: "), msg
    assert "\n" not in msg
    return msg


@pytest.mark.parametrize("key, f", NUMERIC, ids=[f"{k}.{f.name}" for k, f in NUMERIC])
def test_absurd_values_of_an_option_are_refused(tmp_path, key, f):
    for v in ABSURD:
        cfg = base_config(tmp_path)
        cfg.setdefault(key, {})[f.name] = v
        msg = _refused(tmp_path, cfg, f"{key}.{f.name}", f"  {f.name}:")
        assert msg.split(": ", 2)[2].startswith("must be "), msg


# The numbers read by hand, outside the sections' options: (where, value, key, needle).
FLOW = {"name": "web", "from": "s1:5", "to": "s2:5", "header": "ipv4_dst=10.0.1.9"}
IFACE = {"agent": "10.0.0.1", "ifindex": 7, "port": "s1:5"}
HAND_READ = [
    ("critical_flows", [{**FLOW, "timeout": 1e308}], "critical_flows[0].timeout", "timeout:"),
    ("critical_flows", [{**FLOW, "timeout": math.nan}], "critical_flows[0].timeout", "timeout:"),
    ("critical_flows", [{**FLOW, "timeout": -math.inf}], "critical_flows[0].timeout", "timeout:"),
    ("critical_flows", [{**FLOW, "grace": math.inf}], "critical_flows[0].grace", "grace:"),
    ("critical_flows", [{**FLOW, "grace": 1e308}], "critical_flows[0].grace", "grace:"),
    (
        "sflow",
        {"interfaces": [{**IFACE, "ifindex": 2**40}]},
        "sflow.interfaces[0].ifindex",
        "ifindex:",
    ),
    (
        "sflow",
        {"interfaces": [{**IFACE, "ifindex": -1}]},
        "sflow.interfaces[0].ifindex",
        "ifindex:",
    ),
    (
        "sflow",
        {"interfaces": [{**IFACE, "sub_agent": 2**40}]},
        "sflow.interfaces[0].sub_agent",
        "sub_agent:",
    ),
    ("apps", [{"name": "a", "cookie": 2**70, "mask": 1}], "apps[0].cookie", "cookie:"),
    ("metrics", {"listen": "127.0.0.1:99999999"}, "metrics.listen", "99999999"),
]


@pytest.mark.parametrize("where, value, key, needle", HAND_READ, ids=[h[2] for h in HAND_READ])
def test_absurd_values_read_by_hand_are_refused(tmp_path, where, value, key, needle):
    cfg = base_config(tmp_path, **{where: value})
    _refused(tmp_path, cfg, key, needle)


def test_the_bounds_still_take_sane_values(tmp_path):
    """The bounds are where an operator would not go: values at the edge of sane load."""
    sane = {
        "tester": {"settle": 600.0, "resolve_after": 3600.0, "blackhole_k": 50.0},
        "fuzz": {"rate": 100000.0, "window": 3600.0},
        "sflow": {"sampling_rate": 65536},
        "intents": {"forgotten_after": 60.0, "resolve_after": 3600.0},
        "critical_flows": [{**FLOW, "timeout": 3600.0, "grace": 600.0}],
    }
    cfg = load_config(_write(tmp_path, base_config(tmp_path, **sane)))
    assert cfg.tester.settle == 600.0 and cfg.sflow.sampling_rate == 65536
    assert cfg.critical_flows[0].timeout == 3600.0


def _write(tmp_path, cfg):
    path = tmp_path / "pazzd.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path
