"""Scale-out over NATS JetStream: workers' throughput, latencies, snapshots and losses.

A private nats-server (JetStream, file storage), the primary pazzd, `pazzd collector` and
`pazzd worker` processes on this machine, on a pazzdata.workloads grid. Reports from the
reference data plane, in sFlow datagrams as patched OVS sends them, go over UDP to the
collector.

- workers: the stream is filled through the collector, then N workers start together;
  the rate is the samples their reports say they judged per second, between the moment
  every worker judged its first batch and the moment the stream is empty.
- overhead_vs_thrift: against `pazzd --tester-workers N` (bench/workers.py, offered above
  what it judges) at equal N: thrift rate / scale-out rate - 1, the cost per sample.
- sample_to_fault_ms: from sending a fault's second sample to the collector to the fault
  in the primary's store (polled every 5 ms), distinct faults one at a time.
- model_update_ms: from the API FlowMod to a replica (the workers' code, in this process)
  having applied it.
- snapshot: size and catch-up time (read from the stream, parsed and built) for the 100k
  fat-tree and, unless --quick, Stanford (forwarding only).
- lost_after_worker_kill, lost_after_server_restart: samples JetStream accepted that no
  worker's report says it judged (the reports list the stream sequences judged), with a
  worker killed (SIGKILL) or nats-server restarted while the samples flow.

    python bench/scaleout.py [--quick] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from bench.common import pct  # noqa: E402
from bench.tester import reports  # noqa: E402
from bench.workers import BASE, _config, _free_udp  # noqa: E402
from bench.workers import run as thrift_run  # noqa: E402
from cpc.model import Model  # noqa: E402
from cpc.selecthash import group_bucket  # noqa: E402
from pazzapi import ApiError, call  # noqa: E402
from pazzd.config import load_config  # noqa: E402
from pazzd.scaleout import bus  # noqa: E402
from pazzd.scaleout.codec import THRIFT, decode, encode  # noqa: E402
from pazzd.scaleout.journal import snapshot_records, topology_fingerprint  # noqa: E402
from pazzd.scaleout.replica import Replica  # noqa: E402
from pazzd.scaleout.worker import Worker  # noqa: E402
from pazzdata import workloads  # noqa: E402
from pazzlab.natsserver import NatsServer  # noqa: E402
from tester.emit import ReferenceEmitter  # noqa: E402

PER = 8  # samples per datagram
FILL_RATE = 3000.0  # datagrams/s into the collector while the stream fills
SHARDS = 8
THRIFT_OFFERED = 300_000.0  # samples/s offered to the Thrift workers: above what they judge


def _pazzd(args: list[str], log: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "pazzd", *args], stdout=log.open("ab"), stderr=subprocess.STDOUT
    )


def _stop(procs) -> None:
    for p in procs:
        if p.poll() is None:
            p.terminate()
    for p in procs:
        try:
            p.wait(15)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


class Audit:
    """Reads every worker report from PAZZ_FAULTS (its own consumer, next to the
    primary's): the stream sequences judged and when."""

    def __init__(self) -> None:
        self.judged: set[int] = set()
        self.events: list[tuple[float, str, int]] = []  # (time, worker, samples judged so far)

    async def start(self, js) -> None:
        async def on(msg) -> None:
            rep = decode(THRIFT.ScaleoutReport, msg.data)
            self.judged.update(rep.judged)
            self.events.append((time.time(), rep.worker, rep.stats.get("reports", 0)))

        self.sub = await js.subscribe(bus.FAULTS, cb=on, deliver_policy="new")


class Bench:
    def __init__(self, d: Path, wl, srv: NatsServer) -> None:
        self.d, self.wl, self.srv = d, wl, srv
        self.conf = _config(d, wl, _free_udp(), scaleout={"nats": srv.url, "shards": SHARDS})
        self.cfg = load_config(self.conf)
        self.sock = str(d / "pazzd.sock")
        self.col_port = _free_udp()
        self.primary = _pazzd(["--config", str(self.conf)], d / "primary.log")
        self.collector = None
        self.workers: list[subprocess.Popen] = []
        self.socks: dict[str, socket.socket] = {}

    def wait_primary(self) -> None:
        deadline = time.monotonic() + 60
        while True:
            try:
                call(self.sock, "status", timeout=5)
                return
            except (OSError, ApiError):
                if time.monotonic() > deadline or self.primary.poll() is not None:
                    raise RuntimeError("pazzd did not start") from None
                time.sleep(0.2)

    def start_collector(self) -> None:
        log = self.d / "collector.log"
        self.collector = _pazzd(
            ["collector", "--config", str(self.conf), "--listen", f"127.0.0.1:{self.col_port}"],
            log,
        )
        deadline = time.monotonic() + 60
        while "collector: sFlow on" not in (log.read_text() if log.exists() else ""):
            if time.monotonic() > deadline or self.collector.poll() is not None:
                raise RuntimeError("the collector did not start: " + log.read_text()[-2000:])
            time.sleep(0.1)

    def start_workers(self, n: int, tag: str) -> None:
        for i in range(n):
            name = f"{tag}{i}"
            level = {"1": "info", "2": "debug"}.get(
                os.environ.get("PAZZ_BENCH_DEBUG", ""), "warning"
            )
            args = ["worker", "--config", str(self.conf), "--name", name, "--log-level", level]
            self.workers.append(_pazzd(args, self.d / f"{name}.log"))

    def stop_workers(self) -> None:
        _stop(self.workers)
        self.workers = []

    def send(self, dgs: list[bytes], rate_dg: float) -> None:
        """Datagrams to the collector, each agent from its own socket, paced."""
        gap = 1.0 / rate_dg
        t0 = time.perf_counter()
        for i, dg in enumerate(dgs):
            agent = socket.inet_ntoa(dg[8:12])
            s = self.socks.setdefault(agent, socket.socket(socket.AF_INET, socket.SOCK_DGRAM))
            s.sendto(dg, ("127.0.0.1", self.col_port))
            ahead = t0 + (i + 1) * gap - time.perf_counter()
            if ahead > 0:
                time.sleep(ahead)

    def close(self) -> None:
        self.stop_workers()
        _stop([p for p in (self.collector, self.primary) if p is not None])
        for s in self.socks.values():
            s.close()


def _datagrams(wl, m, flows: int, n_dg: int) -> list[bytes]:
    em = ReferenceEmitter(base=BASE)
    out: list[bytes] = []
    rs = reports(wl, m, flows)
    while len(out) < n_dg:
        for egress, h, vp, vr in rs:
            em.add(egress, h, vp, vr)
        out += em.flush(per_datagram=PER)
    return out[:n_dg]


async def _pending(js) -> int:
    info = await js.stream_info(bus.SAMPLES_STREAM)
    return info.state.messages


async def _wait(pred, timeout: float, every: float = 0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = await pred()
        if v:
            return v
        await asyncio.sleep(every)
    return await pred()


async def throughput(b: Bench, js, audit: Audit, dgs: list[bytes], n: int) -> dict:
    """The stream is filled through the collector, n workers start together; the rate is
    what they judged per second from the moment each judged its first batch until the
    stream is empty."""
    b.stop_workers()
    t_fill = time.perf_counter()
    await asyncio.to_thread(b.send, dgs, FILL_RATE)  # the loop keeps its NATS connection
    got = await _settled(js)
    fill_s = time.perf_counter() - t_fill
    accepted = await _pending(js)  # messages: batches of an agent's datagrams
    audit.events.clear()
    tag = f"t{n}-"
    b.start_workers(n, tag)
    started = await _wait(lambda: _all_judging(audit, tag, n), 120, 0.01)
    t0, base = time.time(), _judged_now(audit, tag)
    await _wait(lambda: _drained(js), 300, 0.02)
    await asyncio.sleep(0.3)  # the last reports
    if not started:
        logs = "".join(f.read_text()[-3000:] for f in b.d.glob(f"{tag}*.log"))
        raise RuntimeError(f"{n} workers did not all judge within 120 s: {logs}")
    t1 = max(t for t, w, _ in audit.events if w.startswith(tag))
    done = _judged_now(audit, tag)
    b.stop_workers()
    return {
        "samples_per_s": round((done - base) / (t1 - t0)) if started and t1 > t0 else None,
        "window_samples": done - base,
        "accepted_messages": accepted,
        "filled": bool(got),
        "collector_samples_per_s": round(len(dgs) * PER / fill_s),
    }


async def _all_judging(audit: Audit, tag: str, n: int) -> bool:
    return len({w for _, w, c in audit.events if w.startswith(tag) and c > 0}) >= n


def _judged_now(audit: Audit, tag: str) -> int:
    last: dict[str, int] = {}
    for _, w, c in audit.events:
        if w.startswith(tag):
            last[w] = c
    return sum(last.values())


async def _settled(js, quiet: float = 0.5, timeout: float = 30.0) -> bool:
    """The stream stopped growing (the collector published all it took)."""
    deadline = time.monotonic() + timeout
    last, since = -1, time.monotonic()
    while time.monotonic() < deadline:
        n = await _pending(js)
        if n != last:
            last, since = n, time.monotonic()
        elif n > 0 and time.monotonic() - since >= quiet:
            return True
        await asyncio.sleep(0.05)
    return False


async def _drained(js) -> bool:
    return await _pending(js) == 0


async def sample_to_fault(b: Bench, wl, m, n: int) -> list[float]:
    """Distinct faults one at a time: from sending the second sample to the fault in the
    primary's store (asked for the faults after the newest known, every 5 ms)."""
    em = ReferenceEmitter(base=BASE)
    out = []
    last = max((r["id"] for r in call(b.sock, "faults")), default=0)
    for egress, h, vp, vr in reports(wl, m, n * 4, seed=11):
        if len(out) >= n:
            break
        for _ in range(2):
            em.add(egress, h, vp, vr ^ 0x5A5A)
        t0 = time.perf_counter()
        await asyncio.to_thread(b.send, em.flush(per_datagram=PER), 10_000.0)
        deadline = t0 + 5.0
        while time.perf_counter() < deadline:
            new = call(b.sock, "faults", since=last)
            if new:  # a fault of its own (a flow of a fault's class and path bumps that one)
                out.append((time.perf_counter() - t0) * 1000)
                last = max(r["id"] for r in new)
                break
            await asyncio.sleep(0.005)
    return out


async def model_updates(b: Bench, js, nc, n: int) -> list[float]:
    w = Worker(b.cfg, "bench-replica", b.srv.url, SHARDS)
    stop = asyncio.Event()
    follow = asyncio.create_task(w.follow_model(js, nc, stop))
    await _wait(lambda: _ready(w), 60)
    out = []
    sw = min(b.wl.topo.switches)
    for i in range(n):
        v = w.replica.version
        t0 = time.perf_counter()
        call(
            b.sock,
            "flowmod",
            switch=str(sw),
            flow=f"table=0,priority=60000,ip,nw_dst=192.0.{i // 250}.{i % 250 + 1},actions=drop",
        )
        while w.replica.version == v:
            await asyncio.sleep(0.001)
        out.append((time.perf_counter() - t0) * 1000)
        await asyncio.sleep(0.05)
    stop.set()
    follow.cancel()
    return out


async def _ready(w: Worker) -> bool:
    return w._ready.is_set()  # noqa: SLF001


async def lost(b: Bench, js, audit: Audit, dgs: list[bytes], what: str) -> int:
    """Accepted samples no report says were judged, with a failure in the middle."""
    b.stop_workers()
    b.start_workers(2, f"l{what}-")
    await _wait(lambda: _all_judging_or_ready(b), 30)
    info = await js.stream_info(bus.SAMPLES_STREAM)
    first = info.state.last_seq + 1
    half = len(dgs) // 2
    await asyncio.to_thread(b.send, dgs[:half], 2000.0)
    if what == "kill":
        b.workers[0].send_signal(signal.SIGKILL)
    else:
        b.srv.restart()
        await asyncio.sleep(3.0)  # reconnects, 2 s apart
    await asyncio.to_thread(b.send, dgs[half:], 2000.0)
    await asyncio.sleep(1.0)
    await _wait(lambda: _drained(js), 120, 0.1)
    await asyncio.sleep(2.0)  # the last reports
    info = await js.stream_info(bus.SAMPLES_STREAM)
    accepted = set(range(first, info.state.last_seq + 1))
    b.stop_workers()
    lost = 0  # samples in accepted messages no report says were judged (still in the stream)
    for seq in sorted(accepted - audit.judged):
        try:
            batch = decode(THRIFT.SampleBatch, (await js.get_msg(bus.SAMPLES_STREAM, seq)).data)
            lost += len(batch.datagrams) * PER
        except Exception:  # gone from the work queue without a report saying so
            lost += 64 * PER  # the most a message carries
    return lost


async def _all_judging_or_ready(b: Bench) -> bool:
    """Every worker reports, and their shards cover all, none twice (leases settled)."""
    so = call(b.sock, "status").get("scaleout") or {}
    shards = [s for w in so.get("lag", {}) for s in so.get("shards", {}).get(w, [])]
    return len(so.get("lag", {})) >= len(b.workers) and sorted(shards) == list(range(SHARDS))


def snapshot_cost(model: Model, url: str) -> dict:
    """Size of the model's snapshot, and a replica's catch-up: read from JetStream, parsed
    and built."""
    parts = snapshot_records(model, "bench", 1, time.time())
    data = [encode(p) for p in parts]

    async def go() -> float:
        nc = await bus.connect(url, "bench-snapshot")
        js = nc.jetstream()
        await bus.ensure_streams(js, 1)
        first = None
        for x in data:
            ack = await js.publish(bus.MODEL_PART, x, stream=bus.MODEL_STREAM)
            first = first or ack.seq
        head = THRIFT.SnapshotHead(
            "bench", 1, time.time(), first, len(parts), topology_fingerprint(model.topo), []
        )
        t0 = time.perf_counter()
        got = [
            decode(THRIFT.ModelRecord, (await js.get_msg(bus.MODEL_STREAM, first + i)).data)
            for i in range(len(parts))
        ]
        r = Replica(model.topo, head.topology)
        r.load(head, got)
        dt = time.perf_counter() - t0
        assert r.model.rule_count() == model.rule_count()
        await js.purge_stream(bus.MODEL_STREAM, subject=bus.MODEL_PART)
        await nc.drain()
        return dt

    return {
        "entries": model.rule_count(),
        "bytes": sum(map(len, data)),
        "catch_up_s": round(asyncio.run(go()), 2),
    }


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small scale, under 3 minutes")
    ap.add_argument("--workers", default="1,2,3,4")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    quick = a.quick
    wl = workloads.generate("grid", 3, 500 if quick else 2000, rule_ids=True)
    m = Model(wl.topo)
    m.select = group_bucket  # the reports take the bucket Open vSwitch's hash takes
    m.add_entries(wl.entries, wl.groups)
    n_dg = 12_000 if quick else 40_000
    dgs = _datagrams(wl, m, 2000, n_dg)
    counts = [int(x) for x in a.workers.split(",")]
    if quick:
        counts = [c for c in counts if c <= 2]
    out: dict = {"topology": "grid9", "rules": m.rule_count(), "per_datagram": PER}
    with tempfile.TemporaryDirectory(prefix="pazz-bench-scaleout-") as tmp, NatsServer() as srv:
        b = Bench(Path(tmp), wl, srv)
        try:
            b.wait_primary()
            b.start_collector()

            async def run() -> None:
                nc = await bus.connect(srv.url, "bench")
                js = nc.jetstream()
                await bus.ensure_streams(js, SHARDS)
                audit = Audit()
                await audit.start(js)
                out["workers"] = {str(n): await throughput(b, js, audit, dgs, n) for n in counts}
                b.start_workers(2, "f")
                await _wait(lambda: _all_judging_or_ready(b), 30)
                lat = await sample_to_fault(b, wl, m, 8 if quick else 30)
                out["sample_to_fault_ms"] = {
                    "p50": round(pct(lat, 50), 1),
                    "p99": round(pct(lat, 99), 1),
                    "n": len(lat),
                }
                upd = await model_updates(b, js, nc, 20 if quick else 100)
                out["model_update_ms"] = {
                    "p50": round(pct(upd, 50), 1),
                    "p99": round(pct(upd, 99), 1),
                    "n": len(upd),
                }
                b.stop_workers()
                small = dgs[: len(dgs) // 10]
                out["lost_after_worker_kill"] = await lost(b, js, audit, small, "kill")
                out["lost_after_server_restart"] = await lost(b, js, audit, small, "restart")
                await nc.drain()

            asyncio.run(run())
        finally:
            b.close()
        thrift = {
            n: thrift_run(wl, m, n, 3.0 if quick else 5.0, PER, 2000, THRIFT_OFFERED)[
                "samples_per_s"
            ]
            for n in counts
        }
        out["thrift_workers"] = {str(n): {"samples_per_s": v} for n, v in thrift.items()}
        by_n = {
            str(n): round(thrift[n] / out["workers"][str(n)]["samples_per_s"] - 1, 3)
            for n in counts
            if out["workers"][str(n)]["samples_per_s"]
        }
        out["overhead_by_workers"] = by_n
        out["overhead_vs_thrift"] = round(statistics.mean(by_n.values()), 3) if by_n else None
        one = out["workers"][str(counts[0])]["samples_per_s"] or 0
        two = out["workers"].get("2", {}).get("samples_per_s") or 0
        out["scaling_2_over_1"] = round(two / one, 2) if one else None
        fat = workloads.generate("fattree", 4, 20_000 if quick else 100_000, rule_ids=True)
        fm = Model(fat.topo)
        fm.add_entries(fat.entries, fat.groups)
        out["snapshot"] = {"fattree": snapshot_cost(fm, srv.url)}
        if not quick:
            out["snapshot"]["stanford_noacl"] = _stanford(srv.url)
    print(json.dumps(out) if a.json else json.dumps(out, indent=2))
    return out


def _stanford(url: str) -> dict | None:
    from bench.stanford import DATASETS
    from pazzdata.stanford import load

    ds = DATASETS / "stanford-noacl"
    if not ds.exists():
        return None
    net = load(ds)
    entries, groups = net.state(net.inserted())
    model = Model(net.topo)
    model.add_entries(entries, groups)
    return snapshot_cost(model, url)


if __name__ == "__main__":
    main()
