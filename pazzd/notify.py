"""systemd notification (sd_notify) written directly to $NOTIFY_SOCKET: READY=1, STATUS=,
RELOADING=1, STOPPING=1 and the watchdog (WATCHDOG=1 every half of $WATCHDOG_USEC).

No library: the protocol is one datagram per message on a Unix socket; a leading '@'
names an abstract socket. Without NOTIFY_SOCKET every call is a no-op.

`setup_logging` logs to stderr; under journald (JOURNAL_STREAM names stderr) each line
carries its syslog priority prefix, so `journalctl -p warning` selects by level.
"""

from __future__ import annotations

import logging
import os
import socket
import sys

__all__ = ["JournalFormatter", "Notifier", "setup_logging"]

log = logging.getLogger("pazzd.notify")


class Notifier:
    def __init__(self, env: dict | None = None) -> None:
        env = os.environ if env is None else env
        addr = env.get("NOTIFY_SOCKET") or ""
        self.addr = "\0" + addr[1:] if addr.startswith("@") else addr
        usec = env.get("WATCHDOG_USEC")
        pid = env.get("WATCHDOG_PID")
        self.watchdog_s: float | None = None
        if usec and (not pid or pid == str(os.getpid())):
            try:
                self.watchdog_s = int(usec) / 1e6
            except ValueError:
                log.warning("WATCHDOG_USEC=%r is not an integer; watchdog off", usec)

    @property
    def enabled(self) -> bool:
        return bool(self.addr)

    @property
    def watchdog_interval(self) -> float | None:
        """Seconds between WATCHDOG=1 pings: half of WATCHDOG_USEC."""
        return self.watchdog_s / 2 if self.watchdog_s else None

    def send(self, *items: str) -> bool:
        if not self.addr:
            return False
        msg = "\n".join(items).encode()
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as s:
                s.connect(self.addr)
                # Never block the daemon on a receiver that does not read.
                s.send(msg, socket.MSG_DONTWAIT)
            return True
        except BlockingIOError:
            log.debug("sd_notify: receiver's queue is full; dropped %r", msg)
            return False
        except OSError as e:
            log.warning("sd_notify to %r failed: %s", self.addr, e)
            return False

    def ready(self, status: str = "") -> bool:
        return self.send("READY=1", *([f"STATUS={status}"] if status else []))

    def status(self, status: str) -> bool:
        return self.send(f"STATUS={status}")

    def reloading(self) -> bool:
        return self.send("RELOADING=1")

    def stopping(self) -> bool:
        return self.send("STOPPING=1")

    def watchdog(self) -> bool:
        return self.send("WATCHDOG=1")


class JournalFormatter(logging.Formatter):
    """Prefixes every line with its syslog priority (<4> for WARNING ...), which journald
    reads from a service's stream, so that `journalctl -p warning -u pazzd` shows the
    warnings and the faults. A multi-line record (a traceback) gets it on every line."""

    PRIORITY = {
        logging.DEBUG: 7,
        logging.INFO: 6,
        logging.WARNING: 4,
        logging.ERROR: 3,
        logging.CRITICAL: 2,
    }

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        prio = self.PRIORITY.get(record.levelno, 6 if record.levelno < logging.WARNING else 3)
        return "\n".join(f"<{prio}>{line}" for line in text.split("\n"))


def _journal_stream() -> bool:
    """stderr is connected to the journal: JOURNAL_STREAM names its device and inode."""
    want = os.environ.get("JOURNAL_STREAM", "")
    try:
        st = os.fstat(sys.stderr.fileno())
    except (OSError, ValueError):
        return False
    return want == f"{st.st_dev}:{st.st_ino}"


def setup_logging(level: str, fmt: str) -> None:
    """Log to stderr: with syslog priority prefixes under journald, else with timestamps."""
    handler = logging.StreamHandler(sys.stderr)
    if _journal_stream():
        handler.setFormatter(JournalFormatter(fmt))
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s " + fmt))
    logging.basicConfig(level=level.upper(), handlers=[handler])
