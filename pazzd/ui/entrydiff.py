"""What differs between the entry a localization found on a switch and the intended one,
in a few words: `nw_dst=10.0.1.0/24: output:3 (intended 4)`. The match both share comes
first (the header space the change touches), then each differing part, the switch's value
with the intended one in brackets. A callout shows this instead of two long entries cut
short exactly where they differ."""

from __future__ import annotations

from cpc.ofctl import action_parts, format_match, parse_flow
from cpc.rules import FlowEntry, ModelError

__all__ = ["entry_difference"]


def _entry(text: str | None) -> FlowEntry | None:
    if not text:
        return None
    return parse_flow(text, 0).entry()


PROTO = ""  # the key of a protocol word ("ip", "tcp") among the match items


def _match_items(e: FlowEntry) -> dict[str, str]:
    """field -> value of an entry's match in ovs-ofctl words; the protocol word, if any,
    under PROTO."""
    items = {}
    for part in format_match(e.match).split(","):
        if not part:
            continue
        k, sep, v = part.partition("=")
        if sep:
            items[k] = v
        else:
            items[PROTO] = k
    return items


def _show(items: dict[str, str]) -> str:
    """The fields, the protocol word only when there is nothing more telling."""
    named = [f"{k}={v}" for k, v in items.items() if k != PROTO]
    return ",".join(named) or items.get(PROTO, "any")


def _actions(e: FlowEntry) -> list[str]:
    """The entry's actions without set_verify_rule (pazzd's proxy adds it: not a change)."""
    return action_parts(e.instructions) or ["drop"]


def _actions_part(got: list[str], want: list[str]) -> str:
    if len(got) == len(want) == 1:
        (g,), (w,) = got, want
        gk, _, gv = g.partition(":")
        wk, _, wv = w.partition(":")
        if gk == wk and gv and wv:  # output:3 (intended 4)
            return f"{g} (intended {wv})"
    return f"{','.join(got)} (intended {','.join(want)})"


def _tokens_part(entry: str, intended: str) -> dict:
    """Texts that are not flow entries (groups): the comma-separated parts that differ."""
    a, b = entry.split(","), intended.split(",")
    same = [t for t in a if t in b]
    got = [t for t in a if t not in b] or ["-"]
    want = [t for t in b if t not in a] or ["-"]
    head = next((t for t in same if t.startswith("group_id=")), ",".join(same[:2]))
    part = f"{','.join(got)} (intended {','.join(want)})"
    return {"match": head, "parts": [part], "text": f"{head}: {part}" if head else part}


def entry_difference(entry: str | None, intended: str | None) -> dict | None:
    """{"match": the match both share, "parts": [what differs, ...], "text": "MATCH:
    PARTS"}; None when there is neither entry (nothing was localized)."""
    if not entry and not intended:
        return None
    try:
        got, want = _entry(entry), _entry(intended)
    except (ValueError, ModelError):
        if entry and intended:
            return _tokens_part(entry, intended)
        return {"match": "", "parts": [entry or intended], "text": entry or intended}
    parts: list[str] = []
    if got is None or want is None:
        e = got or want
        items = _match_items(e)
        acts = ",".join(_actions(e))
        if got is None:
            parts.append(f"missing (intended {acts})")
        else:
            parts.append(f"{acts} (no intended entry)")
        match = _show(items)
        return {"match": match, "parts": parts, "text": f"{match}: " + "; ".join(parts)}
    for name in ("table", "priority"):
        g, w = getattr(got, name), getattr(want, name)
        if g != w:
            parts.append(f"{name}={g} (intended {w})")
    if got.cookie != want.cookie:
        parts.append(f"cookie=0x{got.cookie:x} (intended 0x{want.cookie:x})")
    gi, wi = _match_items(got), _match_items(want)
    common = {k: v for k, v in gi.items() if wi.get(k) == v}
    for k in list(gi) + [k for k in wi if k not in gi]:
        if gi.get(k) == wi.get(k):
            continue
        g, w = gi.get(k), wi.get(k)
        if k == PROTO:
            parts.append(f"{g or 'any protocol'} (intended {w or 'any'})")
        elif g is None:
            parts.append(f"{k}=any (intended {w})")
        elif w is None:
            parts.append(f"{k}={g} (intended any)")
        else:
            parts.append(f"{k}={g} (intended {w})")
    ga, wa = _actions(got), _actions(want)
    if ga != wa:
        parts.append(_actions_part(ga, wa))
    if got.rule_id and want.rule_id and got.rule_id != want.rule_id:
        parts.append(f"set_verify_rule:{got.rule_id} (intended {want.rule_id})")
    if not parts:
        parts.append("same match and actions (another field differs)")
    match = _show(common)
    return {"match": match, "parts": parts, "text": f"{match}: " + "; ".join(parts)}
