"""OpenFlow constants the wire code uses, under OpenFlow's own names (1.3 unless marked).

os-ken's `os_ken.ofproto.ofproto_v1_3` has them all, but importing os-ken's ofproto takes
about 0.4 s and pazzd imports this package at start-up. tests/ofwire/test_constants.py
compares every constant here with os-ken's, by name; the few os-ken lacks (the Verify
actions of ovs-patches/0003) are compared with the patch.
"""

# Versions (ofp_header.version).
OFP10 = 0x01
OFP13 = 0x04
SUPPORTED_VERSIONS = (OFP10, OFP13)

# Message types shared by 1.0 and 1.3.
OFPT_HELLO = 0
OFPT_ERROR = 1
OFPT_ECHO_REQUEST = 2
OFPT_ECHO_REPLY = 3
OFPT_EXPERIMENTER = 4
OFPT_FEATURES_REQUEST = 5
OFPT_FEATURES_REPLY = 6
# OpenFlow 1.3 message types.
OFPT_PACKET_IN = 10
OFPT_FLOW_REMOVED = 11
OFPT_PORT_STATUS = 12
OFPT_PACKET_OUT = 13
OFPT_FLOW_MOD = 14
OFPT_GROUP_MOD = 15
OFPT_MULTIPART_REQUEST = 18
OFPT_MULTIPART_REPLY = 19
OFPT_BARRIER_REQUEST = 20
OFPT_BARRIER_REPLY = 21

OFPHET_VERSIONBITMAP = 1  # HELLO element type
OFPMT_OXM = 1  # match type

# Multipart.
OFPMP_FLOW = 1
OFPMP_GROUP_DESC = 7
OFPMP_EXPERIMENTER = 0xFFFF
OFPMPF_REPLY_MORE = 1

# Reserved ports, tables, groups and buffers.
OFPTT_ALL = 0xFF
OFPP_TABLE = 0xFFFFFFF9
OFPP_ANY = 0xFFFFFFFF
OFPG_ALL = 0xFFFFFFFC
OFPG_ANY = 0xFFFFFFFF
OFPCML_NO_BUFFER = 0xFFFF
OFP_NO_BUFFER = 0xFFFFFFFF

# FlowMod commands (OFPFC_*), GroupMod commands (OFPGC_*), group types (OFPGT_*).
FC_ADD, FC_MODIFY, FC_MODIFY_STRICT, FC_DELETE, FC_DELETE_STRICT = range(5)
FC_NAMES = ("add", "modify", "modify_strict", "delete", "delete_strict")
GC_ADD, GC_MODIFY, GC_DELETE = range(3)
GROUP_TYPE_NAMES = {0: "all", 1: "select", 2: "indirect", 3: "ff"}
OFPFF_CHECK_OVERLAP = 2  # FlowMod flag

# Instruction types.
OFPIT_GOTO_TABLE, OFPIT_WRITE_METADATA, OFPIT_WRITE_ACTIONS = 1, 2, 3
OFPIT_APPLY_ACTIONS, OFPIT_CLEAR_ACTIONS, OFPIT_METER = 4, 5, 6

# Action types.
OFPAT_OUTPUT = 0
OFPAT_COPY_TTL_OUT = 11
OFPAT_COPY_TTL_IN = 12
OFPAT_SET_MPLS_TTL = 15
OFPAT_DEC_MPLS_TTL = 16
OFPAT_PUSH_VLAN = 17
OFPAT_POP_VLAN = 18
OFPAT_SET_QUEUE = 21
OFPAT_GROUP = 22
OFPAT_SET_NW_TTL = 23
OFPAT_DEC_NW_TTL = 24
OFPAT_SET_FIELD = 25
OFPAT_EXPERIMENTER = 0xFFFF

# OXM classes and the OpenFlow-basic fields the model reads or ignores.
OFPXMC_OPENFLOW_BASIC = 0x8000
OFPXMC_EXPERIMENTER = 0xFFFF
OFPXMT_OFB_IN_PORT = 0
OFPXMT_OFB_ETH_DST = 3
OFPXMT_OFB_ETH_SRC = 4
OFPXMT_OFB_ETH_TYPE = 5
OFPXMT_OFB_VLAN_VID = 6
OFPXMT_OFB_VLAN_PCP = 7
OFPXMT_OFB_IP_DSCP = 8
OFPXMT_OFB_IP_ECN = 9
OFPXMT_OFB_IP_PROTO = 10
OFPXMT_OFB_IPV4_SRC = 11
OFPXMT_OFB_IPV4_DST = 12
OFPXMT_OFB_TCP_SRC = 13
OFPXMT_OFB_TCP_DST = 14
OFPXMT_OFB_UDP_SRC = 15
OFPXMT_OFB_UDP_DST = 16

# Errors: types (OFPET_*) and the codes the proxy sends.
OFPET_BAD_REQUEST = 1
OFPET_BAD_ACTION = 2
OFPET_FLOW_MOD_FAILED = 5
OFPBRC_BAD_TYPE = 1
OFPBRC_BAD_LEN = 6
OFPBAC_EPERM = 6
OFPFMFC_EPERM = 4  # permissions error

# FLOW_REMOVED reasons.
OFPRR_IDLE_TIMEOUT, OFPRR_HARD_TIMEOUT, OFPRR_DELETE, OFPRR_GROUP_DELETE = 0, 1, 2, 3

# PORT_STATUS: a port deleted, administratively down, without link.
OFPPR_DELETE = 1
OFPPC_PORT_DOWN = 1
OFPPS_LINK_DOWN = 1
PORT_STATUS_LEN = 8 + 8 + 64  # header, reason and pad, ofp_port

# Nicira extensions, and the Verify actions of ovs-patches/0003 (NX1.0+(60) to (64):
# push_verify, pop_verify, set_verify_port, set_verify_rule, set_verify_rule:ID).
NX_VENDOR_ID = 0x2320
NXAST_SET_VERIFY_RULE_ID = 64
VERIFY_SUBTYPES = (60, 61, 62, 63, 64)
VERIFY_ACTION_LEN = 16

MAX_XID = 0xFFFFFFFF
