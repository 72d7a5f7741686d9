"""The OpenFlow proxy of pazzd: relays controller <-> switch traffic byte for byte, keeps
the intended rule state (and the cpc model) in step, adds unique rule IDs and audits the
switches' tables. See docs/proxy.md.

Its parts: proxy (lifecycle, connections, own requests), session (one switch and its
controller connections), roles (several controllers: roles, asynchronous configuration, xid
translation), table (FlowMod semantics on the intended entries), feed (the model), audit,
store (SQLite). The OpenFlow codec, the message checks and the flow-monitor replies are in
the ofwire package.
"""

from pazzd.proxy.audit import AuditFinding
from pazzd.proxy.feed import ModelFeed
from pazzd.proxy.proxy import Controller, Proxy, ProxyConfig, tls_contexts
from pazzd.proxy.session import Services, Session
from pazzd.proxy.store import Entry, Store
from pazzd.proxy.table import EntryChange, GroupChange

__all__ = [
    "AuditFinding",
    "Controller",
    "Entry",
    "EntryChange",
    "GroupChange",
    "ModelFeed",
    "Proxy",
    "ProxyConfig",
    "Services",
    "Session",
    "Store",
    "tls_contexts",
]
