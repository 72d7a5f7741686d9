"""PAZZ pazzd package."""

from __future__ import annotations


def version() -> str:
    """The installed package's version ("unknown" when run from a tree never installed)."""
    import importlib.metadata  # here, not above: `python -m pazzd` runs this file first

    try:
        return importlib.metadata.version("pazz")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"
