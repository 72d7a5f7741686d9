"""cpc: the control-plane component.

It holds the controller's intended rules as BDDs and answers, for any header,
what the data plane should do with it: the path, the rules and the Verify tags.
It depends on no other PAZZ package.

The API, for the other packages: cpc.model (Model, Update), cpc.topology
(load_topology, Topology), cpc.critical (CriticalFlow), cpc.rules (FlowEntry, FlowMod, Group, Instructions, Match,
ModelError), cpc.ofctl (the rule-file and ovs-ofctl syntax), cpc.fields (header
fields), cpc.results (Delivery, Expected, Hop), cpc.tags (the Verify tag functions),
cpc.space (HeaderSpace, the BDD encoding the fuzzer samples), cpc.refdp (the reference
data plane, for tests and simulations), cpc.verify_layer (the Verify header as a scapy
layer), cpc.yamlpos (YAML line numbers for error messages), cpc.interference (entries of
different controller applications whose matches meet). The other modules are the
model's parts: flowmod, gcpause, index, leq, partition, routes, tables, walk.

Glossary:
  class       a set of headers that every element treats alike (one forwarding at each
              element); named by an int, `class_id` (APKeep's atomic predicates).
              cpc.partition.
  element     one (dpid, table, in_port) slice of a flow table; in_port None holds the
              entries that match any port. cpc.tables.Element.
  forwarding  what an element does with the headers it owns: an entry's instructions
              without its identity (cpc.tables.Forwarding); classes differ only by it.
              Not an OpenFlow action (cpc.rules.OfpAction, one tuple of a list).
  identity    (switch, table, priority, cookie, rule_id) of an entry: what the Verify_Rule
              chain hashes. cpc.tables.Identities: which entry a header matches.
  behaviour   an entry as the tags see it: identity, forwarding and the bytes it adds to
              the Verify_Rule chain. cpc.tables.Behaviour.
  S_i         the headers the model delivers from an ingress to an egress (Model.reach).
  S_e         the headers the exit switch would send out of the egress from any of its
              ports (Model.corpus); the fuzzer probes S_e - S_i.
  Type-p      a report whose tags the model does not allow for its header at that egress,
              where the model does expect the header there: a match fault (same path,
              other rules) or an action fault (other path). tester.detect.
  Type-a      a header that reached an egress where the model expects it nowhere.
"""

__all__ = [
    "critical",
    "fields",
    "interference",
    "model",
    "ofctl",
    "refdp",
    "results",
    "rules",
    "space",
    "tags",
    "topology",
    "verify_layer",
    "yamlpos",
]
