"""The intent guard: refuse a FlowMod that would break an enforced policy.

With a policy marked `enforce: true`, the proxy asks the guard about every FlowMod before
it goes to the switch. The guard applies the FlowMod to the model, reads the violations it
would open, and puts the model back as it was (the entries it added, removed or changed on
that switch). A FlowMod that opens a violation of an enforced policy is answered with an
OFPT_ERROR (FLOW_MOD_FAILED, EPERM, the message in the data) and never reaches the switch,
so the model and the switch stay the same.

The guard judges each FlowMod against the committed state: FlowMods still in flight (sent
before the switch answered the proxy's barrier) are not in it yet. GroupMods are not judged.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from cpc.intents import Violation
from cpc.model import Model
from cpc.rules import FlowEntry, FlowMod, ModelError
from pazzd import openflow as of

__all__ = ["IntentGuard"]

log = logging.getLogger("pazzd.guard")


def _key(e: FlowEntry) -> tuple:
    return (e.table, e.priority, e.match)


def _add(e: FlowEntry) -> FlowMod:
    return FlowMod(
        command="add",
        dpid=e.dpid,
        table=e.table,
        priority=e.priority,
        match=e.match,
        instructions=e.instructions,
        cookie=e.cookie,
        rule_id=e.rule_id,
        idle_timeout=e.idle_timeout,
        hard_timeout=e.hard_timeout,
        flags=e.flags,
    )


class IntentGuard:
    """The checker's subscriber hands each evaluation to collect() first: during a trial
    the guard keeps it (it is not a change to store or report) and collect() says so."""

    def __init__(self, model: Model, enforced: Callable[[], set[str]]) -> None:
        self.model = model
        self.enforced = enforced  # the names of the policies in force with enforce: true
        self._trial: list | None = None
        self.judged = 0
        self.refused = 0
        self.seconds: list[float] = []  # the latest judgement times (bench, status)

    def collect(self, changes) -> bool:
        """True when changes belong to a trial (kept here, not to be stored)."""
        if self._trial is None:
            return False
        self._trial.append(changes)
        return True

    def for_proxy(self, dpid: int, raw) -> str | None:
        """The proxy's question about a raw FlowMod: why it is refused, or None."""
        if not self.enforced():
            return None
        try:
            fm = of.flowmod_to_cpc(dpid, raw)
        except (ModelError, of.ProtocolError):
            return None  # not modelled: nothing the checks can say about it
        try:
            broken = self.judge(fm)
        except Exception:
            log.exception("guard failed; the FlowMod passes")
            return None
        if not broken:
            return None
        log.warning(
            "guard: refused a FlowMod for dpid %d (table %d priority %d %s): it would break %s",
            dpid,
            fm.table,
            fm.priority,
            fm.command,
            ", ".join(f"{b.policy.name} ({b.detail})" for b in broken),
        )
        return f"enforced intent policy {broken[0].policy.name}"

    def judge(self, fm: FlowMod) -> list[Violation]:
        """The violations of enforced policies that fm would open (empty: let it pass)."""
        names = self.enforced()
        if not names:
            return []
        t0 = time.perf_counter()
        m = self.model
        before = {_key(e): e for e in m.entries(fm.dpid)}
        self._trial = []
        try:
            try:
                m.apply(fm)
            except ModelError:
                return []  # the model refuses it as the switch will: nothing to judge
            after = {_key(e): e for e in m.entries(fm.dpid)}
            undo = [
                FlowMod(
                    command="delete_strict", dpid=fm.dpid, table=k[0], priority=k[1], match=k[2]
                )
                for k in after
                if k not in before
            ]
            undo += [_add(e) for k, e in before.items() if after.get(k) != e]
            if undo:
                _, errors = m.apply_many(undo)
                if errors:  # cannot happen: these entries were in the model a moment ago
                    log.error("guard: the model did not take its entries back: %s", errors)
        finally:
            changes, self._trial = self._trial, None
        opened = {}
        for ch in changes[:1]:  # the FlowMod's own update; the rest undo it
            for v in ch.opened:
                if v.policy.name in names:
                    opened[v.key] = v
        self.judged += 1
        self.refused += bool(opened)
        self.seconds.append(time.perf_counter() - t0)
        del self.seconds[:-1024]
        return list(opened.values())
