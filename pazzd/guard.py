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

The work per FlowMod is bounded: within a `batch()` (the proxy opens one per slice of a
controller's messages, see pazzd.proxy.session) the in-flight FlowMods and every FlowMod
let through stay applied from one judgement to the next, so each FlowMod costs one apply
(and one undo when the batch closes) instead of re-applying everything in flight. A batch
starts from at most MAX_PENDING in-flight FlowMods. Outside a batch every judgement
applies and undoes on its own.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

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


@dataclass
class _Step:
    """FlowMods applied together within a trial (keys: the raw FlowMods the proxy holds,
    or the FlowMods themselves) and the FlowMods that take them back."""

    keys: list
    undo: list[FlowMod]


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
        self._trial: list | None = None  # the checks' changes of the trial's updates
        self._stack: list[_Step] = []  # what is applied now, in order
        self._batch = 0
        self.judged = 0
        self.refused = 0
        self.seconds: list[float] = []  # the latest judgement times (bench, status)

    def collect(self, changes) -> bool:
        """True when changes belong to a trial (kept here, not to be stored)."""
        if self._trial is None:
            return False
        self._trial.append(changes)
        return True

    @contextlib.contextmanager
    def batch(self):
        """Judgements inside keep the in-flight FlowMods and those let through applied from
        one to the next; the model is put back when the outermost batch ends. Nothing may
        read the model for another purpose inside."""
        self._batch += 1
        try:
            yield
        finally:
            self._batch -= 1
            if not self._batch:
                self._close()

    def for_proxy(self, dpid: int, raw) -> str | None:
        """The proxy's question about a raw FlowMod: why it is refused, or None."""
        if not self.enforced():
            return None
        try:
            fm = of.flowmod_to_cpc(dpid, raw)
        except (ModelError, of.ProtocolError):
            return None  # not modelled: nothing the checks can say about it
        try:
            broken = self._judge(fm, raw, [(r, _converter(d, r)) for d, r in self.pending()])
        except Exception:
            log.exception("guard failed; the FlowMod passes")
            self._close()
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
        a loop, pushed without a barrier in between). The model is put back after (at the
        end of the batch, within one)."""
        return self._judge(fm, fm, [(p, lambda p=p: p) for p in pending])

    def _judge(self, fm: FlowMod, key, pending: list) -> list[Violation]:
        """pending: [(key, () -> FlowMod)] in the order sent."""
        names = self.enforced()
        if not names:
            return []
        t0 = time.perf_counter()
        if self._trial is None:
            self._trial = []
        self._catch_up(pending)
        n = len(self._trial)
        applied = self._push([key], [fm])
        opened = {}
        for ch in self._trial[n : n + 1] if applied else ():
            for v in ch.opened:
                if v.policy.name in names:
                    v.witness  # noqa: B018  picked now: the undo takes its state away
                    opened[v.key] = v
        if opened:
            self._pop()
        if not self._batch:
            self._close()
        self.judged += 1
        self.refused += bool(opened)
        self.seconds.append(time.perf_counter() - t0)
        del self.seconds[:-1024]
        return list(opened.values())

    def _catch_up(self, pending: list) -> None:
        """Make the trial hold exactly the FlowMods in flight (those not yet applied in one
        update): a FlowMod judged before and not sent after all is taken off; anything else
        gone (committed, refused by the switch, its session lost) starts the trial over."""
        keys = {id(k) for k, _ in pending}
        while self._stack and not all(id(k) in keys for k in self._stack[-1].keys):
            if len(self._stack[-1].keys) > 1:
                break
            self._pop()
        applied = {id(k) for st in self._stack for k in st.keys}
        if not applied <= keys:
            self._close()
            applied = set()
            self._trial = []
        todo = [(k, conv) for k, conv in pending if id(k) not in applied]
        if not applied:
            todo = todo[-MAX_PENDING:]
        fms = []
        for _, conv in todo:
            with contextlib.suppress(ModelError, of.ProtocolError):
                fms.append(conv())
        if todo:
            self._push([k for k, _ in todo], fms)

    def _push(self, keys: list, fms: list[FlowMod]) -> bool:
        """Apply fms in one update; False when the model refused them all (as the switch
        will)."""
        with self.model.trial():  # the checks' subscribers know not to store these
            upd, errors = self.model.apply_many(fms)
        self._stack.append(_Step(keys, _undo(upd.changes)))
        return len(errors) < len(fms)

    def _pop(self) -> None:
        self._take_back([self._stack.pop()])

    def _close(self) -> None:
        """Put the model back: undo the trial, the last first, in one update."""
        steps, self._stack = self._stack, []
        try:
            self._take_back(steps)
        finally:
            self._trial = None

    def _take_back(self, steps: list[_Step]) -> None:
        undo = [u for st in reversed(steps) for u in st.undo]
        if not undo:
            return
        with self.model.trial():
            _, errors = self.model.apply_many(undo)
        if errors:  # cannot happen: these entries were in the model a moment ago
            log.error("guard: the model did not take its entries back: %s", errors)


def _converter(dpid: int, raw) -> Callable[[], FlowMod]:
    return lambda: of.flowmod_to_cpc(dpid, raw)


def _undo(changes) -> list[FlowMod]:
    """What takes an update's entry changes back, the last first: an entry added is
    deleted, an entry removed or replaced is added again as it was."""
    undo = []
    for old, new in reversed(changes):
        if new is not None and (old is None or _key(old) != _key(new)):
            undo.append(
                FlowMod(
                    command="delete_strict",
                    dpid=new.dpid,
                    table=new.table,
                    priority=new.priority,
                    match=new.match,
                )
            )
        if old is not None:
            undo.append(_add(old))
    return undo


def _key(e: FlowEntry) -> tuple:
    return e.dpid, e.table, e.priority, e.match
