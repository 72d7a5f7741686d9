"""What spreading pazzd over hosts costs: Thrift per sample, and the model's snapshot.

thrift    the same sFlow datagrams (8 reports each, tags from the reference data plane)
          judged by the in-process tester and by a tester worker (tester.remote) whose
          model is pazzd's own Thrift service (pazzd.workers.ModelServer) in another
          process on a Unix socket; the worker asks once per datagram (`lookup`), with its
          answer cache (pazzd's version file: a replayed flow is not asked again) and
          without it (every datagram asks: the cost of a cold cache). The overhead per
          sample is the difference of the two times per sample.
snapshot  what a replica on another host needs to rebuild the model: the topology and
          rule files pazzd loads (YAML, JSON lines), gzip'd; their sizes, the time to
          compress, send them over loopback TCP and rebuild (`Model.load_rules`) there.

    python bench/distrib.py [--rules 5000,100000] [--seconds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import multiprocessing as mp
import os
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from bench.common import emit_json  # noqa: E402
from bench.tester import reports  # noqa: E402
from cpc.model import Model  # noqa: E402
from cpc.topology import load_topology  # noqa: E402
from pazzdata.workloads import generate  # noqa: E402
from tester.emit import ReferenceEmitter, synthetic_ifmap  # noqa: E402
from tester.engine import Tester  # noqa: E402
from tester.store import FaultStore  # noqa: E402

PER_DATAGRAM = 8


def _build(rules: int):
    wl = generate("fattree", 4, rules, rule_ids=True)
    m = Model(wl.topo)
    m.add_entries(wl.entries, wl.groups)
    ports = [(d, p) for d in sorted(wl.topo.switches) for p in wl.topo.ports_of(d)]
    return wl, m, ports


def _serve(rules: int, path: str, ready) -> None:
    """pazzd's model service alone: the handler reads only model, guard and the ifmap."""
    from pazzd.workers import ModelServer

    wl, m, ports = _build(rules)
    daemon = SimpleNamespace(
        model=m, guard=None, tester=SimpleNamespace(ifmap=synthetic_ifmap(ports)), rules_at=None
    )

    async def run() -> None:
        srv = ModelServer(daemon, path)
        await srv.start()
        ready.set()
        await asyncio.Event().wait()

    asyncio.run(run())


def _rate(tester, dgs: list[bytes], seconds: float) -> float:
    """Microseconds per sample, replaying the datagrams for about `seconds`."""
    t0, n = time.perf_counter(), tester.stats.reports
    while time.perf_counter() - t0 < seconds:
        for d in dgs:
            tester.process_datagram(d, time.time())
    return (time.perf_counter() - t0) * 1e6 / (tester.stats.reports - n)


def thrift(rules: int, flows: int, seconds: float) -> dict:
    from thriftpy2.rpc import make_client

    from tester.remote import THRIFT, RemoteModel, WorkerTester

    wl, m, ports = _build(rules)
    em = ReferenceEmitter(sampling_rate=1000)
    for r in reports(wl, m, flows):
        em.add(*r)
    dgs = em.flush(per_datagram=PER_DATAGRAM)
    local = Tester(m, FaultStore(":memory:"), synthetic_ifmap(ports), ports=ports)
    _rate(local, dgs[:50], 0.2)  # warm the caches as a running pazzd has them
    local_us = _rate(local, dgs, seconds)
    with tempfile.TemporaryDirectory(prefix="pazz-bench-distrib-") as tmp:
        path = os.path.join(tmp, "model.sock")
        ctx = mp.get_context("spawn")
        ready = ctx.Event()
        srv = ctx.Process(target=_serve, args=(rules, path, ready), daemon=True)
        srv.start()
        try:
            if not ready.wait(600):
                raise RuntimeError("the model service did not start")
            out = {}
            for name in ("cold", "cached"):
                client = make_client(THRIFT.ModelService, unix_socket=path, timeout=60_000)
                ver = client.version()  # what pazzd's version file would say: no update
                remote = RemoteModel(client, None if name == "cold" else lambda v=ver: v)
                w = WorkerTester(remote, FaultStore(":memory:"), synthetic_ifmap(ports))
                _rate(w, dgs[:50], 0.2)
                rpcs = remote.rpcs
                reps = w.stats.reports
                us = _rate(w, dgs, seconds)
                out[name] = {
                    "us_per_sample": round(us, 1),
                    "overhead_us_per_sample": round(us - local_us, 1),
                    "rpcs_per_datagram": round(
                        (remote.rpcs - rpcs) * PER_DATAGRAM / (w.stats.reports - reps), 3
                    ),
                    "faults": w.stats.fault_samples,
                }
                client.close()
        finally:
            srv.terminate()
            srv.join(10)
    return {
        "rules": m.rule_count(),
        "datagrams": len(dgs),
        "per_datagram": PER_DATAGRAM,
        "local_us_per_sample": round(local_us, 1),
        "local_faults": local.stats.fault_samples,
        "worker": out,
    }


def snapshot(rules: int) -> dict:
    wl = generate("fattree", 4, rules, rule_ids=True)
    with tempfile.TemporaryDirectory(prefix="pazz-bench-snap-") as tmp:
        d = Path(tmp)
        topo, rfile = d / "topology.yaml", d / "rules.jsonl"
        wl.write(topo, rfile)
        raw = topo.read_bytes() + b"\0" + rfile.read_bytes()
        t = time.perf_counter()
        packed = gzip.compress(raw, compresslevel=6)
        gzip_s = time.perf_counter() - t
        got, send_s = _send_loopback(packed)
        t = time.perf_counter()
        a, b = gzip.decompress(got).split(b"\0", 1)
        (d / "r.yaml").write_bytes(a)
        (d / "r.jsonl").write_bytes(b)
        m = Model(load_topology(d / "r.yaml"))
        m.load_rules(d / "r.jsonl")
        rebuild_s = time.perf_counter() - t
        return {
            "rules": m.rule_count(),
            "raw_mb": round(len(raw) / 1e6, 2),
            "gzip_mb": round(len(packed) / 1e6, 2),
            "gzip_s": round(gzip_s, 3),
            "loopback_send_s": round(send_s, 4),
            "send_s_at_1gbps": round(len(packed) * 8 / 1e9, 3),
            "rebuild_s": round(rebuild_s, 2),
        }


def _send_loopback(data: bytes) -> tuple[bytes, float]:
    """Send over a loopback TCP connection; the time from connect to the last byte read."""
    srv = socket.create_server(("127.0.0.1", 0))
    port = srv.getsockname()[1]
    chunks: list[bytes] = []

    def recv() -> None:
        conn, _ = srv.accept()
        with conn:
            while b := conn.recv(1 << 20):
                chunks.append(b)

    th = threading.Thread(target=recv)
    th.start()
    t = time.perf_counter()
    with socket.create_connection(("127.0.0.1", port)) as c:
        c.sendall(data)
    th.join()
    el = time.perf_counter() - t
    srv.close()
    return b"".join(chunks), el


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rules", default="5000,100000", help="fat-tree k=4 rule counts")
    ap.add_argument("--thrift-rules", type=int, default=100_000)
    ap.add_argument("--flows", type=int, default=2000)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--out")
    args = ap.parse_args(argv)
    try:
        sizes = [int(x) for x in args.rules.split(",")]
    except ValueError:
        ap.error(f"--rules: not a list of integers: {args.rules!r}")
    report = {
        "bench": "distrib",
        "thrift": thrift(args.thrift_rules, args.flows, args.seconds),
        "snapshot": [snapshot(n) for n in sizes],
    }
    emit_json(report, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
