"""PAZZ fuzzer: probes into the header space production traffic never exercises.

See docs/fuzzer.md. Public API:
  Fuzzer                          scheduling, budget, coverage, metrics (fuzzer.engine)
  CriticalFlow                    a flow probed every period_s (cpc.critical)
  Crafter, probe_seq              probe frames (fuzzer.craft)
  Injector, PacketOutInjector, QueuedPacketOut, RawSocketInjector, ByIngress  (fuzzer.inject)
  Sampler, valid_headers, canonicalize  header-space helpers (fuzzer.hspace)
  TokenBucket                     (fuzzer.rate)
"""

from cpc.critical import CriticalFlow

from .craft import Crafter, probe_seq
from .engine import Fuzzer
from .hspace import Sampler, canonicalize, valid_headers
from .inject import ByIngress, Injector, PacketOutInjector, QueuedPacketOut, RawSocketInjector
from .rate import TokenBucket

__all__ = [
    "ByIngress",
    "Crafter",
    "CriticalFlow",
    "Fuzzer",
    "Injector",
    "PacketOutInjector",
    "QueuedPacketOut",
    "RawSocketInjector",
    "Sampler",
    "TokenBucket",
    "canonicalize",
    "probe_seq",
    "valid_headers",
]
