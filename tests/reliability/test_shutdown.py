"""SIGTERM ends pazzd within its bound (5 s) even while the audit
waits for a flow dump that a switch never answers."""

from __future__ import annotations

import socket
import struct
import time

import ofwire as of
from tests.pazzd.helpers import Pazzd, base_config, free_port, write_config

BOUND = 5.0


def _read_msg(s: socket.socket) -> bytes:
    hdr = b""
    while len(hdr) < 8:
        chunk = s.recv(8 - len(hdr))
        if not chunk:
            raise ConnectionError("closed")
        hdr += chunk
    ln = struct.unpack_from("!H", hdr, 2)[0]
    body = b""
    while len(body) < ln - 8:
        chunk = s.recv(ln - 8 - len(body))
        if not chunk:
            raise ConnectionError("closed")
        body += chunk
    return hdr + body


def test_sigterm_while_the_audit_waits_for_a_flow_dump(tmp_path):
    ctl = socket.socket()
    ctl.bind(("127.0.0.1", 0))
    ctl.listen(4)
    listen = free_port()
    cfg = base_config(
        tmp_path,
        controller={
            "enabled": True,
            "listen": f"127.0.0.1:{listen}",
            "address": f"127.0.0.1:{ctl.getsockname()[1]}",
            "audit_delay": 3600,
            "audit_interval": 0.5,
        },
    )
    cfg.pop("rules")
    d = Pazzd(write_config(tmp_path / "pazzd.yaml", cfg))
    sw = socket.socket()
    try:
        d.wait_ready()
        sw.settimeout(5)
        sw.connect(("127.0.0.1", listen))
        sw.sendall(of.hello([4]))
        dump = None
        deadline = time.monotonic() + 10
        while dump is None and time.monotonic() < deadline:
            m = _read_msg(sw)
            if m[1] == of.OFPT_FEATURES_REQUEST:
                body = struct.pack("!QIBB2xII", 1, 0, 254, 0, 0, 0)
                sw.sendall(of.message(4, of.OFPT_FEATURES_REPLY, of.header(m)[3], body))
            elif m[1] == of.OFPT_MULTIPART_REQUEST:
                dump = m  # the audit's flow dump: never answered
        assert dump is not None
        t0 = time.monotonic()
        d.proc.terminate()
        d.proc.wait(timeout=30)
        took = time.monotonic() - t0
        assert took < BOUND, (took, d.log_text()[-2000:])
        assert d.proc.returncode == 0
    finally:
        sw.close()
        ctl.close()
        d.stop()
