"""The tester tests' network: a 3x3 grid of pazzdata.workloads with the real model."""

from __future__ import annotations

import pytest

from cpc.model import Model
from pazzdata import workloads


@pytest.fixture(scope="module")
def net():
    wl = workloads.generate("grid", 3, 200, rule_ids=True, acls=2)
    m = Model(wl.topo)
    m.add_entries(wl.entries, wl.groups)
    m.build()
    return wl, m
