"""`pazzd collector` and `pazzd worker`: the scale-out components, each reading the same
pazzd.yaml as the primary (scaleout.nats and scaleout.shards; the collector sflow.listen
and sflow.agents; the worker the topology and the tester's settings)."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys

from ..config import ConfigError, load_config
from ..notify import setup_logging

__all__ = ["main"]

log = logging.getLogger("pazzd.scaleout")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="pazzd", description="PAZZ scale-out components")
    sub = p.add_subparsers(dest="command", required=True)
    c = sub.add_parser("collector", help="sFlow in, samples out to NATS JetStream")
    c.add_argument("--config", required=True, help="pazzd.yaml (scaleout, sflow)")
    c.add_argument("--listen", help="HOST:PORT for sFlow (default: sflow.listen)")
    w = sub.add_parser("worker", help="a model replica judging sample shards")
    w.add_argument("--config", required=True, help="pazzd.yaml (scaleout, topology, tester)")
    w.add_argument("--name", help="this worker's name (default: host-pid)")
    for s in (c, w):
        s.add_argument("--nats", help="NATS URL (default: scaleout.nats)")
        s.add_argument("--log-level", default="info")
    return p


def _hostport(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"--listen {text!r}: want HOST:PORT")
    return host.strip("[]") or "0.0.0.0", int(port)


async def _run(a, cfg) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    if a.command == "collector":
        from .collector import run_collector

        host, port = _hostport(a.listen) if a.listen else (cfg.sflow.host, cfg.sflow.port)
        await run_collector(
            cfg.scaleout.nats, host, port, cfg.scaleout.shards, stop, agents=cfg.sflow.agents
        )
    else:
        from .worker import default_name, run_worker

        await run_worker(cfg, a.name or default_name(), stop)
    return 0


def main(argv: list[str] | None = None) -> int:
    a = _parser().parse_args(argv)
    setup_logging(a.log_level, f"%(levelname)s pazzd-{a.command}: %(message)s")
    try:
        cfg = load_config(a.config)
        if a.nats:
            cfg.scaleout.nats = a.nats
        if not cfg.scaleout.nats:
            raise ConfigError(f"{a.config}: scaleout.nats: needed by pazzd {a.command}")
        return asyncio.run(_run(a, cfg))
    except (ConfigError, ValueError) as e:
        print(f"pazzd {a.command}: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"pazzd {a.command}: {e}", file=sys.stderr)
        return 1
