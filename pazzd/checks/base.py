"""The protocol every check implements, with do-nothing defaults."""

from __future__ import annotations

import logging

log = logging.getLogger("pazzd.checks")


class Check:
    """A check of pazzd. `name` names its state in status and metrics; `enabled(cfg, svc)`
    says whether the config turns it on. Every method runs in the daemon's event loop;
    on_update runs in the model's thread of control, as the model's subscribers do."""

    name = "check"

    @classmethod
    def enabled(cls, cfg, svc) -> bool:
        return True

    def start(self, svc) -> None:
        """Set up, read the intended state as it is now."""

    def on_update(self, upd) -> None:
        """A model update (cpc.model.Update): upd.cause says what made it, upd.trial
        whether it is a trial of the intent guard (judged, then taken back)."""

    def on_commit(self, dpid: int, changes: list) -> None:
        """The proxy committed these changes of a switch's intended table (EntryChange,
        GroupChange), after the model has them."""

    def tick(self, now: float) -> None:
        """Twice a second: store what changed, finish what is due."""

    def reload(self, cfg, old) -> None:
        """A new config is in force (svc.cfg is cfg already)."""

    def state(self) -> dict:
        """The check's part of the daemon's status: {key: value} merged into it."""
        return {}
