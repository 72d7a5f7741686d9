"""Debian tools that some tests need (deploy/apt-packages.txt installs them for `make test`)."""

from __future__ import annotations

import os
import shutil

import pytest


def require_tool(name: str, package: str) -> str:
    """The tool's path; skips when it is missing, except in CI (CI=true), where it fails."""
    path = shutil.which(name)
    if path:
        return path
    why = f"{name} not found: install the Debian package {package} (deploy/apt-packages.txt)"
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(why)
    pytest.skip(why)
