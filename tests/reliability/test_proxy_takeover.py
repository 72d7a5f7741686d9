"""A connection that claims the dpid of a connected switch is refused
while that switch answers echo requests; a dead connection is replaced."""

from __future__ import annotations

import asyncio

from tests.reliability.peers import RawControllerServer, RawSwitch, start_proxy, wait_for


def test_live_switch_keeps_its_dpid():
    async def main():
        ctl = RawControllerServer()
        proxy = await start_proxy(await ctl.start(), takeover_timeout=0.5)
        real, fake = RawSwitch(proxy.port, dpid=3), RawSwitch(proxy.port, dpid=3)
        try:
            await real.connect()  # reads and answers echo requests
            assert await wait_for(lambda: 3 in proxy.switches, 5)
            s = proxy.switches[3]
            await fake.connect()
            assert await wait_for(lambda: proxy.takeovers_refused == 1, 5)
            assert proxy.switches[3] is s and not s.closed
            assert await wait_for(lambda: len(proxy._sessions) == 1, 2)
        finally:
            await real.close()
            await fake.close()
            await proxy.stop()
            await ctl.stop()

    asyncio.run(asyncio.wait_for(main(), 30))


def test_dead_connection_is_replaced():
    async def main():
        ctl = RawControllerServer()
        proxy = await start_proxy(await ctl.start(), takeover_timeout=0.5, idle_timeout=600)
        dead, new = RawSwitch(proxy.port, dpid=4), RawSwitch(proxy.port, dpid=4)
        try:
            await dead.connect(reading=False)  # stops answering: a half-dead connection
            assert await wait_for(lambda: 4 in proxy.switches, 5)
            old = proxy.switches[4]
            await new.connect()
            assert await wait_for(lambda: proxy.switches.get(4) not in (None, old), 5)
            assert old.closed and proxy.takeovers_refused == 0
        finally:
            await dead.close()
            await new.close()
            await proxy.stop()
            await ctl.stop()

    asyncio.run(asyncio.wait_for(main(), 30))


def _certs(d) -> dict:
    """A CA and a certificate for localhost signed by it (openssl, into d)."""
    import subprocess

    def run(*args):
        subprocess.run(["openssl", *args], check=True, capture_output=True, timeout=60)

    run(
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-days",
        "2",
        "-subj",
        "/CN=pazz-ca",
        "-keyout",
        str(d / "ca.key"),
        "-out",
        str(d / "ca.crt"),
    )
    run(
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-subj",
        "/CN=localhost",
        "-keyout",
        str(d / "srv.key"),
        "-out",
        str(d / "srv.csr"),
    )
    (d / "ext.cnf").write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    run(
        "x509",
        "-req",
        "-in",
        str(d / "srv.csr"),
        "-CA",
        str(d / "ca.crt"),
        "-CAkey",
        str(d / "ca.key"),
        "-CAcreateserial",
        "-days",
        "2",
        "-extfile",
        str(d / "ext.cnf"),
        "-out",
        str(d / "srv.crt"),
    )
    return {"ca": d / "ca.crt", "cert": d / "srv.crt", "key": d / "srv.key"}


def test_tls_from_the_config(tmp_path):
    import ssl

    import pytest

    from pazzd.config import ConfigError, load_config
    from pazzd.proxy.proxy import tls_contexts
    from tests.pazzd.helpers import base_config, write_config

    c = _certs(tmp_path)
    cfg = base_config(tmp_path)
    cfg["controller"] = {"enabled": True, "tls": {"cert": "srv.crt", "key": "srv.key"}}
    loaded = load_config(str(write_config(tmp_path / "pazzd.yaml", cfg)))
    assert loaded.controller.tls == {"cert": str(c["cert"]), "key": str(c["key"])}  # relative
    cfg["controller"]["tls"] = {"cert": "srv.crt"}
    with pytest.raises(ConfigError, match=r"controller\.tls\.key"):
        load_config(str(write_config(tmp_path / "bad.yaml", cfg)))
    cfg["controller"]["tls"] = {"cert": "srv.crt", "key": "nope.key"}
    with pytest.raises(ConfigError, match="no such file"):
        load_config(str(write_config(tmp_path / "bad.yaml", cfg)))

    server_ctx, _ = tls_contexts(loaded.controller.tls, None)
    client_ctx = ssl.create_default_context(cafile=str(c["ca"]))

    async def main():
        ctl = RawControllerServer()
        proxy = await start_proxy(await ctl.start(), switch_ssl=server_ctx, handshake_timeout=1)
        sw, plain = RawSwitch(proxy.port, dpid=8), RawSwitch(proxy.port, dpid=9)
        try:
            await sw.connect(ssl=client_ctx)
            assert await wait_for(lambda: 8 in proxy.switches, 5)
            with pytest.raises((ConnectionError, TimeoutError, asyncio.IncompleteReadError)):
                await plain.connect(timeout=3)
            assert 9 not in proxy.switches
        finally:
            await sw.close()
            await plain.close()
            await proxy.stop()
            await ctl.stop()

    asyncio.run(asyncio.wait_for(main(), 30))
