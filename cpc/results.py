"""What the model answers: hops, deliveries and the expected report alternatives.

These are plain immutable records (named tuples: cheap to create on the hot path) so that other components (tester, fuzzer,
pazzctl) can use them without knowing how the model computes them.
"""

from __future__ import annotations

from typing import NamedTuple

Port = tuple[int, int]  # (dpid, OpenFlow port number)


class RuleRef(NamedTuple):
    """The identity of a flow entry as the Verify_Rule chain sees it."""

    table: int
    priority: int
    cookie: int
    rule_id: int


class Hop(NamedTuple):
    """One switch on a path: where the packet entered, the entries it matched, where it left."""

    dpid: int
    in_port: int
    rules: tuple[RuleRef, ...]
    out_port: int | None  # None when the packet ends at this switch (drop, controller, loop)


class Delivery(NamedTuple):
    """One outcome of sending a header class in at an ingress port.

    kind is "egress" (left the network at `egress`), "drop", "controller",
    "local" or "loop". `reason` says why for drops and loops. `alternative` is
    True when the outcome is one of several SELECT-group choices (multipath).
    """

    ingress: Port
    kind: str
    egress: Port | None
    hops: tuple[Hop, ...]
    verify_port: int
    verify_rule: int
    reason: str = ""
    alternative: bool = False
    rewritten: bool = False  # the header was changed by set_field on the way


class Expected(NamedTuple):
    """One tag pair the model allows for a header sampled at an egress."""

    ingress: Port
    hops: tuple[Hop, ...]
    verify_port: int
    verify_rule: int
