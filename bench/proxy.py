"""Overhead of the OpenFlow proxy: FlowMod and packet-in round trips through pazzd's proxy
against a direct controller-switch connection, in the same run, and sustained FlowMod rate
with the model updated.

    python bench/proxy.py [--json] [--rounds N] [--flowmods N] [--no-model] [--no-pin]
                          [--profile FILE] [--controllers N]

The proxy runs in its own process (as pazzd does); a minimal OpenFlow 1.3 switch and
controller run in this process, over loopback TCP.
- FlowMod round trip: the controller sends a FlowMod and a barrier, and waits for the
  barrier reply (the proxy adds its rule ID, its own barrier, and applies the FlowMod to its
  table, SQLite and the cpc model when its barrier returns).
- Packet-in round trip: the switch sends a PACKET_IN, the controller answers with a
  PACKET_OUT, the switch takes the time when it arrives.
- flowmods_per_s: N distinct /32 route FlowMods sent back to back, then a barrier; the rate
  is N / (time until the controller's barrier reply and the proxy's model has them all).
- relay: the same round trips through a bare asyncio byte relay in its own process (no
  parsing at all): the cost of one more process hop, which the proxy cannot go below.

The round trips are measured with this process and the proxy's pinned to one CPU (unless
--no-pin): on a VM, a wake-up of the other, idle vCPU costs 100-200 us at random (the
cpuidle driver halts it), which dwarfs the proxy's own work and swings between runs.
The FlowMod rate is measured unpinned. --profile FILE writes a cProfile of the proxy
process during the FlowMod-rate phase. --controllers N gives the proxy N - 1 more
controllers (role equal, idle: they get every PACKET_IN too, and the measuring
controller's xids are translated).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import multiprocessing as mp
import os
import shutil
import signal
import struct
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import ofwire as of  # noqa: E402
from bench.common import pct  # noqa: E402

DPID = 1


def route_flow_mod(xid: int, i: int) -> bytes:
    oxm = struct.pack("!IH", 0x80000A02, 0x0800) + struct.pack("!II", 0x80001804, 0x0A000000 + i)
    instr = struct.pack("!HH4x", 4, 24) + of.output_action(1 + i % 3, 0)
    return of.flow_mod(xid, 0, of.FC_ADD, 100, oxm, instr)


async def read_msg(reader) -> bytes:
    hdr = await reader.readexactly(8)
    return hdr + await reader.readexactly(struct.unpack_from("!H", hdr, 2)[0] - 8)


class Switch:
    """A minimal OpenFlow 1.3 switch: handshake, barrier and echo replies, packet-out clock."""

    def __init__(self) -> None:
        self.flow_mods = 0
        self.packet_out = asyncio.Event()
        self.writer = None

    async def run(self, port: int) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(of.hello([4]))
        self.writer = writer
        try:
            while True:
                m = await read_msg(reader)
                _, t, _, xid = of.header(m)
                if t == of.OFPT_FEATURES_REQUEST:
                    body = struct.pack("!QIBB2xII", DPID, 0, 254, 0, 0, 0)
                    writer.write(of.message(4, of.OFPT_FEATURES_REPLY, xid, body))
                elif t == of.OFPT_BARRIER_REQUEST:
                    writer.write(of.message(4, of.OFPT_BARRIER_REPLY, xid))
                elif t == of.OFPT_ECHO_REQUEST:
                    writer.write(of.message(4, of.OFPT_ECHO_REPLY, xid, m[8:]))
                elif t == of.OFPT_FLOW_MOD:
                    self.flow_mods += 1
                elif t == of.OFPT_PACKET_OUT:
                    self.packet_out.set()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass  # the peer closed: the run is over
        finally:
            writer.close()

    def packet_in(self) -> None:
        body = struct.pack("!IHBBQ", 0xFFFFFFFF, 60, 0, 0, 0) + struct.pack("!HH4x", 1, 4)
        self.writer.write(of.message(4, of.OFPT_PACKET_IN, 0, body + b"\0\0" + b"\x11" * 60))


class Controller:
    def __init__(self, answer: bool = True) -> None:
        self.answer = answer  # answer PACKET_INs with a PACKET_OUT (idle ones do not)
        self.ready = asyncio.Event()
        self.waiters: dict[int, asyncio.Future] = {}
        self.xid = 0
        self.tasks: set[asyncio.Task] = set()
        self.writers: list = []

    async def handle(self, reader, writer) -> None:
        self.tasks.add(asyncio.current_task())
        self.writers.append(writer)
        self.writer = writer
        writer.write(of.hello([4]))
        try:
            await read_msg(reader)
            writer.write(of.message(4, of.OFPT_FEATURES_REQUEST, 1))
            while True:
                m = await read_msg(reader)
                _, t, _, xid = of.header(m)
                if t == of.OFPT_FEATURES_REPLY:
                    self.ready.set()
                elif t == of.OFPT_PACKET_IN and self.answer:
                    writer.write(of.packet_out(7, 1, m[-60:], of.output_action(2, 0)))
                elif t == of.OFPT_ECHO_REQUEST:
                    writer.write(of.message(4, of.OFPT_ECHO_REPLY, xid, m[8:]))
                fut = self.waiters.pop(xid, None)
                if fut is not None:
                    fut.set_result(m)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass  # the proxy or the switch went away: the run is over
        finally:
            writer.close()

    async def close(self) -> None:
        """Close the connections and wait for the handlers to see EOF (a cancelled handler
        would make asyncio's stream server log the cancellation)."""
        for w in self.writers:
            w.transport.abort()
        if self.tasks:
            await asyncio.wait(self.tasks, timeout=5)

    def next_xid(self) -> int:
        self.xid += 1
        return self.xid

    async def barrier(self, *msgs: bytes) -> None:
        xid = self.next_xid()
        fut = asyncio.get_running_loop().create_future()
        self.waiters[xid] = fut
        self.writer.write(b"".join(msgs) + of.message(4, of.OFPT_BARRIER_REQUEST, xid))
        await fut


def _serve_until_sigterm(start, stop, profile: str | None) -> None:
    """Run start() in an event loop until SIGTERM, then stop(). SIGUSR1 starts profiling
    (written to `profile` at SIGTERM)."""
    prof = None
    if profile:
        import cProfile

        prof = cProfile.Profile()

    async def main():
        loop = asyncio.get_running_loop()
        done = asyncio.Event()
        loop.add_signal_handler(signal.SIGTERM, done.set)
        if prof is not None:
            loop.add_signal_handler(signal.SIGUSR1, prof.enable)
        await start()
        await done.wait()
        if prof is not None:
            prof.disable()
            prof.dump_stats(profile)
        await stop()

    asyncio.run(main())


def run_proxy(
    ctl_port: int, q, db: str, with_model: bool, profile: str | None = None, more=()
) -> None:
    from cpc.model import Model
    from cpc.topology import Topology
    from pazzd.proxy import Proxy, ProxyConfig
    from pazzd.proxy.proxy import Controller as Upstream

    model = None
    if with_model:
        topo = Topology()
        topo.add_switch(DPID, ports=[1, 2, 3])
        model = Model(topo)
        model.build()
    cfg = ProxyConfig(
        listen_host="127.0.0.1",
        listen_port=0,
        controller_port=ctl_port,
        db_path=db,
        audit_interval=0,
        audit_delay=-1,
        controllers=[Upstream("127.0.0.1", p, f"idle{i}") for i, p in enumerate(more)],
    )
    px = Proxy(cfg, model=model)

    async def start():
        await px.start()
        q.put(px.port)

    _serve_until_sigterm(start, px.stop, profile)


def run_relay(
    ctl_port: int, q, db: str, with_model: bool, profile: str | None = None, more=()
) -> None:
    """A bare byte relay switch <-> controller: the floor for one more process hop."""
    servers = []

    class Up(asyncio.Protocol):
        def __init__(self, down) -> None:
            self.down = down

        def data_received(self, data: bytes) -> None:
            self.down.write(data)

        def connection_lost(self, exc) -> None:
            self.down.close()

    class Down(asyncio.Protocol):
        def connection_made(self, transport) -> None:
            self.tr, self.up, self.early = transport, None, []
            asyncio.ensure_future(self._connect())

        async def _connect(self) -> None:
            loop = asyncio.get_running_loop()
            self.up, _ = await loop.create_connection(lambda: Up(self.tr), "127.0.0.1", ctl_port)
            self.up.write(b"".join(self.early))

        def data_received(self, data: bytes) -> None:
            if self.up is None:
                self.early.append(data)
            else:
                self.up.write(data)

        def connection_lost(self, exc) -> None:
            if self.up is not None:
                self.up.close()

    async def start():
        srv = await asyncio.get_running_loop().create_server(Down, "127.0.0.1", 0)
        servers.append(srv)
        q.put(srv.sockets[0].getsockname()[1])

    async def stop():
        for s in servers:
            s.close()

    _serve_until_sigterm(start, stop, None)


def _pin(pids: list[int], cpus: set[int]) -> None:
    for pid in pids:
        with contextlib.suppress(OSError):
            os.sched_setaffinity(pid, cpus)


async def measure(
    port_for_switch, ctl: Controller, rounds: int, flowmods: int, pids, pin, profile_pid=None
):
    sw = Switch()
    task = asyncio.ensure_future(sw.run(await port_for_switch()))
    await asyncio.wait_for(ctl.ready.wait(), 20)
    all_cpus = os.sched_getaffinity(0)
    if pin:
        _pin(pids, {min(all_cpus)})
    fm_rtt, pi_rtt = [], []
    for i in range(rounds):
        t0 = time.perf_counter()
        await ctl.barrier(route_flow_mod(ctl.next_xid(), i))
        fm_rtt.append(time.perf_counter() - t0)
    for _ in range(rounds):
        sw.packet_out.clear()
        t0 = time.perf_counter()
        sw.packet_in()
        await sw.packet_out.wait()
        pi_rtt.append(time.perf_counter() - t0)
    if pin:
        _pin(pids, all_cpus)
    rate = float("nan")
    if flowmods:
        msgs = [route_flow_mod(ctl.next_xid(), 100_000 + i) for i in range(flowmods)]
        if profile_pid:
            os.kill(profile_pid, signal.SIGUSR1)
        t0 = time.perf_counter()
        for k in range(0, flowmods, 100):
            ctl.writer.write(b"".join(msgs[k : k + 100]))
            await asyncio.sleep(0)
        await ctl.barrier()
        rate = flowmods / (time.perf_counter() - t0)
    sw.writer.close()
    await task
    return fm_rtt, pi_rtt, rate


async def run(args) -> dict:
    out = {}
    pin = not args.no_pin and hasattr(os, "sched_setaffinity")
    for mode in ("direct", "relay", "proxy"):
        ctl = Controller()
        server = await asyncio.start_server(ctl.handle, "127.0.0.1", 0)
        cport = server.sockets[0].getsockname()[1]
        idle, more = [], []
        for _ in range(args.controllers - 1 if mode == "proxy" else 0):
            c = Controller(answer=False)
            idle.append((c, await asyncio.start_server(c.handle, "127.0.0.1", 0)))
            more.append(idle[-1][1].sockets[0].getsockname()[1])
        proc = None
        pids = [0]
        if mode == "direct":

            async def port(cport=cport):
                return cport
        else:
            ctx = mp.get_context("spawn")
            q = ctx.Queue()
            tmpdir = tempfile.mkdtemp(prefix="pazz-bench-proxy-")
            db = os.path.join(tmpdir, "proxy.db")
            target = run_proxy if mode == "proxy" else run_relay
            profile = args.profile if mode == "proxy" else None
            proc = ctx.Process(
                target=target,
                args=(cport, q, db, not args.no_model, profile, more),
                daemon=True,
            )
            proc.start()
            pids.append(proc.pid)

            async def port(q=q):
                return await asyncio.get_running_loop().run_in_executor(None, q.get, True, 30)

        try:
            fm, pi, rate = await measure(
                port,
                ctl,
                args.rounds,
                0 if mode == "relay" else args.flowmods,
                pids,
                pin,
                proc.pid if proc is not None and args.profile else None,
            )
        finally:
            if proc is not None:
                proc.terminate()  # SIGTERM: the child stops its proxy and exits
                await asyncio.get_running_loop().run_in_executor(None, proc.join, 20)
                if proc.exitcode is None:
                    proc.kill()
                shutil.rmtree(tmpdir, ignore_errors=True)  # the proxy's rule database
            for c, srv in [(ctl, server), *idle]:
                srv.close()
                await c.close()
                await srv.wait_closed()
        out[mode] = {"fm": fm, "pi": pi, "rate": rate}
    us = 1e6
    d, r, p = out["direct"], out["relay"], out["proxy"]
    return {
        "rounds": args.rounds,
        "flowmods": args.flowmods,
        "model": not args.no_model,
        "pinned": pin,
        "controllers": args.controllers,
        "flowmod_rtt_us_p50_direct": round(pct(d["fm"], 50) * us, 1),
        "flowmod_rtt_us_p50_proxy": round(pct(p["fm"], 50) * us, 1),
        "packet_in_rtt_us_p50_direct": round(pct(d["pi"], 50) * us, 1),
        "packet_in_rtt_us_p50_relay": round(pct(r["pi"], 50) * us, 1),
        "packet_in_rtt_us_p50_proxy": round(pct(p["pi"], 50) * us, 1),
        "added_latency_us_p50": round((pct(p["pi"], 50) - pct(d["pi"], 50)) * us, 1),
        "relay_added_latency_us_p50": round((pct(r["pi"], 50) - pct(d["pi"], 50)) * us, 1),
        "added_flowmod_latency_us_p50": round((pct(p["fm"], 50) - pct(d["fm"], 50)) * us, 1),
        "flowmods_per_s_direct": round(d["rate"]),
        "flowmods_per_s": round(p["rate"]),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--rounds", type=int, default=2000)
    ap.add_argument("--flowmods", type=int, default=20000)
    ap.add_argument("--no-model", action="store_true", help="proxy without the cpc model")
    ap.add_argument("--controllers", type=int, default=1, help="controllers of the proxy")
    ap.add_argument(
        "--no-pin",
        action="store_true",
        help="round trips with the processes free to run on different CPUs",
    )
    ap.add_argument(
        "--profile",
        metavar="FILE",
        help="cProfile of the proxy process during the FlowMod-rate phase",
    )
    args = ap.parse_args()
    res = asyncio.run(run(args))
    if args.json:
        print(json.dumps(res))
    else:
        for k, v in res.items():
            print(f"{k:32} {v}")


if __name__ == "__main__":
    main()
