"""The intent guard: refuse a FlowMod that would break an enforced policy.

With a policy marked `enforce: true`, the proxy asks the guard about every FlowMod before
it goes to the switch. The guard applies the FlowMod to the model, reads the violations it
would open, and puts the model back as it was (the entries it added, removed or changed on
that switch). A FlowMod that opens a violation of an enforced policy is answered with an
OFPT_ERROR (FLOW_MOD_FAILED, EPERM, the message in the data) and never reaches the switch,
so the model and the switch stay the same.

The guard judges each FlowMod on the committed state plus the FlowMods still in flight
(sent to a switch, not yet confirmed by its barrier), applied first in the order sent, up to
MAX_PENDING of them. GroupMods are neither judged nor applied as in flight.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable

import ofwire as of
from cpc.intents import Violation
from cpc.model import Model
from cpc.rules import FlowEntry, FlowMod, ModelError

__all__ = ["IntentGuard"]

log = logging.getLogger("pazzd.guard")
# FlowMods in flight judged with a new one at most: beyond, the oldest are left out (a
# controller that pushes thousands without a barrier; each is applied and undone per
# judgement)
MAX_PENDING = 256


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
    """The trial's model updates carry Update.trial; the intents check hands the checker's
    evaluation of each to collect(), which keeps it for the judgement.
    pending(): the raw FlowMods in flight, [(dpid, RawFlowMod)] in the order sent."""

    def __init__(
        self,
        model: Model,
        enforced: Callable[[], set[str]],
        pending: Callable[[], list] = list,
    ) -> None:
        self.model = model
        self.enforced = enforced  # the names of the policies in force with enforce: true
        self.pending = pending
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
        before = []
        for d, r in self.pending():
            with contextlib.suppress(ModelError, of.ProtocolError):
                before.append(of.flowmod_to_cpc(d, r))
        try:
            broken = self.judge(fm, before)
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

    def judge(self, fm: FlowMod, pending: list[FlowMod] = ()) -> list[Violation]:
        """The violations of enforced policies that fm would open (empty: let it pass).

        pending: FlowMods sent to the switches before fm and not committed yet; they are
        applied first, so that fm is judged on the state it will meet (the two halves of
        a loop, pushed without a barrier in between). The model is put back after."""
        names = self.enforced()
        if not names:
            return []
        t0 = time.perf_counter()
        m = self.model
        steps: list[tuple[FlowMod, list]] = []
        own = None  # the index of fm's update among the trial's
        self._trial = []
        try:
            with m.trial():  # the checks' subscribers know not to store these
                for p in [*pending[-MAX_PENDING:], fm]:
                    before = m.affected(p)
                    try:
                        m.apply(p)
                    except ModelError:
                        continue  # refused by the model as it will be by the switch
                    if p is fm:
                        own = len(steps)
                        for v in self._trial[own].opened if own < len(self._trial) else ():
                            if v.policy.name in names:
                                v.witness  # noqa: B018  picked now: the undo takes its state away
                    steps.append((p, before))
                for p, before in reversed(steps):
                    _, errors = m.apply_many(_undo(p, before))
                    if errors:  # cannot happen: these entries were in the model a moment ago
                        log.error("guard: the model did not take its entries back: %s", errors)
        finally:
            changes, self._trial = self._trial, None
        opened = {}
        if own is not None:
            for v in changes[own].opened:
                if v.policy.name in names:
                    opened[v.key] = v
        self.judged += 1
        self.refused += bool(opened)
        self.seconds.append(time.perf_counter() - t0)
        del self.seconds[:-1024]
        return list(opened.values())


def _undo(fm: FlowMod, before: list[FlowEntry]) -> list[FlowMod]:
    """What puts back the state before fm: the entries it replaced, modified or deleted,
    and the removal of the entry an ADD created where there was none."""
    undo = [_add(e) for e in before]
    if fm.command == "add" and not before:
        undo.append(
            FlowMod(
                command="delete_strict",
                dpid=fm.dpid,
                table=fm.table,
                priority=fm.priority,
                match=fm.match,
            )
        )
    return undo
