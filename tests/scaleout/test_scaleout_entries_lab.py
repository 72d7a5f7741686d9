"""Entry confirmation in scale-out mode on the lab: the switches' sFlow goes to a `pazzd
collector`, two `pazzd worker`s judge it over a real nats-server and pass the probes'
reports to the primary unjudged. The primary's entry confirmations work as with pazzd
alone (tests/pazzd/test_entries_lab.py, whose steps these are): the start-up entries and
a new one are confirmed, and an entry s1 loses, or holds wider, behind the controller's
back is an agent finding for exactly that switch and entry."""

from __future__ import annotations

import pytest

from pazzapi import call
from pazzlab import natsserver
from tests.pazzd.test_entries_lab import (
    agents,
    delay_probes,
    lost_drop,
    route_actions,
    split_confirmed,
    start_up_confirmed,
    widened_route,
)
from tests.pazzd.test_intents_lab import controlled_lab, wait_for

pytestmark = [
    pytest.mark.ovs,
    pytest.mark.slow,
    pytest.mark.skipif(not natsserver.available(), reason="nats-server not installed"),
]

WORKERS = 2


@pytest.fixture
def scaled_lab(tmp_path):
    with controlled_lab(tmp_path, "scaleout-entries", scaleout=WORKERS) as out:
        yield out


def scaleout(sock: str) -> dict:
    return call(sock, "status")["scaleout"]


def judging(sock: str) -> bool:
    """Every worker reports to the primary and holds shards."""
    so = scaleout(sock)
    return len(so["shards"]) == WORKERS and all(so["shards"].values())


def probe_reports(sock: str) -> int:
    """Probe reports the workers passed to the primary."""
    return sum(w.get("probe_reports", 0) for w in scaleout(sock)["workers"].values())


def logs(workdir) -> str:
    names = ["collector", *(f"w{i}" for i in range(WORKERS))]
    return "\n".join(
        f"--- {n}\n" + (workdir / f"{n}.log").read_text(errors="replace")[-1500:] for n in names
    )


def test_scaleout_entry_confirmations(scaled_lab):
    lab, run, ctl, workdir = scaled_lab
    sock = run.sock
    assert wait_for(lambda: judging(sock), timeout=90), (scaleout(sock), logs(workdir))
    # Every sample reaches pazzd through the workers: its own listener hears nothing.
    assert call(sock, "status")["tester"]["datagrams"] == 0

    acts = route_actions(lab, 1)
    c0 = start_up_confirmed(sock)
    # Almost all judged, as with pazzd alone: a probe round must hear of the reports the
    # workers judged to confirm a probe the model drops.
    assert agents(sock)["unjudged"] * 10 <= c0, agents(sock)
    split_confirmed(sock, ctl, acts, c0)
    before = probe_reports(sock)
    assert before > 0, scaleout(sock)
    delay_probes(run)
    lost_drop(lab, sock, ctl, workdir)
    widened_route(lab, run, ctl, workdir, acts)
    assert probe_reports(sock) > before
    assert call(sock, "status")["tester"]["datagrams"] == 0
