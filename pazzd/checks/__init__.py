"""The checks pazzd hosts: each one file here, one config section and one line in REGISTRY.

A check gets the daemon's parts (pazzd.services.Services) at `start` and then every model
update, every committed batch of the proxy and a tick twice a second; it hands its
findings to the finding sink (services.sink), which stores, logs, confirms and counts
them. The daemon keeps only the lifecycle and loops over the checks (docs/daemon.md).
"""

from __future__ import annotations

from .audit import AuditCheck
from .base import Check
from .entries import EntryCheck
from .intents import IntentsCheck
from .interference import InterferenceCheck
from .packetins import PacketInCheck

__all__ = ["REGISTRY", "Check"]

# In the order they see events: the intent guard's trials first.
REGISTRY: tuple[type[Check], ...] = (
    IntentsCheck,
    PacketInCheck,
    InterferenceCheck,
    EntryCheck,
    AuditCheck,
)
