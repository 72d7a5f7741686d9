"""YAML loading that remembers line numbers, so errors can name the line of a bad field."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import yaml


class PosDict(dict):
    """A mapping that knows its own line and the line of each key."""

    line: int = 0
    key_lines: dict


class PosList(list):
    line: int = 0
    item_lines: list


class _Loader(yaml.SafeLoader):
    pass


def _no_duplicate_keys(loader, node) -> None:
    """A key given twice is an error (PyYAML keeps the last one silently). Keys that a merge
    (`<<`) brings in may be overridden, as YAML allows."""
    first: dict = {}
    for key_node, _ in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":
            continue
        key = loader.construct_object(key_node, deep=True)
        try:
            seen = key in first
        except TypeError:  # an unhashable key: the constructor reports it
            continue
        if not seen:
            first[key] = key_node.start_mark.line + 1
        else:
            line = first[key]
            raise yaml.constructor.ConstructorError(
                None,
                None,
                f"{key}: duplicate key (first given on line {line})",
                key_node.start_mark,
            )


def _mapping(loader, node):
    _no_duplicate_keys(loader, node)
    loader.flatten_mapping(node)
    d = PosDict()
    d.line = node.start_mark.line + 1
    d.key_lines = {}
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        d[key] = loader.construct_object(value_node, deep=True)
        d.key_lines[key] = key_node.start_mark.line + 1
    return d


def _sequence(loader, node):
    lst = PosList(loader.construct_object(n, deep=True) for n in node.value)
    lst.line = node.start_mark.line + 1
    lst.item_lines = [n.start_mark.line + 1 for n in node.value]
    return lst


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping)
_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_SEQUENCE_TAG, _sequence)


class YamlError(ValueError):
    pass


MAX_YAML_BYTES = 64 << 20  # a config or topology is far smaller; /dev/zero is not


def read_text(path: str | Path, limit: int, error=ValueError) -> str:
    """The UTF-8 text of a regular file of at most `limit` bytes; anything else (a device,
    a directory, a FIFO, a bigger file, bytes that are not UTF-8) raises error(msg) with
    a one-line message naming the file."""
    path = Path(path)
    try:
        with open(path, "rb") as f:
            st = os.fstat(f.fileno())
            if not stat.S_ISREG(st.st_mode):
                raise error(f"{path}: not a regular file")
            if st.st_size > limit:
                raise error(f"{path}: {st.st_size} bytes, more than the {limit} allowed")
            data = f.read(limit + 1)
    except OSError as e:
        raise error(f"{path}: {e.strerror or e}") from None
    if len(data) > limit:
        raise error(f"{path}: more than the {limit} bytes allowed")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        raise error(f"{path}:{line}: not UTF-8 text (byte 0x{data[e.start]:02x})") from None


def load(path: str | Path):
    path = Path(path)
    text = read_text(path, MAX_YAML_BYTES, YamlError)
    try:
        return yaml.load(text, Loader=_Loader)  # noqa: S506 - SafeLoader subclass
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        raise YamlError(f"{where}: {getattr(e, 'problem', None) or e}") from None


def line_of(container, key=None) -> int:
    """Best line for container[key] (or the container itself)."""
    if key is not None:
        if isinstance(container, PosDict) and key in container.key_lines:
            return container.key_lines[key]
        if (
            isinstance(container, PosList)
            and isinstance(key, int)
            and key < len(container.item_lines)
        ):
            return container.item_lines[key]
    return getattr(container, "line", 0)
