"""The config's sections as dataclasses: every option() field is read from its key with
its bounds, and every error names the file, the line and the dotted key; the restart-only
settings resolve; a section's values reach the Config it belongs to."""

from __future__ import annotations

import dataclasses

import pytest

from pazzd.config import RESTART_ONLY, SECTIONS, Config, ConfigError, load_config, setting

from .helpers import base_config, write_config

OPTIONS = [
    (key, f)
    for key, (sec, _) in SECTIONS.items()
    for f in dataclasses.fields(sec)
    if f.metadata.get("option")
]
KIND = {"bool": bool, "int": int, "float": float, "float | None": float}


def _write(tmp_path, key: str, name: str, value):
    cfg = base_config(tmp_path)
    cfg.setdefault(key, {})[name] = value
    return write_config(tmp_path / "pazzd.yaml", cfg)


def _good(kind, default, lo, hi):
    """A value within the bounds that is not the default."""
    if kind is bool:
        return not default
    base = lo if lo is not None else 0
    for v in (hi, base + 1, base + 2, lo):
        if v is not None and v != default and (lo is None or v >= lo):
            return kind(v)
    raise AssertionError("no value to try")


def _line_of(text: str, key: str, name: str) -> int:
    lines = text.splitlines()
    start = lines.index(f"{key}:")
    return next(i for i in range(start, len(lines)) if lines[i].strip().startswith(f"{name}:")) + 1


def test_every_section_is_a_config_field_of_its_type(tmp_path):
    cfg = load_config(write_config(tmp_path / "c.yaml", base_config(tmp_path)))
    names = {f.name for f in dataclasses.fields(Config)}
    for key, (sec, _) in SECTIONS.items():
        assert key in names and type(getattr(cfg, key)) is sec


@pytest.mark.parametrize("key, f", OPTIONS, ids=[f"{k}.{f.name}" for k, f in OPTIONS])
def test_an_option_is_read_from_its_key_with_its_bounds(tmp_path, key, f):
    kind, lo, hi = KIND[f.type], f.metadata["lo"], f.metadata["hi"]
    dotted = f"{key}.{f.name}"
    # A value of the wrong type: the error names the file, the key's line and the key.
    path = _write(tmp_path, key, f.name, "nonsense")
    line = _line_of(path.read_text(), key, f.name)
    with pytest.raises(ConfigError) as e:
        load_config(path)
    assert str(e.value).startswith(f"{path}:{line}: {dotted}: must be")
    # Out of bounds, on either side.
    for bad, word in ((lo, "at least"), (hi, "at most")):
        if bad is not None:
            v = bad + (1 if word == "at most" else -1) * (1 if kind is int else bad / 2 or 1)
            with pytest.raises(ConfigError, match=f"{dotted}: must be {word}"):
                load_config(_write(tmp_path, key, f.name, v))
    # A good value, not the default, reaches the section.
    good = _good(kind, f.default, lo, hi)
    assert setting(load_config(_write(tmp_path, key, f.name, good)), dotted) == good


def test_restart_only_settings_resolve(tmp_path):
    cfg = load_config(write_config(tmp_path / "c.yaml", base_config(tmp_path)))
    assert "sflow.sampling_rate" in RESTART_ONLY and "controller.listen_port" in RESTART_ONLY
    for key in RESTART_ONLY:
        setting(cfg, key)  # raises AttributeError for a name that is no setting
    assert "fuzz.rate" not in RESTART_ONLY  # reloaded live
