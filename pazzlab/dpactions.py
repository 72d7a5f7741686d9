"""What a packet becomes, from the "Datapath actions:" line of `ovs-appctl ofproto/trace`.

outcomes() runs the actions over a packet state (set(), push_vlan, pop_vlan, clone) and
returns, per output, the port and the packet as it leaves: the bytes a switch sends, in the
fields the trace shows. The Verify actions of the patched switch (verify_push, verify_pop,
verify_port, verify_rule; and of the probe mark verify_push_marked, verify_unmark, the
report verify_sample and verify_drop_marked) are left out: they only add, mark and remove the
Verify header, or report the packet, or drop a probe at its exit (the packets traced here
are not probes).
"""

from __future__ import annotations

import ipaddress
import re

VERIFY = (
    "verify_push",  # and verify_push_marked
    "verify_pop",
    "verify_port",
    "verify_rule",
    "verify_unmark",
    "verify_sample(",
    "verify_drop_marked",
)


def split_top(text: str) -> list[str]:
    """Split at the commas outside parentheses."""
    out, depth, cur = [], 0, []
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            out.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
    if cur and "".join(cur).strip():
        out.append("".join(cur).strip())
    return out


def datapath_actions(trace: str) -> str:
    """The last "Datapath actions:" line of a trace (the one after recirculation)."""
    lines = [ln for ln in trace.splitlines() if ln.startswith("Datapath actions:")]
    if not lines:
        raise ValueError(f"no datapath actions in the trace:\n{trace}")
    return lines[-1].split(":", 1)[1].strip()


_SET = re.compile(r"^set\((\w+)\((.*)\)\)$")


def _value(text: str) -> int | str:
    """An int for numbers, MAC and IPv4 addresses (masked: value AND mask); else the text."""
    value, _, mask = text.partition("/")
    for conv in (_num, _mac, _ipv4):
        v = conv(value)
        if v is not None:
            m = conv(mask) if mask else None
            return v & m if m is not None else v
    return text


def _num(t: str) -> int | None:
    try:
        return int(t, 0)
    except ValueError:
        return None


def _mac(t: str) -> int | None:
    return int(t.replace(":", ""), 16) if re.fullmatch(r"([0-9a-f]{2}:){5}[0-9a-f]{2}", t) else None


def _ipv4(t: str) -> int | None:
    try:
        return int(ipaddress.IPv4Address(t))
    except ValueError:
        return None


def outcomes(actions: str, ports: dict[int, str | int]) -> list[tuple[object, tuple]]:
    """[(port, state)] in output order. state: sorted (key, value) pairs of what was set,
    with "vlans" the VLAN tags pushed (+vid) and popped (-1) in order. ports maps datapath
    port numbers to names (OpenFlow port numbers or "LOCAL"); other actions that send the
    packet somewhere (userspace(): the controller) are outcomes of their own."""
    out: list[tuple[object, tuple]] = []
    _run(split_top(actions), {}, ports, out)
    return out


def _run(acts: list[str], state: dict, ports, out: list) -> dict:
    for a in acts:
        if not a or a == "drop" or a.startswith(VERIFY):
            continue
        if a.isdigit():
            out.append((ports.get(int(a), f"odp{a}"), _freeze(state)))
        elif a.startswith("clone(") and a.endswith(")"):
            _run(split_top(a[6:-1]), dict(state), ports, out)
        elif a.startswith("push_vlan("):
            vid = re.search(r"vid=(\d+)", a)
            state["vlans"] = state.get("vlans", ()) + (int(vid.group(1)) if vid else 0,)
        elif a == "pop_vlan":
            state["vlans"] = state.get("vlans", ()) + (-1,)
        elif (m := _SET.match(a)) is not None:
            for kv in split_top(m.group(2)):
                k, _, v = kv.partition("=")
                state[f"{m.group(1)}.{k}"] = _value(v)
        elif a.startswith("userspace("):
            out.append(("CONTROLLER" if "controller" in a else a, _freeze(state)))
        else:
            state.setdefault("other", ())
            state["other"] += (a,)
    return state


def _freeze(state: dict) -> tuple:
    return tuple(sorted(state.items()))


def dp_ports(dpif_show: str, bridge: str) -> dict[int, str | int]:
    """{datapath port: OpenFlow port, or "LOCAL" for the bridge's own} from dpif/show."""
    out: dict[int, str | int] = {}
    for m in re.finditer(r"^\s+(\S+) (\d+)/(\d+):", dpif_show, re.M):
        name, ofport, odp = m.group(1), int(m.group(2)), int(m.group(3))
        out[odp] = "LOCAL" if name == bridge or ofport == 65534 else ofport
    return out
