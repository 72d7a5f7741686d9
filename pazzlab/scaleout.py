"""The lab in scale-out mode (docs/scaling.md): a private nats-server with JetStream, and
a `pazzd collector` on the lab's sFlow target with `pazzd worker`s judging for the primary
pazzd. Every process goes on the caller's list, stopped with it (pazzlab.ovs.stop_processes:
newest first, so nats-server last)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from .natsserver import NatsServer

__all__ = ["SHARDS", "start_components", "start_nats"]

SHARDS = 4


def start_nats(workdir: Path, procs: list) -> NatsServer:
    """nats-server -js, its store in workdir/nats; its process goes on `procs`."""
    nats = NatsServer(str(workdir / "nats"))
    nats.start()
    procs.append(nats.proc)
    return nats


def start_components(config: Path | str, listen: str, workers: int, workdir: Path) -> list:
    """`pazzd collector` on `listen` (HOST:PORT, where the switches send sFlow) and
    `workers` `pazzd worker`s (w0, w1, ...), all reading `config`; each logs to
    workdir/<name>.log."""
    out = []
    for args, name in [
        (["collector", "--config", str(config), "--listen", listen], "collector"),
        *(
            (["worker", "--config", str(config), "--name", f"w{i}"], f"w{i}")
            for i in range(workers)
        ),
    ]:
        with open(workdir / f"{name}.log", "w") as log:
            out.append(
                subprocess.Popen(
                    [sys.executable, "-m", "pazzd", *args],
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            )
    return out
