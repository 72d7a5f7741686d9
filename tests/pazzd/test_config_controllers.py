"""controller.controllers, controller.name and apps owned by a controller connection."""

from __future__ import annotations

import pytest
import yaml

from pazzd.config import ConfigError, controller_names, load_config

from .helpers import base_config


def _load(tmp_path, extra: str):
    path = tmp_path / "pazzd.yaml"
    path.write_text(yaml.safe_dump(base_config(tmp_path), sort_keys=False) + extra)
    return path, load_config(path)


def _error(tmp_path, extra: str) -> tuple[str, list[str]]:
    path = tmp_path / "pazzd.yaml"
    text = yaml.safe_dump(base_config(tmp_path), sort_keys=False) + extra
    path.write_text(text)
    with pytest.raises(ConfigError) as ei:
        load_config(path)
    return str(ei.value), text.splitlines()


def test_existing_single_controller_config_is_unchanged(tmp_path):
    _, cfg = _load(tmp_path, "controller:\n  address: 10.1.1.1:6634\n")
    assert (
        cfg.controller.controller_host,
        cfg.controller.controller_port,
        cfg.controller.controllers,
    ) == ("10.1.1.1", 6634, [])
    assert controller_names(cfg) == ["10.1.1.1:6634"]


def test_controllers_alongside_the_default_and_in_its_place(tmp_path):
    _, cfg = _load(
        tmp_path,
        "controller:\n  address: 127.0.0.1:6633\n  name: main\n  controllers:\n"
        "    - {address: 127.0.0.1:6634, name: lbctl}\n    - {address: 127.0.0.2:6635}\n"
        "apps:\n  - {name: lb, controller: lbctl}\n  - {name: r, cookie: 0x10, mask: 0xff}\n",
    )
    assert controller_names(cfg) == ["main", "lbctl", "127.0.0.2:6635"]
    assert [(c.host, c.port) for c in cfg.controller.controllers] == [
        ("127.0.0.1", 6634),
        ("127.0.0.2", 6635),
    ]
    assert [(a.name, a.controller, a.cookie) for a in cfg.apps] == [
        ("lb", "lbctl", None),
        ("r", None, 0x10),
    ]
    (tmp_path / "b").mkdir()
    _, cfg = _load(
        tmp_path / "b",
        "controller:\n  controllers:\n    - {address: 127.0.0.1:7000, name: x}\n"
        "    - {address: 127.0.0.1:7001, name: y}\n",
    )
    assert (cfg.controller.controller_port, cfg.controller.controller_name) == (7000, "x")
    assert controller_names(cfg) == ["x", "y"]


@pytest.mark.parametrize(
    "extra, where, needle, msg",
    [
        (
            "controller:\n  controllers:\n    - {name: x}\n",
            "controller.controllers[0].address",
            "name: x",
            "required key missing",
        ),
        (
            "controller:\n  name: a\n  controllers:\n    - {address: 127.0.0.1:1, name: a}\n",
            "controller.controllers[0].name",
            "name: a}",
            "named twice",
        ),
        (
            "controller:\n  controllers:\n    - {address: 127.0.0.1:1, colour: red}\n",
            "controller.controllers[0].colour",
            "colour",
            "unknown key",
        ),
        (
            "apps:\n  - {name: lb, controller: nosuch}\n",
            "apps[0].controller",
            "nosuch",
            "no controller named 'nosuch'",
        ),
        ("apps:\n  - {name: lb}\n", "apps[0].cookie", "name: lb", "required key missing"),
        (
            "controller:\n  name: c\napps:\n  - {name: a, controller: c}\n  - {name: b, controller: c}\n",
            "apps[1].controller",
            "name: b",
            "belongs to 'a' already",
        ),
    ],
)
def test_errors_name_the_line_and_field(tmp_path, extra, where, needle, msg):
    err, lines = _error(tmp_path, extra)
    assert f"{where}: " in err and msg in err, err
    line = int(err.split(":")[1])
    assert needle in lines[line - 1], (err, lines[line - 1])
