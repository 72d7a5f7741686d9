"""Inclusion and disjointness of two BDDs, answered without building a BDD.

dd answers `u <= v` by building `v | ~u`, and `u & v == false` builds the conjunction. On
the large regions that ACLs give the partition's projections, building those nodes is
most of the cost of the question. CUDD's Cudd_bddLeq answers it from the two BDDs and
its computed table alone, and builds nothing. dd does not wrap it: it is called through
ctypes in dd's own CUDD library, with the manager and node pointers that dd's Function
objects hold. Their layout is checked against what dd tells in Python (the Function's
manager object, its node as int(u)) before the first call; where it does not match,
`Leq` answers with dd's operators instead (`Leq.native` says which).
"""

from __future__ import annotations

import ctypes
import logging

import dd.cudd as cudd

log = logging.getLogger(__name__)

# dd.cudd.Function as Cython lays it out (dd 0.6, 64-bit): the object header, the
# vtable, __weakref__, then `BDD bdd`, `DdManager *manager` and `DdNode *node`.
_BDD_AT, _MANAGER_AT, _NODE_AT = 32, 40, 48


def _cudd_leq():
    try:
        fn = ctypes.CDLL(cudd.__file__).Cudd_bddLeq
    except (OSError, AttributeError) as e:  # a dd built without exported CUDD symbols
        log.info("Cudd_bddLeq not reachable (%s): inclusion tests build BDDs", e)
        return None
    fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
    fn.restype = ctypes.c_int
    return fn


_LEQ = _cudd_leq()


def _word(obj, offset: int) -> int:
    return ctypes.c_void_p.from_address(id(obj) + offset).value or 0


def _manager_of(u) -> int | None:
    """u's DdManager pointer, when u's layout is the one above (else None)."""
    if cudd.Function.__basicsize__ < _NODE_AT + 8:
        return None
    # int(u) is dd's node pointer plus 2 (dd.cudd._ddref_to_int).
    if _word(u, _BDD_AT) != id(u.bdd) or _word(u, _NODE_AT) != int(u) - 2:
        return None
    return _word(u, _MANAGER_AT) or None


class Leq:
    """within(u, v): u ⊆ v; disjoint(u, v): u ∩ v = ∅. For BDDs of one dd.cudd manager.

    `native_args` is (Cudd_bddLeq's address, the manager, the node's offset in a Function,
    the Function type) for compiled callers (cpc._leqc), None where dd's operators answer."""

    def __init__(self, bdd: cudd.BDD) -> None:
        mgr = _manager_of(bdd.true) if _LEQ is not None else None
        self.native_args = None
        # Both constants must give the same manager: a layout read by chance would not.
        if mgr is None or mgr != _manager_of(bdd.false):
            self.native = False
            false = bdd.false
            self.within = lambda u, v: u & ~v == false
            self.disjoint = lambda u, v: u & v == false
            return
        self.native = True
        leq = _LEQ
        fn = ctypes.cast(leq, ctypes.c_void_p).value
        self.native_args = (fn, mgr, _NODE_AT, cudd.Function)

        # The Functions u and v hold their nodes referenced for the call.
        def within(u, v) -> bool:
            return leq(mgr, int(u) - 2, int(v) - 2) == 1

        def disjoint(u, v) -> bool:
            # ~v is v's node with the complement bit (CUDD's Cudd_Not).
            return leq(mgr, int(u) - 2, (int(v) - 2) ^ 1) == 1

        self.within, self.disjoint = within, disjoint
