"""pazzd with its fault database on a file system that fills up: the faults it cannot
store wait in memory, and `pazzctl faults` (the API's `faults` answer) and the metric
pazz_faults_open show them all, marked unsaved, the whole time. Once there is room
again each is stored once.

The file system is a real tmpfs of its own, filled by another file (ENOSPC, SQLite's
SQLITE_FULL): mounting it needs root."""

from __future__ import annotations

import contextlib
import os
import socket
import sqlite3
import subprocess
import time

import pytest

from cpc.refdp import RefDataPlane
from pazzdata import workloads
from pazzlab.demo import metrics_of as scrape
from pazzlab.flowhash import select_bucket
from tester.emit import ReferenceEmitter, agent_of
from tests.pazzd.helpers import Pazzd, base_config, pazzctl, wait_for, write_config
from tests.pazzd.test_workers import BASE, PazzdWorkers, _traffic

N = 20
MOUNT_SIZE = "4m"


@contextlib.contextmanager
def small_fs(path):
    if os.geteuid() != 0:
        pytest.skip("mounting the tmpfs that fills up needs root")
    path.mkdir()
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={MOUNT_SIZE}", "tmpfs", str(path)], check=True
    )
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def fill(path) -> None:
    """Write a file until the file system says it is full (ENOSPC)."""
    fd = os.open(path / "filler", os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        for size in (1 << 16, 512):
            with contextlib.suppress(OSError):
                while os.write(fd, b"\0" * size):
                    pass
    finally:
        os.close(fd)


def faulty_reports(wl) -> list[tuple]:
    """N reports of flows along N distinct paths, each with a wrong Verify_Rule: N match
    faults (one sample each; a match fault's location is its path's switches)."""
    ref = RefDataPlane(wl.topo, wl.entries, wl.groups, select=select_bucket)
    out, paths = [], set()
    for ingress, h in _traffic(wl):
        for dl in ref.send(ingress, h):
            path = tuple(hop.dpid for hop in dl.hops)
            if dl.kind == "egress" and path not in paths:
                paths.add(path)
                out.append((dl.egress, h, dl.verify_port, dl.verify_rule ^ 0x5A5A))
        if len(out) >= N:
            return out[:N]
    raise AssertionError(f"only {len(out)} flows along distinct paths")


def send(addr, reports) -> None:
    """Each agent from its own socket (as switches do; with workers, one agent stays on one)."""
    em = ReferenceEmitter(base=BASE)
    for r in reports:
        em.add(*r)
    socks: dict[str, socket.socket] = {}
    try:
        for dg in em.flush(per_datagram=4):
            agent = socket.inet_ntoa(dg[8:12])
            s = socks.setdefault(agent, socket.socket(socket.AF_INET, socket.SOCK_DGRAM))
            s.sendto(dg, addr)
    finally:
        for s in socks.values():
            s.close()


def open_total(m: dict) -> float:
    return sum(v for k, v in m.items() if k.startswith("pazz_faults_open{"))


def stored_rows(db) -> list[tuple]:
    """The store's rows as a reader of the file sees them (not through pazzd)."""
    with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as c:
        return c.execute("SELECT id, kind, location, header_class, count FROM faults").fetchall()


@pytest.mark.parametrize("workers", [1, 2])
def test_unsaved_faults_are_shown_and_counted_then_stored_once(tmp_path, workers):
    wl = workloads.generate("grid", 3, 60, rule_ids=True, acls=1)  # 3x3: enough paths
    reports = faulty_reports(wl)
    with small_fs(tmp_path / "db") as dbdir:
        db = dbdir / "faults.db"
        cfg = base_config(tmp_path, database=str(db))
        wl.write(tmp_path / "topology.yaml", tmp_path / "rules.jsonl")  # over base_config's
        cfg["sflow"]["interfaces"] = [
            {"agent": agent_of(d), "ifindex": BASE + p, "port": f"{d}:{p}"}
            for d in sorted(wl.topo.switches)
            for p in wl.topo.ports_of(d)
        ]
        cfg["tester"] = {"corroborate": 1}
        path = write_config(tmp_path / "pazzd.yaml", cfg)
        d = PazzdWorkers(path, workers) if workers > 1 else Pazzd(path)
        try:
            st = d.wait_ready()
            host, port = st["sflow"].rsplit(":", 1)
            fill(dbdir)
            send((host, int(port)), reports)

            def api_faults():
                return d.call("faults")

            got = wait_for(lambda: len(api_faults()) >= N, timeout=30)
            assert got, (api_faults(), d.log_text()[-3000:])
            # Several ticks (0.5 s), each retrying the store and failing: nothing goes
            # missing from the API or the metric, and nothing shows twice.
            end = time.monotonic() + 4.0
            polls = 0
            while time.monotonic() < end:
                faults, m = api_faults(), scrape(st["metrics"])
                assert len(faults) == N, faults
                keys = {(f["kind"], f["location"], f["header_class"]) for f in faults}
                assert len(keys) == N
                assert all(f["state"] == "open" for f in faults)
                unsaved = [f for f in faults if f["saved"] is False]
                assert open_total(m) == N, m
                # With workers the two numbers come from separate reports: equal once settled.
                if workers == 1:
                    assert m["pazz_faults_unrecorded"] == len(unsaved)
                polls += 1
                time.sleep(0.3)
            assert polls >= 5
            # The disk really was full: the file holds fewer rows than pazzd shows.
            saved_while_full = len(stored_rows(db))
            assert saved_while_full < N
            assert len(unsaved) == N - saved_while_full
            assert all(f["id"] is None for f in unsaved)
            assert m["pazz_fault_store_errors_total"] > 0
            assert m["pazz_faults_dropped_total"] == 0
            table = pazzctl(d.sock, "faults").stdout
            marked = [ln for ln in table.splitlines() if "open, unsaved" in ln]
            assert len(marked) == len(unsaved), table
            assert f"{len(unsaved)} fault(s) unsaved" in table

            (dbdir / "filler").unlink()  # room again

            def all_saved():
                f = api_faults()
                return len(f) == N and all(x["saved"] for x in f) and f

            faults = wait_for(all_saved, timeout=30)
            assert faults, (api_faults(), d.log_text()[-3000:])
            rows = stored_rows(db)
            assert len(rows) == N
            assert len({r[0] for r in rows}) == N
            assert {r[0] for r in rows} == {f["id"] for f in faults}
            assert all(r[4] == 1 for r in rows), rows  # one sample each, recorded once
            m = wait_for(lambda: (x := scrape(st["metrics"]))["pazz_faults_unrecorded"] == 0 and x)
            assert m and open_total(m) == N
            detected = sum(v for k, v in m.items() if k.startswith("pazz_faults_detected_total{"))
            assert detected == N
            assert "unsaved" not in pazzctl(d.sock, "faults").stdout
        finally:
            d.stop()
