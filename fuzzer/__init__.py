"""PAZZ fuzzer: probes into the header space production traffic never exercises.

See docs/fuzzer.md. Public API:
  Fuzzer, CriticalFlow            scheduling, budget, coverage, metrics (fuzzer.engine)
  Crafter, probe_seq              probe frames (fuzzer.craft)
  Injector, PacketOutInjector, OsKenPacketOut, RawSocketInjector, ofp13_packet_out (fuzzer.inject)
  Sampler, valid_headers, canonicalize  header-space helpers (fuzzer.hspace)
  TokenBucket                     (fuzzer.rate)
"""

from .craft import Crafter, probe_seq
from .engine import CriticalFlow, Fuzzer
from .hspace import Sampler, canonicalize, valid_headers
from .inject import Injector, OsKenPacketOut, PacketOutInjector, RawSocketInjector, ofp13_packet_out
from .rate import TokenBucket

__all__ = [
    "Crafter",
    "CriticalFlow",
    "Fuzzer",
    "Injector",
    "OsKenPacketOut",
    "PacketOutInjector",
    "RawSocketInjector",
    "Sampler",
    "TokenBucket",
    "canonicalize",
    "ofp13_packet_out",
    "probe_seq",
    "valid_headers",
]
