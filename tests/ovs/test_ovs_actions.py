"""The Verify actions in ovs-ofctl / ofproto/trace, and the C tag functions of the patched tree."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from cpc import tags

pytestmark = pytest.mark.ovs

VECTORS = json.loads((Path(__file__).resolve().parents[1] / "vectors/verify.json").read_text())

ACTIONS = [
    "push_verify,set_verify_port,set_verify_rule:7,output:2",
    "set_verify_rule,pop_verify,output:1",
    "set_verify_rule:0,set_verify_rule:4294967295,push_verify,pop_verify,set_verify_port",
]


@pytest.mark.parametrize("version", ["OpenFlow10", "OpenFlow13"])
def test_actions_round_trip(ovs, version):
    ovs.add_bridge("br0", dpid=0x10)
    for i, acts in enumerate(ACTIONS):
        ovs.ofctl(
            "add-flow",
            "br0",
            f"priority={100 + i},ip,nw_dst=10.0.0.{i},actions={acts}",
            version=version,
        )
    out = ovs.ofctl("dump-flows", "br0", version=version)
    for i, acts in enumerate(ACTIONS):
        line = next(x for x in out.splitlines() if f"nw_dst=10.0.0.{i} " in x)
        assert line.split(" actions=")[1].strip() == acts


def test_trace_shows_verify_actions(ovs):
    dpid = 0x2A
    ovs.add_bridge("br0", dpid=dpid, other_config={"verify-tagging": "true"})
    for name, port in (("p1", 1), ("p2", 2)):
        ovs.vsctl(
            "add-port",
            "br0",
            name,
            "--",
            "set",
            "interface",
            name,
            "type=internal",
            f"ofport_request={port}",
            "other_config:verify-edge=true",
        )
    ovs.ofctl(
        "add-flow",
        "br0",
        "priority=5,cookie=0x99,ip,nw_dst=10.0.0.2,actions=set_verify_rule:7,output:2",
    )
    out = ovs.appctl("ofproto/trace", "br0", "in_port=1,ip,nw_dst=10.0.0.2")
    k = tags.set_verify_rule(0, dpid, 0, 5, 0x99, 7)  # CRC(0, u_r) is the per-entry constant
    bits = tags.port_bits(dpid, 1)
    dp = out.split("Datapath actions:")[1].strip()
    # An ordinary edge port strips a host's probe mark before the push (ovs-patches 0006).
    assert dp.startswith(
        f"verify_unmark,verify_push,verify_port(0x{bits:08x}),verify_rule(0x{k:04x}),"
    )
    assert "verify_pop" in dp
    assert "set_verify_rule:7" in out

    # Without verify-tagging, only the explicit actions are translated.
    ovs.vsctl("set", "bridge", "br0", "other_config:verify-tagging=false")
    out = ovs.appctl("ofproto/trace", "br0", "in_port=1,ip,nw_dst=10.0.0.2")
    dp = out.split("Datapath actions:")[1].strip()
    assert dp == f"verify_rule(0x{k:04x}),2" or dp.startswith(f"verify_rule(0x{k:04x}),")
    assert "verify_push" not in dp and "verify_port" not in dp


C_TEST = r"""
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stddef.h>
/* From the patched lib/packets.h (internal header, not installed). */
uint32_t verify_port_bits(uint64_t dpid, uint32_t in_port);
uint16_t verify_crc16(uint16_t crc, const void *p, size_t n);
uint16_t verify_rule_const(uint64_t dpid, uint8_t table_id, uint16_t priority,
                           uint64_t cookie, uint32_t rule_id);
uint16_t verify_rule_step(uint16_t before, uint16_t rule_const);
uint32_t jhash_bytes(const void *, size_t, uint32_t);

int main(void) {
    char kind;
    while (scanf(" %c", &kind) == 1) {
        if (kind == 'P') {
            uint64_t dpid; uint32_t port, before;
            scanf("%" SCNu64 " %" SCNu32 " %" SCNu32, &dpid, &port, &before);
            printf("%" PRIu32 "\n", before | verify_port_bits(dpid, port));
        } else if (kind == 'R') {
            uint64_t dpid, cookie; unsigned table, prio, before; uint32_t id;
            scanf("%" SCNu64 " %u %u %" SCNu64 " %" SCNu32 " %u",
                  &dpid, &table, &prio, &cookie, &id, &before);
            printf("%u\n", verify_rule_step(before,
                   verify_rule_const(dpid, table, prio, cookie, id)));
        } else if (kind == 'J') {
            unsigned n, basis; unsigned char buf[256];
            scanf("%u %u", &n, &basis);
            for (unsigned i = 0; i < n; i++) { unsigned b; scanf("%2x", &b); buf[i] = b; }
            printf("%" PRIu32 "\n", jhash_bytes(buf, n, basis));
        }
    }
    return 0;
}
"""


def test_c_tag_functions_match_vectors(ovs_prefix, tmp_path):
    """Links a small C program against the patched libopenvswitch and checks verify.json."""
    if shutil.which("gcc") is None:
        pytest.skip("gcc not installed")
    lib = ovs_prefix / "lib/libopenvswitch.a"
    if not lib.exists():
        pytest.skip(f"{lib} not installed")
    src = tmp_path / "t.c"
    src.write_text(C_TEST)
    exe = tmp_path / "t"
    env = dict(os.environ, PKG_CONFIG_PATH=str(ovs_prefix / "lib/pkgconfig"))
    libs = subprocess.run(
        ["pkg-config", "--libs", "--static", "libopenvswitch"],
        capture_output=True,
        text=True,
        env=env,
    ).stdout.split()
    libs = [x for x in libs if x != "-lopenvswitch"]
    subprocess.run(
        ["gcc", "-O1", "-o", str(exe), str(src), str(lib), *libs, "-lpthread", "-lm", "-lrt"],
        check=True,
        capture_output=True,
        text=True,
    )
    lines, expect = [], []
    for v in VECTORS["verify_port"]:
        lines.append(f"P {v['dpid']} {v['in_port']} {v['before']}")
        expect.append(v["after"])
    for v in VECTORS["verify_rule"]:
        lines.append(
            f"R {v['dpid']} {v['table_id']} {v['priority']} {v['cookie']} "
            f"{v['rule_id']} {v['before']}"
        )
        expect.append(v["after"])
    for v in VECTORS["jhash_bytes"]:
        lines.append(f"J {len(v['data']) // 2} {v['basis']} {v['data']}")
        expect.append(v["hash"])
    out = subprocess.run(
        [str(exe)], input="\n".join(lines) + "\n", capture_output=True, text=True, check=True
    ).stdout.split()
    assert [int(x) for x in out] == expect
