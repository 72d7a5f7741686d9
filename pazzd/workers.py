"""Tester workers: `pazzd --tester-workers N` judges sFlow in N processes.

pazzd keeps the model and serves it over Thrift (tester/model.thrift) on a Unix socket
next to the API socket. Each worker is `python -m pazzd.workers`: it binds the sFlow
port with SO_REUSEPORT (the kernel hashes each agent's source address and port to one
worker, so per-agent sequence numbers stay in one place), judges reports with a
tester.remote.WorkerTester, stores faults in the shared SQLite file, and sends fault
notes, critical-flow samples and its counters back with `report`. pazzd counts and
logs the faults, localizes them and runs the blackhole timers, as it does in one
process. A worker that exits is started again.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import mmap
import os
import signal
import socket
import struct
import subprocess
import sys
import time

from thriftpy2.contrib.aio.processor import TAsyncProcessor
from thriftpy2.contrib.aio.server import TAsyncServer
from thriftpy2.contrib.aio.socket import TAsyncServerSocket
from thriftpy2.rpc import make_client
from thriftpy2.transport import TTransportException

from tester.collector import open_socket
from tester.ifmap import IfMap
from tester.remote import (
    THRIFT,
    FlowRelay,
    Outbox,
    RemoteModel,
    WorkerTester,
    expected_to_thrift,
    note_event,
    rule_to_thrift,
)
from tester.store import FaultStore

from .config import load_config
from .notify import setup_logging
from .wiring import tune_tester

__all__ = ["ModelServer", "WorkerPool", "main", "relay_flows_and_suspects"]

log = logging.getLogger("pazzd.workers")
REPORT_EVERY = 0.5  # seconds between a worker's counter reports
RESTART_BACKOFF = (1.0, 2.0, 5.0, 10.0)


def _prefixes(got) -> object:
    """Model.expected_at/expected_via's answer over Thrift (None: not known)."""
    return THRIFT.Prefixes(got is not None, [expected_to_thrift(e) for e in got or ()])


class _Handler:
    """The Thrift service, run on pazzd's event loop (so the model is never read mid-update)."""

    def __init__(self, daemon) -> None:
        self.d = daemon

    async def version(self) -> int:
        return self.d.model.version

    async def lookup(self, queries, now):
        m, guard = self.d.model, self.d.guard
        answers = []
        for q in queries:
            cls = m.classify(q.header)
            held = guard.held_until(cls, q.header) if guard is not None else 0.0
            at, tags = (q.egress_dpid, q.egress_port), (q.verify_port, q.verify_rule)
            ok = q.verify_port >= 0 and (m.allows_at if q.hop else m.allows)(at, q.header, *tags)
            answers.append(THRIFT.Answer(cls, held, bool(ok), ok is None))
        return THRIFT.Lookup(m.version, answers)

    async def expected(self, q):
        egress = (q.egress_dpid, q.egress_port)
        return [expected_to_thrift(e) for e in self.d.model.expected(egress, q.header)]

    async def expected_at(self, q):
        return _prefixes(self.d.model.expected_at((q.egress_dpid, q.egress_port), q.header))

    async def expected_via(self, dpid, header):
        return _prefixes(self.d.model.expected_via(dpid, header))

    async def rules_at(self, dpid):
        return [rule_to_thrift(r) for r in self.d.tester.rules_at(dpid)]

    async def ifmap(self):
        return [
            THRIFT.IfEntry(agent, sub, ifi, port[0], port[1])
            for (agent, sub, ifi), port in self.d.tester.ifmap.entries()
        ]

    async def report(self, r) -> None:
        self.d.workers.stats[r.worker] = dict(r.stats)
        self.d.workers.unsaved[r.worker] = [json.loads(u) for u in r.unsaved or ()]
        self.d.workers.hello(r.worker)
        relay_flows_and_suspects(self.d, r.flows, r.suspects or ())
        self.d.faults.worker_report(r.last_datagram, [note_event(n) for n in r.faults])


def relay_flows_and_suspects(daemon, flows, suspects) -> None:
    """A worker's critical-flow samples to pazzd's blackhole timers, and its first fault
    samples to the fuzzer (re-probes), as the tester in pazzd's process does itself."""
    t = daemon.tester
    for f in flows:
        if t.blackholes is None:
            break
        port = (f.dpid, f.port)
        if f.report:
            t.note_report(port, f.header, f.now, f.sampling_rate, probe=bool(f.probe))
        else:
            t.blackholes.on_ingress(port, f.header, f.now, f.sampling_rate)
    for s in suspects:
        if s.unexplained_verify_port >= 0:
            egress = (s.egress_dpid, s.egress_port)
            daemon.faults.unexplained(egress, dict(s.header), s.unexplained_verify_port)
        else:
            ings = [(i.dpid, i.port) for i in s.ingresses]
            daemon.faults.corroborate(dict(s.header), ings)


