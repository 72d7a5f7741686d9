"""Suite-wide fixtures."""

from __future__ import annotations

import gc

import pytest


@pytest.fixture(autouse=True, scope="module")
def _release_frozen_objects():
    """Model builds freeze the heap (cpc.gcpause.gc_paused) so that the cyclic GC skips the
    built model; in one long test process that would also keep every earlier module's
    models and their cyclic garbage. Unfreeze and collect after each module."""
    yield
    gc.unfreeze()
    gc.collect()
