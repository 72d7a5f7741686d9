"""Through a real (in-process) pazzd: bad API arguments are refused
with a one-line error and the daemon keeps answering."""

from __future__ import annotations

import asyncio

import pytest

from pazzapi import ApiError, call
from pazzd.daemon import Daemon
from tests.pazzd.helpers import base_config, write_config


def test_reach_limit_is_checked(tmp_path):
    cfg = write_config(tmp_path / "pazzd.yaml", base_config(tmp_path))

    async def main():
        d = Daemon(str(cfg))
        await d.start()
        try:
            sock = d.cfg.api.socket

            def reach(limit):
                return call(sock, "reach", 5.0, src="s1:5", dst="s2:5", limit=limit)

            ok = await asyncio.to_thread(reach, 3)
            assert len(ok["cubes"]) <= 3
            for bad in (-1, -(10**9), "x", 1.5, 10**12, True):
                with pytest.raises(ApiError, match="limit"):
                    await asyncio.to_thread(reach, bad)
            st = await asyncio.to_thread(call, sock, "status", 5.0)
            assert st["pid"]
        finally:
            await d.stop()

    asyncio.run(asyncio.wait_for(main(), 60))
