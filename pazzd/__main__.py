"""`python -m pazzd --config FILE` runs the daemon."""

import sys

# Signals first (pazzd.launch): the imports of the daemon take a while.
from pazzd.launch import run

sys.exit(run())