class ModelServer:
    """Serves the model over Thrift on a Unix socket, inside the running event loop."""

    def __init__(self, daemon, path: str) -> None:
        self.path = path
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        # client_timeout None: a worker's connection lives as long as the worker.
        self._sock = TAsyncServerSocket(unix_socket=path, client_timeout=None)
        self._server = TAsyncServer(
            TAsyncProcessor(THRIFT.ModelService, _Handler(daemon)), self._sock
        )

    async def start(self) -> None:
        self._server.loop = asyncio.get_running_loop()
        self._sock.listen()
        os.chmod(self.path, 0o600)
        self._server.server = await self._sock.accept(self._server.handle)

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            await self._server.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)


class VersionFile:
    """The model version in an 8-byte shared file: pazzd writes it on every update, workers
    read it once per datagram to know whether their cached answers still hold."""

    def __init__(self, path: str, writer: bool = False) -> None:
        self.path = path
        if writer:
            with open(path, "wb") as f:
                f.write(bytes(8))
            os.chmod(path, 0o600)
        self._f = open(path, "r+b" if writer else "rb")  # noqa: SIM115
        self._mm = mmap.mmap(
            self._f.fileno(), 8, access=mmap.ACCESS_WRITE if writer else mmap.ACCESS_READ
        )

    def publish(self, version: int) -> None:
        struct.pack_into("<q", self._mm, 0, version)

    def read(self) -> int:
        return struct.unpack_from("<q", self._mm, 0)[0]

    def close(self) -> None:
        self._mm.close()
        self._f.close()


