"""pyproject.toml: an SPDX license with its file, a bounded build backend, and no
dependency that nothing imports."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from setuptools.config.pyprojecttoml import read_configuration

REPO = Path(__file__).resolve().parents[1]
PYPROJECT = REPO / "pyproject.toml"
# Distribution name -> the module it provides, where they differ.
MODULES = {"os-ken": "os_ken", "prometheus-client": "prometheus_client", "pyyaml": "yaml"}


def test_license_is_spdx_with_its_file():
    project = tomllib.loads(PYPROJECT.read_text())["project"]
    assert project["license"] == "Apache-2.0"
    for f in project["license-files"]:
        assert (REPO / f).read_text().lstrip().startswith("Apache License")
    read_configuration(PYPROJECT)  # setuptools validates the table (PEP 639 fields included)


def test_build_backend_has_an_upper_bound():
    (req,) = tomllib.loads(PYPROJECT.read_text())["build-system"]["requires"]
    assert re.fullmatch(r"setuptools>=[\d.]+,<\d+", req), req


def test_every_dependency_is_imported():
    deps = tomllib.loads(PYPROJECT.read_text())["project"]["dependencies"]
    names = [re.match(r"[A-Za-z0-9_.\-]+", d).group(0).lower() for d in deps]
    source = "\n".join(
        p.read_text()
        for pkg in ("cpc", "fuzzer", "tester", "ofwire", "pazzapi", "pazzd")
        for p in (REPO / pkg).rglob("*.py")
    )
    for name in names:
        mod = MODULES.get(name, name)
        assert re.search(rf"^\s*(import|from) {mod}\b", source, re.M), f"{name} is never imported"


def test_the_web_views_files_are_package_data():
    from fnmatch import fnmatch

    from pazzd.ui.server import STATIC

    globs = tomllib.loads(PYPROJECT.read_text())["tool"]["setuptools"]["package-data"]["pazzd.ui"]
    static = REPO / "pazzd" / "ui" / "static"
    assert set(STATIC) <= {p.name for p in static.iterdir()}
    for p in static.iterdir():  # whatever is there gets installed with `pip install .`
        assert any(fnmatch(f"static/{p.name}", g) for g in globs), p.name


def test_every_package_is_installed():
    include = tomllib.loads(PYPROJECT.read_text())["tool"]["setuptools"]["packages"]["find"]
    packages = {p.parent.name for p in REPO.glob("*/__init__.py")} - {"bench", "tests"}
    assert {p.rstrip("*") for p in include["include"]} == packages
