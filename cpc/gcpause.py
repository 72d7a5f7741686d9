"""The model's garbage-collection policy: builds and updates run with Python's cyclic GC
paused, then freeze what they built.

The model allocates many small containers and makes no reference cycles
(tests/cpc/test_model_gc.py). Left on, the collector can only rescan them: it tripled
build times, and took a tenth of the Stanford replay as walks allocate their paths.
Freezing keeps them out of later collections; reference counting still frees them.
"""

from __future__ import annotations

import functools
import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def gc_paused() -> Iterator[None]:
    """Run a model build with Python's cyclic GC paused, then freeze what it built.

    The young generations are collected first, so that freezing keeps none of the cycles
    the rest of the process just made; not the old one, which before a first build can be
    the whole heap. Updates do the same in gc_paused_update, with their own rules.
    """
    was_enabled = gc.isenabled()
    if was_enabled:
        gc.collect(1)
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
        gc.freeze()


_seen_collections: list[tuple[int, int]] = [(-1, -1)]  # (young-1, full) after our last


def _collect_unfrozen() -> None:
    """Collect every object not frozen. Objects get into the old generation only by a
    collection other than ours since our last one: without one, the young generations
    are all there is. (A full collection also empties the interpreter's free lists of
    tuples, lists and dicts, which the update would then allocate afresh.)"""
    stats = gc.get_stats()
    young, full = stats[1]["collections"], stats[2]["collections"]
    if (young, full) != _seen_collections[0]:
        gc.collect()
        _seen_collections[0] = (young, full + 1)
    else:
        gc.collect(1)
        _seen_collections[0] = (young + 1, full)


def gc_paused_update(method):
    """A model update, run as under gc_paused() (written out: this runs on every update),
    except that a small update is not frozen."""

    @functools.wraps(method)
    def run(self, *args, **kwargs):
        if not gc.isenabled():  # within a build, or the collector is off anyway
            return method(self, *args, **kwargs)
        _collect_unfrozen()
        gc.disable()
        try:
            return method(self, *args, **kwargs)
        finally:
            gc.enable()
            # Freeze only after an update that allocated enough for a collection to run:
            # each freeze also keeps whatever else is alive from later collections, and
            # the few objects of a small update cost the young collection little.
            if gc.get_count()[0] >= gc.get_threshold()[0]:
                gc.freeze()

    return run
