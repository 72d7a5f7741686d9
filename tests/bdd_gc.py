"""A check shared by the tests that a model's BDD manager goes by reference counting."""

from __future__ import annotations

import gc
import sys
import weakref


def assert_freed_by_refcount(held: list) -> None:
    """Drop `held` (a model first, then what else holds its BDDs), which the caller must
    not reference otherwise: the model's CUDD manager must go at once, by reference
    counting. Left to the cyclic GC, dd may free the manager while nodes are still
    referenced; it then skips Cudd_Quit (an ignored AssertionError) and every node of the
    manager leaks."""
    manager = weakref.ref(held[0].space.bdd)
    unraisable = []
    hook, sys.unraisablehook = sys.unraisablehook, unraisable.append
    gc.collect()
    gc.disable()
    try:
        held.clear()
        assert manager() is None, "the model's BDD manager outlived it"
        gc.collect()
    finally:
        gc.enable()
        sys.unraisablehook = hook
    assert [str(u.exc_value) for u in unraisable] == []
