"""cpc.tags against the vectors generated from Open vSwitch's own C code.

tests/vectors/verify.json is produced by tests/vectors/generate.sh, which compiles
tests/vectors/gen_verify_vectors.c together with lib/jhash.c from the OVS source
tarball. The patched datapath is checked against the same file (tests/ovs).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from cpc import tags

VECTORS_DIR = Path(__file__).resolve().parent / "vectors"
VECTORS = json.loads((VECTORS_DIR / "verify.json").read_text())
TARBALL = Path("/usr/src/openvswitch/openvswitch.tar.gz")


def test_vector_counts():
    assert len(VECTORS["jhash_bytes"]) >= 50
    assert len(VECTORS["verify_port"]) >= 50
    assert len(VECTORS["verify_rule"]) >= 50
    lengths = {len(v["data"]) // 2 for v in VECTORS["jhash_bytes"]}
    assert set(range(41)) <= lengths


@pytest.mark.parametrize("vec", VECTORS["jhash_bytes"], ids=lambda v: f"len{len(v['data']) // 2}")
def test_jhash_bytes(vec):
    assert tags.jhash_bytes(bytes.fromhex(vec["data"]), vec["basis"]) == vec["hash"]


@pytest.mark.parametrize("vec", VECTORS["verify_port"])
def test_set_verify_port(vec):
    after = tags.set_verify_port(vec["before"], vec["dpid"], vec["in_port"])
    assert after == vec["after"]
    # Exactly the three Bloom bits (1 to 3 distinct positions) are added.
    assert 1 <= bin(tags.port_bits(vec["dpid"], vec["in_port"])).count("1") <= 3


@pytest.mark.parametrize("vec", VECTORS["verify_rule"])
def test_set_verify_rule(vec):
    after = tags.set_verify_rule(
        vec["before"],
        vec["dpid"],
        vec["table_id"],
        vec["priority"],
        vec["cookie"],
        vec["rule_id"],
    )
    assert after == vec["after"]


def test_generator_reproduces_committed_vectors():
    if shutil.which("gcc") is None:
        pytest.skip("gcc is not installed: cannot compile the vector generator")
    if not TARBALL.exists():
        pytest.skip(f"{TARBALL} missing (apt-get install openvswitch-source)")
    out = subprocess.run(
        [str(VECTORS_DIR / "generate.sh")],
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout
    assert json.loads(out) == VECTORS
    assert out == (VECTORS_DIR / "verify.json").read_text()
