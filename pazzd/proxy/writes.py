"""How a session writes the switch's intended table (pazzd.proxy.session): a controller's
FlowMod on its way to the switch (the rule ID added, the guards asked), the commit when
the switch's barrier confirms it (the intended table, the store, the model feed, pazzd's
subscribers), the rule IDs given again after a non-strict MODIFY, and FLOW_REMOVED."""

from __future__ import annotations

import logging

import ofwire as of
from pazzd.proxy.parts import Pending, Upstream, orig_xid
from pazzd.proxy.table import EntryChange, IntendedTable, Writer

log = logging.getLogger("pazzd.proxy")

__all__ = ["IntendedWrites"]


class IntendedWrites:
    """Part of Session: the intended table's writes (uses the session's svc, dpid,
    pending, reid, seq, ids_on, own_xid, send_own, _refuse, _check_pending)."""

    def _flow_removed(self, fr: of.RawFlowRemoved) -> None:
        """Only a timeout the entry was installed with ends intent here (and only with the
        entry's cookie): a timeout claimed for an entry without it is a switch's error or
        a peer's forgery, counted and ignored. A delete the controller sent (FlowMod or
        group delete) ends it when that change commits; any other delete is an entry
        removed behind the controller's back: it stays intended and the next audit
        reports it missing at once."""
        key = (fr.table, fr.priority, fr.mkey)
        table = self.svc.tables.setdefault(self.dpid, IntendedTable())
        if fr.reason not in (of.OFPRR_IDLE_TIMEOUT, of.OFPRR_HARD_TIMEOUT):
            if key in table.entries and not self._delete_pending():
                self.svc.counters.unexplained_removals += 1
                self.svc.removed(self.dpid, key)
                log.warning(
                    "%r: intended entry table=%d priority=%d removed (reason %d) by "
                    "something other than the controller",
                    self,
                    fr.table,
                    fr.priority,
                    fr.reason,
                )
            return
        had = table.entries.get(key)
        if had is None:
            return
        timeout = had.idle if fr.reason == of.OFPRR_IDLE_TIMEOUT else had.hard
        if not timeout or fr.cookie != had.cookie:
            self.svc.counters.ignored_removals += 1
            self.svc.log_limited(
                "flow_removed",
                logging.WARNING,
                "%r: FLOW_REMOVED table=%d priority=%d claims %s (cookie %#x), which the "
                "intended entry does not have (cookie %#x, idle %d s, hard %d s): ignored",
                self,
                fr.table,
                fr.priority,
                "an idle timeout" if fr.reason == of.OFPRR_IDLE_TIMEOUT else "a hard timeout",
                fr.cookie,
                had.cookie,
                had.idle,
                had.hard,
            )
            return
        old = table.remove(key)
        if old is not None:
            self.svc.store.delete(self.dpid, key)
            self._free_ids(table, (key,))
            self.svc.feed.feed(self.dpid, [EntryChange("delete", old)])

    def _free_ids(self, table: IntendedTable, keys) -> None:
        """Free the rule IDs of keys neither intended nor named by a FlowMod in flight."""
        if not keys:
            return
        busy = {(p.msg.table, p.msg.priority, p.msg.mkey) for p in self.pending if p.kind == "flow"}
        for key in keys:
            if key not in table.entries and key not in busy:
                self.svc.store.free_id(self.dpid, *key)

    def _delete_pending(self) -> bool:
        """Is a delete of the controller's (FlowMod or GroupMod) awaiting its barrier?"""
        for p in self.pending:
            if p.kind == "flow" and p.msg.command in (of.FC_DELETE, of.FC_DELETE_STRICT):
                return True
            if p.kind == "group" and p.msg.command == of.GC_DELETE:
                return True
        return False

    def _flow_mod(self, msg: bytes, xid: int, orig: bytes, u: Upstream) -> bytes | None:
        """msg: the FlowMod as it goes to the switch (xid translated), orig: as the
        controller sent it."""
        fm = of.parse_flow_mod(msg)
        if fm.buffer_id != of.OFP_NO_BUFFER:
            self.svc.hooks.call("release", self.dpid, fm.buffer_id)
        rid = 0
        sent = msg
        adds = fm.command in (of.FC_ADD, of.FC_MODIFY, of.FC_MODIFY_STRICT)
        if adds and of.has_verify_action(fm.instr):
            # The proxy's own set_verify_rule:ID (or the switch's implicit step) already
            # tags the entry; a second one, or push/pop/set_verify_port, breaks the tags.
            self._refuse(orig, of.OFPET_BAD_ACTION, of.OFPBAC_EPERM, "a Verify action", u)
            return None
        if adds and (twice := of.groups_named_twice(fm.instr)):
            why = f"actions name group {twice[0]} twice (Open vSwitch aborts when it is deleted)"
            if self.svc.config.group_twice == "refuse":
                self._refuse(orig, of.OFPET_BAD_ACTION, of.OFPBAC_EPERM, why, u)
                return None
            self.svc.feed.agent_warnings += 1
            self.svc.log_limited("group-twice", logging.WARNING, "%r: %s", self, why)
        why = self.svc.hooks.refusal(self.dpid, fm)
        if why:
            self._refuse(orig, of.OFPET_FLOW_MOD_FAILED, of.OFPFMFC_EPERM, why, u)
            return None
        if self.ids_on and adds and fm.match_end + len(of.add_rule_id(fm.instr, 0)) > 0xFFFF:
            # No room for the rule-ID action within OpenFlow's 16-bit length.
            self._refuse(
                orig, of.OFPET_BAD_REQUEST, of.OFPBRC_BAD_LEN, "no room for the rule ID", u
            )
            return None
        if self.ids_on and adds:
            store = self.svc.store
            rid = 0
            if fm.command == of.FC_MODIFY:
                sel = self.svc.tables[self.dpid].select(fm, False)
                if len(sel) == 1:
                    rid = sel[0].rule_id
            if not rid:
                rid = store.rule_id(self.dpid, fm.table, fm.priority, fm.mkey)
            sent = of.flow_mod_with_instructions(msg, fm, of.add_rule_id(fm.instr, rid))
        self.seq += 1
        p = Pending(self.seq, xid, "flow", fm, orig, sent, rid, conn=u.name, cxid=orig_xid(orig))
        self.pending.append(p)
        self.unbarriered = True
        return sent

    def _reid(self, table: IntendedTable) -> list:
        """A non-strict MODIFY gave several entries one ID: give each its own again with a
        MODIFY_STRICT of the proxy's (same instructions; cookie and counters kept). Only
        when nothing else is in flight, so that it cannot overtake a later FlowMod."""
        changes = []
        for key in self.reid:
            e = table.entries.get(key)
            if e is None:
                continue
            rid = self.svc.store.rule_id(self.dpid, e.table, e.priority, e.mkey)
            if rid == e.rule_id:
                continue
            e.rule_id = rid
            fm = of.flow_mod(
                self.own_xid(),
                e.table,
                of.FC_MODIFY_STRICT,
                e.priority,
                e.oxm,
                of.add_rule_id(e.instr, rid),
                flags=e.flags,
                idle=e.idle,
                hard=e.hard,
            )
            self.svc.store.flush()
            self.send_own(fm, None)
            self.svc.store.put(self.dpid, e)
            changes.append(EntryChange("modify", e, e))
        self.reid.clear()
        return changes

    # --- commit ------------------------------------------------------------------------------------
    def _commit(self, upto: int) -> None:
        svc = self.svc
        table = svc.tables.setdefault(self.dpid, IntendedTable())
        store = svc.store
        changes = []
        freeable: set = set()  # keys whose rule ID may have no use left
        xids = []
        while self.pending and self.pending[0].seq <= upto:
            p = self.pending.popleft()
            if p.rejected:
                if p.kind == "flow" and p.rule_id:
                    freeable.add((p.msg.table, p.msg.priority, p.msg.mkey))
                continue
            self.mods_committed += 1
            xids.append(p.cxid)
            if p.kind == "flow":
                ch = table.apply(p.msg, p.rule_id, p.conn)
                by = Writer(p.conn, p.cxid, p.msg)
                for c in ch:
                    c.by = by
                if p.rule_id and len(ch) > 1 and p.msg.command == of.FC_MODIFY:
                    self.reid.update(c.entry.key for c in ch)
            else:
                ch = svc.group_mod(self.dpid, p.msg, table)
            for c in ch:
                if c.kind == "delete":
                    store.delete(self.dpid, c.entry.key)
                    freeable.add(c.entry.key)
                else:
                    store.put(self.dpid, c.entry)
            changes.extend(ch)
        self._free_ids(table, freeable)
        if self.reid and not self.pending:
            changes.extend(self._reid(table))
        self._check_pending()
        svc.flush_soon()
        svc.feed.feed(self.dpid, changes, tuple(xids))
        if changes:
            svc.hooks.call("commit", self.dpid, changes)
