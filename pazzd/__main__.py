"""`python -m pazzd --config FILE` runs the daemon."""

import signal
import sys

# Before the imports, which take a while: SIGHUP or SIGTERM now is remembered and acted
# on once the daemon runs, not the default death (pazzd.main.hold_signals does the same).
_early: list[int] = []
for _sig in (signal.SIGHUP, signal.SIGTERM, signal.SIGINT):
    signal.signal(_sig, lambda signum, _frame: _early.append(signum))

from pazzd.main import main  # noqa: E402

sys.exit(main(early=_early))
