"""`python -m pazzd --config FILE` runs the daemon."""

import sys

from pazzd.daemon import main

sys.exit(main())
