"""The OpenFlow proxy of pazzd: relays controller <-> switch traffic byte for byte, keeps
the intended rule state (and the cpc model) in step, adds unique rule IDs and audits the
switches' tables. See docs/proxy.md."""

from pazzd.proxy.proxy import AuditFinding, Proxy, ProxyConfig, Session
from pazzd.proxy.store import Entry, Store

__all__ = ["AuditFinding", "Entry", "Proxy", "ProxyConfig", "Session", "Store"]
