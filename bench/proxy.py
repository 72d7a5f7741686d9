"""Overhead of the OpenFlow proxy: FlowMod and packet-in round trips through pazzd's proxy
against a direct controller-switch connection, in the same run, and sustained FlowMod rate
with the model updated.

    python bench/proxy.py [--json] [--rounds N] [--flowmods N]

The proxy runs in its own process (as pazzd does); a minimal OpenFlow 1.3 switch and
controller run in this process, over loopback TCP.
- FlowMod round trip: the controller sends a FlowMod and a barrier, and waits for the
  barrier reply (the proxy adds its rule ID, its own barrier, and applies the FlowMod to its
  table, SQLite and the cpc model when its barrier returns).
- Packet-in round trip: the switch sends a PACKET_IN, the controller answers with a
  PACKET_OUT, the switch takes the time when it arrives.
- flowmods_per_s: N distinct /32 route FlowMods sent back to back, then a barrier; the rate
  is N / (time until the controller's barrier reply and the proxy's model has them all).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import os
import struct
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.common import pct  # noqa: E402
from pazzd import openflow as of  # noqa: E402

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

    async def run(self, port: int) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(of.hello([4]))
        self.writer = writer
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

    def packet_in(self) -> None:
        body = struct.pack("!IHBBQ", 0xFFFFFFFF, 60, 0, 0, 0) + struct.pack("!HH4x", 1, 4)
        self.writer.write(of.message(4, of.OFPT_PACKET_IN, 0, body + b"\0\0" + b"\x11" * 60))


class Controller:
    def __init__(self) -> None:
        self.ready = asyncio.Event()
        self.waiters: dict[int, asyncio.Future] = {}
        self.xid = 0

    async def handle(self, reader, writer) -> None:
        self.writer = writer
        writer.write(of.hello([4]))
        await read_msg(reader)
        writer.write(of.message(4, of.OFPT_FEATURES_REQUEST, 1))
        while True:
            m = await read_msg(reader)
            _, t, _, xid = of.header(m)
            if t == of.OFPT_FEATURES_REPLY:
                self.ready.set()
            elif t == of.OFPT_PACKET_IN:
                writer.write(of.packet_out(7, 1, m[-60:], of.output_action(2, 0)))
            elif t == of.OFPT_ECHO_REQUEST:
                writer.write(of.message(4, of.OFPT_ECHO_REPLY, xid, m[8:]))
            fut = self.waiters.pop(xid, None)
            if fut is not None:
                fut.set_result(m)

    def next_xid(self) -> int:
        self.xid += 1
        return self.xid

    async def barrier(self, *msgs: bytes) -> None:
        xid = self.next_xid()
        fut = asyncio.get_running_loop().create_future()
        self.waiters[xid] = fut
        self.writer.write(b"".join(msgs) + of.message(4, of.OFPT_BARRIER_REQUEST, xid))
        await fut


def run_proxy(ctl_port: int, q, db: str, with_model: bool) -> None:
    from cpc.model import Model
    from cpc.topology import Topology
    from pazzd.proxy import Proxy, ProxyConfig

    async def main():
        model = None
        if with_model:
            topo = Topology()
            topo.add_switch(DPID, ports=[1, 2, 3])
            model = Model(topo)
            model.build()
        cfg = ProxyConfig(listen_host="127.0.0.1", listen_port=0, controller_port=ctl_port,
                          db_path=db, audit_interval=0, audit_delay=-1)  # fmt: skip
        px = Proxy(cfg, model=model)
        await px.start()
        q.put(px.port)
        await asyncio.Event().wait()

    asyncio.run(main())


async def measure(port_for_switch, ctl: Controller, rounds: int, flowmods: int):
    sw = Switch()
    task = asyncio.ensure_future(sw.run(await port_for_switch()))
    await asyncio.wait_for(ctl.ready.wait(), 20)
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
    msgs = [route_flow_mod(ctl.next_xid(), 100_000 + i) for i in range(flowmods)]
    t0 = time.perf_counter()
    for k in range(0, flowmods, 100):
        ctl.writer.write(b"".join(msgs[k : k + 100]))
        await asyncio.sleep(0)
    await ctl.barrier()
    rate = flowmods / (time.perf_counter() - t0)
    task.cancel()
    ctl.writer.close()
    return fm_rtt, pi_rtt, rate


async def run(args) -> dict:
    out = {}
    for mode in ("direct", "proxy"):
        ctl = Controller()
        server = await asyncio.start_server(ctl.handle, "127.0.0.1", 0)
        cport = server.sockets[0].getsockname()[1]
        proc = None
        if mode == "direct":

            async def port(cport=cport):
                return cport
        else:
            q = mp.get_context("spawn").Queue()
            db = os.path.join(tempfile.mkdtemp(prefix="pazz-bench-"), "proxy.db")
            proc = mp.get_context("spawn").Process(
                target=run_proxy, args=(cport, q, db, not args.no_model), daemon=True
            )
            proc.start()

            async def port(q=q):
                return await asyncio.get_running_loop().run_in_executor(None, q.get, True, 30)

        try:
            fm, pi, rate = await measure(port, ctl, args.rounds, args.flowmods)
        finally:
            if proc is not None:
                proc.terminate()
                proc.join(5)
            server.close()
        out[mode] = {"fm": fm, "pi": pi, "rate": rate}
    us = 1e6
    d, p = out["direct"], out["proxy"]
    return {
        "rounds": args.rounds,
        "flowmods": args.flowmods,
        "model": not args.no_model,
        "flowmod_rtt_us_p50_direct": round(pct(d["fm"], 50) * us, 1),
        "flowmod_rtt_us_p50_proxy": round(pct(p["fm"], 50) * us, 1),
        "packet_in_rtt_us_p50_direct": round(pct(d["pi"], 50) * us, 1),
        "packet_in_rtt_us_p50_proxy": round(pct(p["pi"], 50) * us, 1),
        "added_latency_us_p50": round((pct(p["pi"], 50) - pct(d["pi"], 50)) * us, 1),
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
    args = ap.parse_args()
    res = asyncio.run(run(args))
    if args.json:
        print(json.dumps(res))
    else:
        for k, v in res.items():
            print(f"{k:32} {v}")


if __name__ == "__main__":
    main()
