"""A private nats-server with JetStream for tests and benchmarks: 127.0.0.1, a free port,
its own store directory; stopped (or restarted on the same port and store) on request."""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

__all__ = ["NatsServer", "available"]


def available() -> bool:
    return shutil.which("nats-server") is not None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class NatsServer:
    """`with NatsServer() as srv:` srv.url; srv.restart(); srv.stop()."""

    def __init__(self, store: str | None = None, max_payload: int = 8 << 20) -> None:
        self._own = store is None
        self.store = Path(store or tempfile.mkdtemp(prefix="pazz-nats-"))
        self.store.mkdir(parents=True, exist_ok=True)
        self.port = _free_port()
        self.max_payload = max_payload
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    def start(self, timeout: float = 10.0) -> None:
        conf = self.store / "server.conf"
        conf.write_text(
            f"listen: 127.0.0.1:{self.port}\nmax_payload: {self.max_payload}\n"
            f'jetstream {{ store_dir: "{self.store / "js"}" }}\n'
        )
        with open(self.store / "server.log", "ab") as log:
            self.proc = subprocess.Popen(
                ["nats-server", "-c", str(conf)], stdout=log, stderr=subprocess.STDOUT
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"nats-server exited ({self.proc.returncode}): "
                    + (self.store / "server.log").read_text()[-2000:]
                )
            with (
                contextlib.suppress(OSError),
                socket.create_connection(("127.0.0.1", self.port), 0.2),
            ):
                return
            time.sleep(0.05)
        raise RuntimeError(f"nats-server not listening on {self.port} in {timeout} s")

    def stop(self, kill: bool = False) -> None:
        p, self.proc = self.proc, None
        if p is None or p.poll() is not None:
            return
        (p.kill if kill else p.terminate)()
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()

    def restart(self) -> None:
        """Stop (SIGTERM: JetStream flushes its files) and start on the same port and store."""
        self.stop()
        self.start()

    def __enter__(self) -> NatsServer:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
        if self._own:
            shutil.rmtree(self.store, ignore_errors=True)
