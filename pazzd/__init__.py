"""PAZZ pazzd package."""

from __future__ import annotations

import importlib.metadata


def version() -> str:
    """The installed package's version ("unknown" when run from a tree never installed)."""
    try:
        return importlib.metadata.version("pazz")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"
