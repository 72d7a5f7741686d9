"""The pazzd process: its command line, the signals (caught from pazzd's first instruction
by pazzd.launch, then by the event loop), and a bounded run of the daemon's event loop
(pazzd.daemon).

    pazzd --config /etc/pazz/pazzd.yaml [--check] [--tester-workers N]
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
import threading

from cpc.rules import ModelError
from cpc.topology import TopologyError

from . import version
from .config import ConfigError, load_config
from .daemon import STOP_BOUND, Daemon, StartCancelled
from .launch import hold_signals
from .notify import setup_logging
from .wiring import StartError

__all__ = ["hold_signals", "main"]

log = logging.getLogger("pazzd")


def _setup_logging(level: str = "info") -> None:
    setup_logging(level, "%(levelname)s %(name)s: %(message)s")


STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


async def _amain(d: Daemon, early: list[int] | None = None) -> int:
    loop = asyncio.get_running_loop()
    # Handlers first, then the build: a signal during the start is acted on, not fatal.
    loop.add_signal_handler(signal.SIGHUP, d.request_reload)
    for sig in STOP_SIGNALS:
        loop.add_signal_handler(sig, d.request_stop)
    for sig in early or ():  # SIGHUPs before the loop (pazzd.launch)
        (d.request_reload if sig == signal.SIGHUP else d.request_stop)()
    try:
        await d.start()
    except StartCancelled:
        log.info("stopping during start-up")
        await d.stop()
        return 0
    except ConfigError as e:
        log.error("%s", e)
        await d.stop()
        return 2
    except StartError as e:
        log.error("start-up failed: %s", e)
        await d.stop()
        return 1
    except (ModelError, TopologyError, OSError) as e:
        log.error("start-up failed: %s", e)
        await d.stop()
        return 1
    d._started = True
    if d._reload_pending:
        await d.reload()
    await d.stop_event.wait()
    log.info("stopping")
    try:
        await asyncio.wait_for(d.stop(), STOP_BOUND - 1.0)
    except TimeoutError:
        log.error("shutdown did not finish within %.0f s; exiting anyway", STOP_BOUND - 1.0)
    return 0


def _run(coro) -> int:
    """asyncio.run, bounded: tasks left over get a second to end, and threads of the
    default executor (a blocked localization, say) are not waited for."""
    loop = asyncio.new_event_loop()
    try:
        rc = loop.run_until_complete(coro)
        left = [t for t in asyncio.all_tasks(loop) if not t.done()]
        for t in left:
            t.cancel()
        if left:
            loop.run_until_complete(asyncio.wait(left, timeout=1.0))
    finally:
        ex = getattr(loop, "_default_executor", None)
        if ex is not None:
            ex.shutdown(wait=False, cancel_futures=True)
        loop.close()
    stuck = [
        t
        for t in threading.enumerate()
        if t is not threading.main_thread() and not t.daemon and t.is_alive()
    ]
    if stuck:  # the interpreter would join them at exit, for ever
        log.warning("exiting with %d threads still busy", len(stuck))
        logging.shutdown()
        os._exit(rc)
    return rc


def main(argv=None, early: list[int] | None = None) -> int:
    """early: signals received before main (pazzd.launch, which `python -m pazzd` runs)."""
    if early is None:
        early = hold_signals()
    p = argparse.ArgumentParser(prog="pazzd", description="PAZZ consistency monitor daemon")
    p.add_argument("--version", action="version", version=f"pazzd {version()}")
    p.add_argument(
        "--config",
        "-c",
        default="/etc/pazz/pazzd.yaml",
        metavar="FILE",
        help="the config file (default /etc/pazz/pazzd.yaml)",
    )
    p.add_argument("--check", action="store_true", help="validate the config and exit")
    p.add_argument(
        "--tester-workers",
        type=int,
        metavar="N",
        default=None,
        help="judge sFlow in N worker processes (default: the config's tester.workers)",
    )
    args = p.parse_args(argv)
    if args.tester_workers is not None and not 1 <= args.tester_workers <= 64:
        p.error("--tester-workers must be between 1 and 64")
    _setup_logging()
    if args.check:  # no daemon: the signals kill again
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGHUP, signal.SIG_DFL)
        try:
            load_config(args.config, deep=True)
        except ConfigError as e:
            print(f"pazzd: {e}", file=sys.stderr)
            return 2
        print(f"{args.config}: OK")
        return 0
    return _run(_amain(Daemon(args.config, tester_workers=args.tester_workers), early))


if __name__ == "__main__":
    sys.exit(main())
