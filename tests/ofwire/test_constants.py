"""Every constant ofwire declares equals the one of the same name in os-ken.

ofwire keeps its own copies of OpenFlow's numbers (importing os-ken's ofproto costs about
0.4 s at pazzd's start-up); this compares each with the independent source os-ken is:
every module-level integer constant of every ofwire module, looked up by name in
`ofproto_v1_3`, then `nicira_ext`, then `ofproto_common`. A constant with another name
than os-ken's is in ALIASES; one that os-ken does not have is in NO_COUNTERPART, with its
reason and the value it must have from another source (ovs-patches/0003 for the Verify
actions). A constant in neither and not in os-ken fails the test, as does a mismatch.
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
import re
from pathlib import Path

from os_ken.ofproto import nicira_ext, ofproto_common
from os_ken.ofproto import ofproto_v1_0 as of10
from os_ken.ofproto import ofproto_v1_3 as of13

import ofwire
from ofwire import consts, framing, messages

REPO = Path(__file__).resolve().parents[2]
SOURCES = (of13, nicira_ext, ofproto_common)

# ofwire's name -> (os-ken module, os-ken's name), where ofwire names it otherwise.
ALIASES = {
    "OFP10": (of10, "OFP_VERSION"),
    "OFP13": (of13, "OFP_VERSION"),
    "FC_ADD": (of13, "OFPFC_ADD"),
    "FC_MODIFY": (of13, "OFPFC_MODIFY"),
    "FC_MODIFY_STRICT": (of13, "OFPFC_MODIFY_STRICT"),
    "FC_DELETE": (of13, "OFPFC_DELETE"),
    "FC_DELETE_STRICT": (of13, "OFPFC_DELETE_STRICT"),
    "GC_ADD": (of13, "OFPGC_ADD"),
    "GC_MODIFY": (of13, "OFPGC_MODIFY"),
    "GC_DELETE": (of13, "OFPGC_DELETE"),
    "PORT_STATUS_LEN": (of13, "OFP_PORT_STATUS_SIZE"),
    "NX_VENDOR_ID": (ofproto_common, "NX_EXPERIMENTER_ID"),
    "ONF_VENDOR_ID": (ofproto_common, "ONF_EXPERIMENTER_ID"),
    "ONFST_FLOW_MONITOR": (of13, "ONFMP_FLOW_MONITOR"),
    "EVENT_ABBREV": (of13, "ONFFME_ABBREV"),
}


def _patch_subtypes() -> dict[str, int]:
    """{NXAST_RAW_NAME: subtype} of the actions ovs-patches/0003 adds ("NX1.0+(N)")."""
    (patch,) = (REPO / "ovs-patches").glob("0003-*.patch")
    pairs = re.findall(
        r"^\+\s*/\* NX1\.0\+\((\d+)\):.*\*/\n\+\s*(NXAST_RAW_\w+),", patch.read_text(), re.M
    )
    return {name: int(n) for n, name in pairs}


PATCH = _patch_subtypes()

# Constants os-ken has no counterpart for: name -> (the value from another source, why).
NO_COUNTERPART = {
    # The Verify actions are ovs-patches/0003's own Nicira extension actions.
    "NXAST_SET_VERIFY_RULE_ID": (
        PATCH.get("NXAST_RAW_SET_VERIFY_RULE_ID"),
        "set_verify_rule:ID, a Verify action of ovs-patches/0003",
    ),
    # type, len, vendor (the experimenter action header), subtype, 2 pad bytes, the ID
    "VERIFY_ACTION_LEN": (
        of13.OFP_ACTION_EXPERIMENTER_HEADER_SIZE + 2 + 2 + 4,
        "the length of set_verify_rule:ID on the wire",
    ),
    # os-ken's ONF_FLOW_UPDATE_FULL_SIZE leaves out the length and event fields in front
    "FULL_LEN": (
        of13.ONF_FLOW_UPDATE_HEADER_SIZE + of13.ONF_FLOW_UPDATE_FULL_SIZE,
        "a full flow-monitor update up to its match",
    ),
}


def declared_int_constants() -> dict[str, tuple[str, int]]:
    """{name: (module, value)} of the upper-case integer names each ofwire module assigns
    at module level (imports of other modules' constants are not declarations)."""
    out = {}
    for info in pkgutil.iter_modules(ofwire.__path__):
        mod = importlib.import_module(f"ofwire.{info.name}")
        tree = ast.parse(Path(mod.__file__).read_text())
        for node in tree.body:
            targets = node.targets if isinstance(node, ast.Assign) else []
            if isinstance(node, ast.AnnAssign):
                targets = [node.target]
            for t in targets:
                for n in ast.walk(t):
                    if isinstance(n, ast.Name) and n.id.isupper():
                        value = getattr(mod, n.id)
                        if type(value) is int:
                            assert n.id not in out, f"{n.id} declared twice"
                            out[n.id] = (info.name, value)
    return out


def oskens(name: str) -> tuple[str, int] | None:
    """(where, value) of os-ken's constant for ofwire's name, None if it has none."""
    if name in ALIASES:
        mod, other = ALIASES[name]
        return f"{mod.__name__}.{other}", getattr(mod, other)
    for mod in SOURCES:
        if hasattr(mod, name):
            return f"{mod.__name__}.{name}", getattr(mod, name)
    return None


def test_every_declared_constant_matches_os_ken():
    declared = declared_int_constants()
    assert len(declared) > 80, sorted(declared)  # the scan found ofwire's constants
    wrong = []
    for name, (module, value) in sorted(declared.items()):
        theirs = oskens(name)
        if theirs is not None:
            if theirs[1] != value:
                wrong.append(f"ofwire.{module}.{name} = {value:#x}, {theirs[0]} = {theirs[1]:#x}")
        elif name in NO_COUNTERPART:
            want, why = NO_COUNTERPART[name]
            if value != want:
                wrong.append(f"ofwire.{module}.{name} = {value}, expected {want} ({why})")
        else:
            wrong.append(f"ofwire.{module}.{name} has no counterpart in os-ken")
    assert not wrong, "\n".join(wrong)


def test_the_lists_name_only_declared_constants():
    declared = declared_int_constants()
    stale = sorted(n for n in (*ALIASES, *NO_COUNTERPART) if n not in declared)
    assert not stale, f"listed here but not declared by ofwire: {stale}"
    for name in NO_COUNTERPART:  # else it would be compared with os-ken's
        assert all(not hasattr(m, name) for m in SOURCES), name


def test_verify_subtypes_are_the_patchs():
    assert len(PATCH) >= 5, PATCH  # the patch was read
    verify = {n for name, n in PATCH.items() if "VERIFY" in name}
    assert set(consts.VERIFY_SUBTYPES) == verify
    assert len(consts.VERIFY_SUBTYPES) == len(verify)


def test_tables_of_constants():
    assert consts.SUPPORTED_VERSIONS == (of10.OFP_VERSION, of13.OFP_VERSION)
    for i, name in enumerate(consts.FC_NAMES):
        assert getattr(of13, f"OFPFC_{name.upper()}") == i
    for value, name in consts.GROUP_TYPE_NAMES.items():
        assert getattr(of13, f"OFPGT_{name.upper()}") == value


def test_struct_layouts_are_os_kens():
    match = of13._OFP_MATCH_PACK_STR  # the match header that follows the fixed part
    assert framing.HDR.format == of13.OFP_HEADER_PACK_STR
    assert messages.FLOW_MOD.format + match == of13.OFP_FLOW_MOD_PACK_STR
    assert messages.FLOW_STATS.format == of13.OFP_FLOW_STATS_0_PACK_STR
    assert messages.FLOW_REMOVED.format + match == of13.OFP_FLOW_REMOVED_PACK_STR
    assert messages.GROUP_MOD.format == of13.OFP_GROUP_MOD_PACK_STR
    assert messages.BUCKET.format == of13.OFP_BUCKET_PACK_STR
