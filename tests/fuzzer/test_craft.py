"""Probe frames: byte-for-byte equal to scapy's, fast, and carrying their sequence number."""

from __future__ import annotations

import random
import time

import pytest

from cpc.space import HeaderSpace
from fuzzer.craft import Crafter, probe_seq
from fuzzer.hspace import Sampler, canonicalize, valid_headers
from tester.packet import parse_frame


def _headers(n: int, seed: int = 1):
    space = HeaderSpace()
    s = Sampler(space, valid_headers(space))
    rng = random.Random(seed)
    out = []
    kinds = [(0x0800, 6), (0x0800, 17), (0x0800, 1), (0x0800, 47), (0x0806, 0), (0x86DD, 0)]
    for i in range(n):
        h = s.uniform(rng)
        if i < 4 * len(kinds):
            et, proto = kinds[i % len(kinds)]
            h.update(eth_type=et, ip_proto=proto)
            h["vlan_vid"] = 0x1000 | rng.getrandbits(12) if i % 2 else 0
            h = canonicalize(h)
        out.append(h)
    return out


@pytest.mark.parametrize("pretag,mark", [(False, False), (True, False), (False, True)])
def test_frames_equal_scapy(pretag, mark):
    c = Crafter(pretag=pretag, mark=mark)
    for i, h in enumerate(_headers(400)):
        seq = (i * 2654435761) & 0xFFFFFFFF
        f = c.frame(h, seq)
        assert f == c.scapy_packet(h, seq), h
        assert probe_seq(f) == seq
        p = parse_frame(f)  # the tester's independent parser reads the header back
        assert p.header == h
        assert p.has_verify == (pretag or mark) and p.marked == mark
        if mark:  # the marked shim: 0x0821, Verify_Port 0, Verify_Rule 1
            assert f[12:20] == bytes.fromhex("0821000000000001")


def test_crafting_throughput():
    c = Crafter(pretag=True)
    hs = _headers(500)
    c.frame(hs[0])
    t = time.perf_counter()
    n = 0
    while n < 20000:
        for i, h in enumerate(hs):
            c.frame(h, i)
        n += len(hs)
    rate = n / (time.perf_counter() - t)
    assert rate >= 10_000, rate


def test_probe_seq_of_other_frames_is_none():
    assert probe_seq(b"\x00" * 60) is None
    assert probe_seq(b"") is None
