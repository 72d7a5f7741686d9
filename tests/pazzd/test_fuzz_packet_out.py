"""With the proxy on, pazzd's fuzzer probes the ingresses that have no injection interface
by PACKET_OUT through the proxy's switch session, and probes the configured critical flows.

The switch is a raw OpenFlow 1.3 peer (tests.reliability.peers.RawSwitch); the PACKET_OUTs
it receives are decoded here as OpenFlow 1.3.5 section 7.3.7 lays them out (os-ken parses
no message of the controller's), their frames by the tester's parser. That the switch
tags such a packet-out like a packet arriving on the port is tested with real OVS in
tests/pazzd/proxy/test_packet_out_ovs.py."""

from __future__ import annotations

import asyncio
import struct

import pytest

import ofwire as of
from cpc import tags
from pazzd.daemon import Daemon
from tester.emit import ReferenceEmitter, agent_of
from tester.packet import parse_frame
from tests.reliability.peers import RawSwitch, wait_for

from .helpers import base_config, write_config

CRITICAL_DST = 0x0A0B0C0D  # 10.11.12.13: nothing else probes it on purpose
OFPP_TABLE, OFP_NO_BUFFER, OFPAT_OUTPUT = 0xFFFFFFF9, 0xFFFFFFFF, 0


def packet_out(m: bytes) -> tuple[int, int, list[tuple], bytes]:
    """(buffer_id, in_port, [(action type, len, port, max_len)], data)"""
    buffer_id, in_port, alen = struct.unpack_from("!IIH", m, 8)
    acts = [struct.unpack_from("!HHIH", m, off) for off in range(24, 24 + alen, 16)]
    return buffer_id, in_port, acts, m[24 + alen :]


def test_fuzz_probes_go_out_as_packet_outs_through_the_proxy(tmp_path):
    cfg = base_config(
        tmp_path,
        controller={"enabled": True, "listen": "127.0.0.1:0", "audit_interval": 0},
        fuzz={"enabled": True, "rate": 200, "pairs": [["s1:5", "s4:5"], ["s1:5", "s2:5"]]},
        critical_flows=[
            {
                "name": "web",
                "from": "s1:5",
                "to": "s4:5",
                "header": "eth_type=0x800,ip_proto=6,ipv4_dst=10.11.12.13",
            }
        ],
    )
    path = write_config(tmp_path / "pazzd.yaml", cfg)

    async def main():
        d = Daemon(str(path))
        await d.start()
        sw = RawSwitch(d.proxy.port, dpid=1)
        try:
            await sw.connect()
            outs = lambda: [m for m in sw.received if m[1] == of.OFPT_PACKET_OUT]  # noqa: E731
            critical = lambda: [  # noqa: E731
                m
                for m in outs()
                if parse_frame(packet_out(m)[3]).header.get("ipv4_dst") == CRITICAL_DST
            ]
            assert await wait_for(lambda: len(outs()) >= 20 and len(critical()) >= 2, 15)
            return outs(), d.injector
        finally:
            await sw.close()
            await d.stop()

    msgs, injector = asyncio.run(main())
    assert injector.default.sent >= len(msgs) > 0
    for m in msgs:
        buffer_id, in_port, acts, data = packet_out(m)
        assert (buffer_id, in_port, acts) == (OFP_NO_BUFFER, 5, [(OFPAT_OUTPUT, 16, OFPP_TABLE, 0)])
        assert tags.unpack_header(data[12:20]) == (tags.VERIFY_PORT_INIT, tags.VERIFY_RULE_INIT)
        assert parse_frame(data).has_verify


@pytest.mark.parametrize(("workers", "marked"), [(1, True), (2, True), (1, False)])
def test_a_suspicious_probe_sample_is_sent_again_from_its_ingress(tmp_path, workers, marked):
    """A fault's first sample has the fuzzer send that header again from the ingress the
    probe came from (the model expects the header nowhere, so it names no ingress itself):
    3 PACKET_OUTs where the switches report every marked probe (sflow.marked_reports), 3N
    at sampling 1/N where they do not.

    workers 1: the in-process tester's on_suspect, called as it calls it. workers 2: a real
    sFlow datagram (the probe's header at s4:5 with tags no path gives it) judged by a
    tester worker process, which hands the suspect to pazzd with its report."""
    sampling, base = 8, 100
    cfg = base_config(
        tmp_path,
        controller={"enabled": True, "listen": "127.0.0.1:0", "audit_interval": 0},
        fuzz={"enabled": True, "rate": 400, "pairs": [["s1:5", "s4:5"], ["s1:5", "s2:5"]]},
        tester={"workers": workers},
    )
    cfg["sflow"]["sampling_rate"] = sampling
    cfg["sflow"]["marked_reports"] = marked
    want = 3 if marked else 3 * sampling
    cfg["sflow"]["interfaces"] = [
        {"agent": agent_of(d), "ifindex": base + p, "port": f"{d}:{p}"}
        for d in (1, 2, 3, 4)
        for p in range(1, 6)
    ]
    path = write_config(tmp_path / "pazzd.yaml", cfg)
    host, port = cfg["sflow"]["listen"].rsplit(":", 1)

    async def main():
        d = Daemon(str(path))
        await d.start()
        sw = RawSwitch(d.proxy.port, dpid=1)
        try:
            await sw.connect()
            outs = lambda: [  # noqa: E731
                packet_out(m) for m in sw.received if m[1] == of.OFPT_PACKET_OUT
            ]
            assert await wait_for(lambda: len(outs()) >= 10, 15)
            _, _, _, data = next(
                o for o in outs() if d.fuzzer.sender(parse_frame(o[3]).header) == (1, 5)
            )
            hdr = parse_frame(data).header
            same = lambda: [o for o in outs() if parse_frame(o[3]).header == hdr]  # noqa: E731
            before = len(same())
            if workers == 1:
                d.tester.on_suspect((4, 5), dict(hdr), ())
            else:
                assert d.workers is not None and d.workers.alive() == workers
                em = ReferenceEmitter(base=base)
                em.add((4, 5), hdr, tags.VERIFY_PORT_INIT, 0x5A5A)
                em.send((host, int(port)), em.flush())
            assert await wait_for(lambda: len(same()) >= before + want, 20)
            await asyncio.sleep(0.3)
            return same(), before
        finally:
            await sw.close()
            await d.stop()

    copies, before = asyncio.run(main())
    # exactly that many, all from the probe's port (the worker's sample is the only suspect)
    assert len(copies) - before == want
    assert {o[1] for o in copies} == {5}
