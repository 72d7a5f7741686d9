"""The pazzd command's first instructions, before the imports that take half a second:
from here on SIGHUP is remembered (a reload once started) instead of the default death,
and SIGTERM or SIGINT exit 0 at once (nothing is started yet), until the event loop's
handlers take over (pazzd.main; from then on a stop ends the start at its next step).

They are also unblocked here: a launcher that must signal pazzd during the interpreter's
own start (the few milliseconds before any of pazzd's code runs, when the kernel's default
action still applies) starts it with them blocked, and pazzd then receives them pending.
This module imports nothing but `os`, `signal` and `sys`; the package's __init__ nothing.
"""

from __future__ import annotations

import os
import signal

__all__ = ["EARLY_SIGNALS", "hold_signals", "run"]

EARLY_SIGNALS = (signal.SIGHUP, signal.SIGTERM, signal.SIGINT)


def _exit_now(signum: int, _frame) -> None:
    os.write(
        2,
        f"pazzd: {signal.Signals(signum).name} before the start: stopping, nothing started\n".encode(),
    )
    os._exit(0)


def hold_signals() -> list[int]:
    """Catch EARLY_SIGNALS (SIGHUP into the list returned), then unblock them."""
    got: list[int] = []
    signal.signal(signal.SIGHUP, lambda signum, _frame: got.append(signum))
    signal.signal(signal.SIGTERM, _exit_now)
    signal.signal(signal.SIGINT, _exit_now)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, EARLY_SIGNALS)
    return got


def run() -> int:
    """The `pazzd` command (pyproject's script; `python -m pazzd` is the same)."""
    import sys

    if len(sys.argv) > 1 and sys.argv[1] in ("collector", "worker"):
        from pazzd.scaleout.cli import main as scaleout_main  # the scale-out components

        return scaleout_main(sys.argv[1:])
    early = hold_signals()
    from pazzd.main import main

    return main(early=early)
