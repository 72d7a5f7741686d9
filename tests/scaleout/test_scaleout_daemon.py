"""A real nats-server (JetStream, file storage), the primary pazzd, `pazzd collector` and two
`pazzd worker`s as processes. Reports come from the reference data plane (cpc.refdp, not the
model) in real sFlow datagrams over UDP to the collector. The workers judge them against
their model replicas; the faults the tags betray are stored by the primary, once each,
across a worker killed with SIGKILL and a nats-server restart."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time

import pytest

from cpc.refdp import RefDataPlane
from pazzdata import workloads
from pazzlab import natsserver
from pazzlab.flowhash import select_bucket
from tester.emit import ReferenceEmitter, agent_of
from tests.pazzd.helpers import Pazzd, base_config, free_port, pazzctl, write_config
from tests.pazzd.test_workers import BASE, _send, _traffic, _wait

pytestmark = pytest.mark.skipif(not natsserver.available(), reason="nats-server not installed")


class Proc:
    def __init__(self, args: list[str], log) -> None:
        self.config = args[args.index("--config") + 1]
        self.log = open(log, "w")  # noqa: SIM115
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "pazzd", *args], stdout=self.log, stderr=subprocess.STDOUT
        )

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


@pytest.fixture
def cluster(tmp_path):
    wl = workloads.generate("grid", 2, 40, rule_ids=True, acls=1)  # as tests/pazzd/helpers
    procs: list[Proc] = []
    with natsserver.NatsServer() as srv:
        cfg = base_config(tmp_path)
        cfg["sflow"]["interfaces"] = [
            {"agent": agent_of(d), "ifindex": BASE + p, "port": f"{d}:{p}"}
            for d in sorted(wl.topo.switches)
            for p in wl.topo.ports_of(d)
        ]
        cfg["scaleout"] = {"nats": srv.url, "shards": 4}
        conf = write_config(tmp_path / "pazzd.yaml", cfg)
        primary = Pazzd(conf)
        try:
            primary.wait_ready()
            col_port = free_port(socket.SOCK_DGRAM)
            procs.append(
                Proc(
                    ["collector", "--config", str(conf), "--listen", f"127.0.0.1:{col_port}"],
                    tmp_path / "collector.log",
                )
            )
            for name in ("w1", "w2"):
                procs.append(
                    Proc(
                        ["worker", "--config", str(conf), "--name", name], tmp_path / f"{name}.log"
                    )
                )

            def ready():
                assert all(p.proc.poll() is None for p in procs), _logs(tmp_path)
                return len(_scaleout(primary)["lag"]) == 2 and _scaleout(primary)

            st = _wait(ready, 60)
            assert st, primary.log_text()[-3000:] + _logs(tmp_path)
            yield wl, primary, ("127.0.0.1", col_port), srv, procs, tmp_path
        finally:
            for p in procs:
                p.stop()
            primary.stop()


def _logs(d) -> str:
    return "".join(f"\n--- {p.name}\n" + p.read_text()[-1500:] for p in d.glob("w*.log")) + (
        "\n--- collector\n" + (d / "collector.log").read_text()[-1500:]
        if (d / "collector.log").exists()
        else ""
    )


def _scaleout(d) -> dict:
    return json.loads(pazzctl(d.sock, "status", "--json").stdout).get("scaleout") or {}


def _sum(d, key: str) -> int:
    return sum(w.get(key, 0) for w in _scaleout(d).get("workers", {}).values())


def _faults(d) -> list:
    return json.loads(pazzctl(d.sock, "faults", "--json").stdout)


def test_workers_judge_and_the_primary_records_once_across_failures(cluster):
    wl, primary, addr, srv, procs, tmp = cluster
    ref = RefDataPlane(wl.topo, wl.entries, wl.groups, select=select_bucket)
    em, socks = ReferenceEmitter(base=BASE), {}
    n = 0
    for ingress, h in _traffic(wl):
        for dl, final in ref.send_with_headers(ingress, h):
            n += em.add_delivery(dl, final)
    _send(addr, em, socks)
    assert n > 100
    ok = _wait(lambda: _sum(primary, "reports") >= n, 30)
    assert ok, (_scaleout(primary), _logs(tmp))
    assert _sum(primary, "reports") == _sum(primary, "consistent") == n
    assert _sum(primary, "fault_samples") == 0 and _faults(primary) == []
    # The primary counts the reports its workers judged (its probe rounds tell "nothing
    # arrived" from "the probe was dropped" by them), though it received none itself.
    assert _status_tester(primary)["reports"] == n, _status_tester(primary)
    assert _status_tester(primary)["datagrams"] == 0
    # A probe's report (marked) is passed on unjudged, and judged by the primary (where
    # the probes' watches are): its tester counts it, consistent.
    before = _status_tester(primary)
    (i0, h0), *_ = _traffic(wl)
    d0 = next(x for x in ref.send(i0, h0) if x.kind == "egress")
    em.add(d0.egress, h0, d0.verify_port, d0.verify_rule, marked=True)
    _send(addr, em, socks)
    assert _wait(lambda: _sum(primary, "probe_reports") == 1, 20), _scaleout(primary)
    after = _wait(lambda: (x := _status_tester(primary))["consistent"] > before["consistent"] and x)
    assert after and after["consistent"] == before["consistent"] + 1, (before, after)
    assert after["fault_samples"] == before["fault_samples"]
    assert after["reports"] == n + 1, after
    assert _sum(primary, "consistent") == n  # received by a worker, not judged there
    shards = [set(w) for w in _scaleout_shards(primary)]
    assert len(shards) == 2 and all(shards) and not (shards[0] & shards[1]), shards

    # Wrong Verify_Rules, two samples each (a fault opens on its second): one fault per
    # flow, each stored by the primary with the tags the reference did not make.
    # Flows of distinct paths (the reference's), so that each is a fault of its own.
    flows, dls, paths = [], [], set()
    for i, h in _traffic(wl):
        dl = next(x for x in ref.send(i, h) if x.kind == "egress")
        path = tuple(hop.dpid for hop in dl.hops)
        if path not in paths:
            paths.add(path)
            flows.append((i, h))
            dls.append(dl)
    assert len(flows) >= 6

    def wrong(k: int) -> None:
        for (_i, h), dl in zip(flows[k : k + 1], dls[k : k + 1], strict=True):
            for _ in range(2):
                em.add(dl.egress, h, dl.verify_port, dl.verify_rule ^ 0x5A5A)
        _send(addr, em, socks)

    wrong(0)
    rows = _wait(lambda: _faults(primary), 20)
    assert len(rows) == 1, json.dumps([rows, _scaleout(primary), _status_tester(primary)])
    assert rows[0]["egress"] == list(dls[0].egress)
    assert rows[0]["actual"]["verify_rule"] == dls[0].verify_rule ^ 0x5A5A

    # SIGKILL a worker, then more faults: the other takes its shards (leases expire) and
    # JetStream redelivers what it had not acknowledged. Every fault arrives, once.
    procs[1].proc.send_signal(signal.SIGKILL)
    procs[1].proc.wait()
    wrong(1)
    wrong(2)
    rows = _wait(lambda: len(_faults(primary)) >= 3 and _faults(primary), 40)
    assert rows and len(rows) == 3, (_faults(primary), _logs(tmp))
    assert sorted(tuple(r["egress"]) for r in rows) == sorted(tuple(d.egress) for d in dls[:3])

    # nats-server restarts: the components reconnect, and a fault sent after is found.
    srv.restart()
    time.sleep(4.0)  # reconnect (2 s apart)
    wrong(3)
    rows = _wait(lambda: len(_faults(primary)) >= 4 and _faults(primary), 40)
    assert rows and len(rows) == 4, (_faults(primary), _logs(tmp))
    wrong(0)  # the first fault again: the same row, bumped
    assert _wait(lambda: max(r["count"] for r in _faults(primary)) >= 3, 20), _faults(primary)
    assert len(_faults(primary)) == 4

    # No worker: samples JetStream acknowledged wait in the stream (file storage) across
    # another restart, and a new worker judges them.
    procs[2].proc.send_signal(signal.SIGKILL)
    procs[2].proc.wait()
    wrong(4)
    time.sleep(1.0)
    srv.stop()
    wrong(5)  # the engine is away: the collector drops it, and counts
    time.sleep(0.5)
    srv.start()
    procs.append(Proc(["worker", "--config", str(procs[0].config), "--name", "w3"], tmp / "w3.log"))
    rows = _wait(lambda: len(_faults(primary)) >= 5 and _faults(primary), 60)
    assert rows and len(rows) == 5, (_faults(primary), _logs(tmp))
    assert tuple(dls[4].egress) in {tuple(r["egress"]) for r in rows}
    procs[0].stop()
    final = (tmp / "collector.log").read_text().rsplit("collector stopped: ", 1)[-1]
    assert "dropped_unreachable=1," in final or "publish_failed=1," in final, final
    for s in socks.values():
        s.close()


def _scaleout_shards(d) -> list:
    out = []
    so = _scaleout(d)
    for w in so.get("workers", {}):
        out.append(so.get("shards", {}).get(w, []))
    return out


def _status_tester(d) -> dict:
    return json.loads(pazzctl(d.sock, "status", "--json").stdout)["tester"]


def test_model_updates_reach_the_workers_and_a_restarted_primary_is_followed(cluster):
    wl, primary, addr, srv, procs, tmp = cluster
    em, socks = ReferenceEmitter(base=BASE), {}
    (ingress, h), *_ = _traffic(wl)
    old = RefDataPlane(wl.topo, wl.entries, wl.groups, select=select_bucket)
    dl_old = next(x for x in old.send(ingress, h) if x.kind == "egress")
    # A new entry on the first switch of the path: same way out, another Verify_Rule.
    first = dl_old.hops[0]
    ip = h["ipv4_dst"]
    text = (
        f"table=0,priority=1000,ip,nw_dst={ip >> 24}.{(ip >> 16) & 255}.{(ip >> 8) & 255}."
        f"{ip & 255},actions=set_verify_rule:77,output:{first.out_port}"
    )
    pazzctl(primary.sock, "flowmod", str(first.dpid), text)
    from cpc import ofctl

    new_entries = [*wl.entries, ofctl.parse_flow(text, first.dpid).entry()]
    new = RefDataPlane(wl.topo, new_entries, wl.groups, select=select_bucket)
    dl_new = next(x for x in new.send(ingress, h) if x.kind == "egress")
    assert dl_new.verify_rule != dl_old.verify_rule
    time.sleep(3.0)  # past tester.settle (2 s): judged, not held back
    for _ in range(2):
        em.add(dl_new.egress, h, dl_new.verify_port, dl_new.verify_rule)
    _send(addr, em, socks)
    assert _wait(lambda: _sum(primary, "reports") >= 2, 20), _logs(tmp)
    assert _sum(primary, "consistent") == 2 and _faults(primary) == []
    for _ in range(2):  # the old path's tags are a fault now
        em.add(dl_old.egress, h, dl_old.verify_port, dl_old.verify_rule)
    _send(addr, em, socks)
    rows = _wait(lambda: _faults(primary), 20)
    assert len(rows) == 1 and rows[0]["actual"]["verify_rule"] == dl_old.verify_rule, rows
    deferred = _sum(primary, "deferred")

    # The primary stops: no ticks, the replicas cannot know the model, samples wait. It
    # starts again (a new epoch, the rule file's model: the old path again); the replicas
    # load its snapshot and judge what waited, against it.
    primary.proc.terminate()
    primary.proc.wait(20)
    (_i2, h2), dl2 = _traffic(wl)[1], None
    dl2 = next(x for x in old.send(_i2, h2) if x.kind == "egress")
    for _ in range(2):
        em.add(dl2.egress, h2, dl2.verify_port, dl2.verify_rule ^ 0x77)
    _send(addr, em, socks)
    time.sleep(2.0)
    restarted = Pazzd(primary.config)
    try:
        restarted.wait_ready()
        rows = _wait(lambda: len(_faults(restarted)) >= 2 and _faults(restarted), 40)
        assert rows and len(rows) == 2, (_faults(restarted), _logs(tmp))
        assert any(r["actual"]["verify_rule"] == dl2.verify_rule ^ 0x77 for r in rows)
        assert _wait(lambda: _sum(restarted, "deferred") > deferred, 10), _scaleout(restarted)
    finally:
        restarted.stop()
    for s in socks.values():
        s.close()


def test_components_refuse_a_config_without_nats_or_with_a_bad_url(tmp_path):
    cfg = base_config(tmp_path)
    conf = write_config(tmp_path / "pazzd.yaml", cfg)
    for cmd in ("collector", "worker"):
        p = subprocess.run(
            [sys.executable, "-m", "pazzd", cmd, "--config", str(conf)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert p.returncode == 2, p.stderr
        assert f"{conf}: scaleout.nats: needed by pazzd {cmd}" in p.stderr, p.stderr
    cfg["scaleout"] = {"nats": "http://127.0.0.1:4222"}
    conf = write_config(tmp_path / "pazzd.yaml", cfg)
    p = subprocess.run(
        [sys.executable, "-m", "pazzd", "worker", "--config", str(conf)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    line = next(i for i, t in enumerate(conf.read_text().splitlines(), 1) if "nats:" in t)
    assert p.returncode == 2 and f"{conf}:{line}: scaleout.nats: must be a NATS URL" in p.stderr
