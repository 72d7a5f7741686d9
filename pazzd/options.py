"""How a setting of pazzd.yaml is declared: a field of its section's dataclass.

`option(default, lo=, hi=)` declares a plain value read from the YAML key of the field's
own name, with its bounds (pazzd.configread.read_section reads every such field; a number
needs both bounds, tests/pazzd/test_config_bounds.py checks that);
`restart=True` marks a setting that takes effect only at the next restart (a reload warns
and keeps the running value; pazzd.config.RESTART_ONLY lists them). Fields read another
way (addresses, lists, TLS) carry only `RESTART` when they are restart-only.
"""

from __future__ import annotations

from dataclasses import field
from typing import Any

__all__ = ["RESTART", "option"]

RESTART = {"restart": True}


def option(default: Any, *, lo=None, hi=None, restart: bool = False) -> Any:
    return field(default=default, metadata={"option": True, "lo": lo, "hi": hi, "restart": restart})
