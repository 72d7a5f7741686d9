"""Dependencies between our packages flow one way: nothing outside pazzd imports pazzd,
cpc imports nothing of ours, and each package imports only the ones listed below.

Every import statement of every module counts, at module level or inside a function or a
`TYPE_CHECKING` block, read from the source (ast), so an import that only runs on some
path cannot hide.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
OURS = {"cpc", "fuzzer", "tester", "ofwire", "pazzapi", "pazzdata", "pazzd", "pazzlab"}
# package -> the packages of ours it may import (pazzlab runs pazzd as a process).
ALLOWED = {
    "cpc": set(),
    "pazzapi": set(),
    "ofwire": {"cpc"},
    "fuzzer": {"cpc"},
    "tester": {"cpc"},
    "pazzdata": {"cpc"},
    "pazzd": {"cpc", "fuzzer", "tester", "ofwire", "pazzapi"},
    "pazzlab": {"cpc", "fuzzer", "tester", "ofwire", "pazzapi", "pazzdata"},
}


def imports_in(path: Path) -> list[tuple[int, str]]:
    """[(line, top-level package)] of every absolute import of ours in one source file."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            names = [node.module]
        else:
            continue
        out += [(node.lineno, n.split(".")[0]) for n in names if n.split(".")[0] in OURS]
    return out


def imports_of(pkg: str) -> list[tuple[str, int, str]]:
    """[(file, line, top-level package)] of pkg's imports of our other packages."""
    return [
        (str(path.relative_to(REPO)), line, top)
        for path in sorted((REPO / pkg).rglob("*.py"))
        for line, top in imports_in(path)
        if top != pkg
    ]


def test_every_package_is_listed():
    packages = {p.parent.name for p in REPO.glob("*/__init__.py")} - {"bench", "tests"}
    assert packages == OURS == set(ALLOWED)


@pytest.mark.parametrize("pkg", sorted(ALLOWED))
def test_imports_follow_the_layers(pkg):
    bad = [
        f"{f}:{line} imports {top}" for f, line, top in imports_of(pkg) if top not in ALLOWED[pkg]
    ]
    allowed = sorted(ALLOWED[pkg]) or "nothing of ours"
    assert not bad, f"{pkg} may import only {allowed}:\n" + "\n".join(bad)


def test_nothing_outside_pazzd_imports_pazzd():
    bad = [
        f"{f}:{line}"
        for pkg in OURS - {"pazzd"}
        for f, line, top in imports_of(pkg)
        if top == "pazzd"
    ]
    assert not bad, "\n".join(bad)


def test_the_scan_sees_every_kind_of_import(tmp_path):
    src = tmp_path / "m.py"
    src.write_text(
        "import os\n"
        "import pazzd.api as a\n"
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from cpc.rules import Match\n"
        "def f():\n"
        "    from pazzd import daemon\n"
        "    from . import sibling\n"
        "class C:\n"
        "    def g(self):\n"
        "        import ofwire, pazzapi.client\n"
    )
    assert sorted(imports_in(src)) == [
        (2, "pazzd"),
        (5, "cpc"),
        (7, "pazzd"),
        (11, "ofwire"),
        (11, "pazzapi"),
    ]
    assert {top for _, _, top in imports_of("pazzlab")} == ALLOWED["pazzlab"]