def pick_udp_port(host: str) -> int:
    """A free UDP port for the workers to share (when the config asks for port 0)."""
    fam = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(fam, socket.SOCK_DGRAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


class WorkerPool:
    """Starts N worker processes, restarts the ones that exit, stops them all."""

    def __init__(self, n: int, config_path: str, model_socket: str, version_file: str, cfg) -> None:
        self.n = n
        # The start-up settings travel on the command line: a reload must not move them.
        self.argv = [
            sys.executable,
            "-m",
            "pazzd.workers",
            "--config",
            config_path,
            "--model",
            model_socket,
            "--version-file",
            version_file,
            "--sflow",
            f"{cfg.sflow.host}:{cfg.sflow.port}",
            "--database",
            cfg.database,
        ]
        self.procs: dict[int, subprocess.Popen] = {}
        self.stats: dict[int, dict] = {}
        self.unsaved: dict[int, list[dict]] = {}  # worker -> its faults waiting for the store
        self.restarts = 0
        self._ready: set[int] = set()
        self._fails: dict[int, int] = {}

    def _spawn(self, i: int) -> None:
        self.procs[i] = subprocess.Popen([*self.argv, "--index", str(i)])

    def start(self) -> None:
        for i in range(self.n):
            self._spawn(i)

    def hello(self, i: int) -> None:
        self._ready.add(i)
        self._fails.pop(i, None)

    async def wait_ready(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while len(self._ready) < self.n:
            for i, p in self.procs.items():
                if p.poll() is not None:
                    raise RuntimeError(f"tester worker {i} exited with status {p.returncode}")
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"{self.n - len(self._ready)} tester workers not ready in {timeout:.0f} s"
                )
            await asyncio.sleep(0.05)

    async def supervise(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            for i, p in list(self.procs.items()):
                if isinstance(p, _Exited) or p.poll() is None or stop.is_set():
                    continue
                k = self._fails.get(i, 0)
                self._fails[i] = k + 1
                delay = RESTART_BACKOFF[min(k, len(RESTART_BACKOFF) - 1)]
                log.warning(
                    "tester worker %d exited with status %s; starting it again in %.0f s",
                    i,
                    p.returncode,
                    delay,
                )
                self._ready.discard(i)
                self.unsaved.pop(i, None)  # lost with the process
                self.procs[i] = _Exited(time.monotonic() + delay)
            for i, p in list(self.procs.items()):
                if isinstance(p, _Exited) and time.monotonic() >= p.due and not stop.is_set():
                    self.restarts += 1
                    self._spawn(i)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 0.5)

    def recycle(self) -> None:
        """Start every worker afresh (after a config reload: ifmap, critical flows, timers)."""
        self.stop()
        self._ready.clear()
        self.start()

    def alive(self) -> int:
        return sum(
            1 for p in self.procs.values() if not isinstance(p, _Exited) and p.poll() is None
        )

    def unsaved_faults(self) -> list[dict]:
        return [f for fs in list(self.unsaved.values()) for f in fs]

    def totals(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for st in self.stats.values():
            for k, v in st.items():
                out[k] = out.get(k, 0) + v
        return out

    def stop(self, timeout: float = 5.0) -> None:
        live = [p for p in self.procs.values() if not isinstance(p, _Exited)]
        for p in live:
            if p.poll() is None:
                p.terminate()
        deadline = time.monotonic() + timeout
        for p in live:
            try:
                p.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


class _Exited:
    """A worker slot waiting out its restart back-off."""

    def __init__(self, due: float) -> None:
        self.due = due

    def poll(self):
        return 1  # not running


# --- the worker process ---------------------------------------------------------------------------
def _stats_map(tester: WorkerTester) -> dict[str, int]:
    return {k: int(v) for k, v in tester.stats.as_dict().items() if isinstance(v, int)}


def run_worker(
    index: int, config_path: str, model_socket: str, version_file: str, sflow: str, database: str
) -> int:
    cfg = load_config(config_path)
    sflow_host, sflow_port = sflow.rsplit(":", 1)[0], int(sflow.rsplit(":", 1)[1])
    client = make_client(THRIFT.ModelService, unix_socket=model_socket, timeout=30_000)
    ifmap = IfMap()
    for e in client.ifmap():
        ifmap.add(e.agent, e.if_index, (e.dpid, e.port), sub_agent=e.sub_agent)
    outbox = Outbox()
    flows = cfg.critical_flows
    store = FaultStore(database)
    remote = RemoteModel(client, VersionFile(version_file).read)
    t = WorkerTester(
        remote,
        store,
        ifmap,
        blackholes=FlowRelay(flows, outbox) if flows else None,
        on_fault=outbox.fault,
        on_localize=outbox.localize,
        rules_at=remote.rules_at,
        links=cfg.topology.links,
    )
    tune_tester(t, cfg)
    t.on_suspect = outbox.suspect
    t.on_unexplained = outbox.unexplained
    sock = open_socket(sflow_host, sflow_port, reuse_port=True)
    sock.settimeout(0.1)
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(1))

    received = 0.0  # wall time of the latest datagram: pazzd's detection latency starts there

    def report() -> None:
        faults, seen, suspects = outbox.take()
        unsaved = [json.dumps(f) for f in t.unrecorded()]
        client.report(
            THRIFT.WorkerReport(index, _stats_map(t), faults, seen, received, suspects, unsaved)
        )

    report()  # hello: the socket is bound
    log.info("tester worker %d: sFlow %s:%d, model %s", index, sflow_host, sflow_port, model_socket)
    last = time.monotonic()
    while not stopping:
        try:
            data, addr = sock.recvfrom(65535)
        except TimeoutError:
            data = None
        if data is not None:
            received = time.time()
            t.process_datagram(data, source=addr[0] if isinstance(addr, tuple) else None)
        now = time.monotonic()
        if (
            outbox.faults
            or outbox.suspects
            or (outbox.flows and now - last >= 0.1)
            or now - last >= REPORT_EVERY
        ):
            t.tick()
            report()
            last = now
    sock.close()
    store.close()
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="pazzd.workers", description="one pazzd tester worker")
    p.add_argument("--config", required=True)
    p.add_argument("--model", required=True, help="pazzd's model socket (Thrift)")
    p.add_argument("--version-file", required=True, help="where pazzd publishes the model version")
    p.add_argument("--sflow", required=True, help="HOST:PORT shared with the other workers")
    p.add_argument("--database", required=True, help="the fault store (SQLite) pazzd uses")
    p.add_argument("--index", type=int, required=True)
    a = p.parse_args(argv)
    setup_logging("info", f"%(levelname)s pazzd-worker-{a.index}: %(message)s")
    try:
        return run_worker(a.index, a.config, a.model, a.version_file, a.sflow, a.database)
    except (OSError, EOFError, TTransportException) as e:
        log.error("tester worker %d stopped: %s", a.index, e)
        return 1


if __name__ == "__main__":
    sys.exit(main())
