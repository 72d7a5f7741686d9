"""Suffixes stored across updates (cpc.walk.Walker.suffixes) give what a walk would give.

A stored node holds for every class with the actions it met, while the groups, the ports'
state and the elements that answer for each port stay as they were; the model forgets the
stored nodes when one of them changes. A commit uses them only when it walks several
classes (cpc.index.XMEMO_MIN_CLASSES), which the small random networks of the property
tests seldom do: here every commit uses them, and the property tests that cover groups,
ports going down and up, new in_port elements, ACL tables and rewrites run again. Each
forgetting was removed in turn and one of these tests failed each time.
"""

from __future__ import annotations

import pytest

from cpc import index
from tests.cpc import test_entryprobes, test_filters_vs_bruteforce, test_model_vs_bruteforce

PROPERTY_TESTS = [
    test_model_vs_bruteforce.test_expected_equals_bruteforce,
    test_model_vs_bruteforce.test_incremental_equals_rebuilt,
    test_model_vs_bruteforce.test_ports_down_and_up,
    test_model_vs_bruteforce.test_loops_equal_bruteforce,
    test_filters_vs_bruteforce.test_acl_networks_equal_bruteforce_and_rebuilt_after_every_flowmod,
    test_entryprobes.test_probes_against_bruteforce,
]


@pytest.fixture(autouse=True)
def stored_suffixes_on_every_commit(monkeypatch):
    monkeypatch.setattr(index, "XMEMO_MIN_CLASSES", 0)


@pytest.mark.parametrize("test", PROPERTY_TESTS, ids=lambda t: t.__name__)
def test_with_suffixes_stored_on_every_commit(test):
    test()
