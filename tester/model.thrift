// The model as tester worker processes see it (thriftpy2, binary protocol, Unix socket).
//
// pazzd holds the one model (cpc) and serves this interface; each tester worker reads
// sFlow datagrams on its own socket (SO_REUSEPORT) and asks the model once per datagram.
// 64-bit unsigned values (cookies) travel as their two's-complement i64.

struct Rule {
  1: i16 table,
  2: i32 priority,
  3: i64 cookie,
  4: i64 rule_id,
}

struct Hop {
  1: i64 dpid,
  2: i32 in_port,
  3: list<Rule> rules,
  4: i32 out_port = -1,      // -1: the packet ends at this switch
}

struct Expected {
  1: i64 ingress_dpid,
  2: i32 ingress_port,
  3: list<Hop> hops,
  4: i64 verify_port,
  5: i32 verify_rule,
}

struct Query {
  1: i64 egress_dpid,
  2: i32 egress_port,
  3: map<string, i64> header,
  4: i64 verify_port = -1,    // the report's tags; -1: only classify
  5: i32 verify_rule = -1,
  6: bool hop = false,        // a per-hop sample taken at egress (Model.allows_at)
}

// The class of a header, until when reports of it are held back (a model update
// touched it less than `settle` seconds ago; 0: not held), and whether the model
// expects the query's tags for it at that egress. Valid for Lookup.version.
struct Answer {
  1: i32 class_id,
  2: double held_until,
  3: bool allowed = false,
  4: bool unjudged = false,   // hop: the model cannot say there (a rewrite)
}

// The beginnings of the paths through a port or a switch (Model.expected_at,
// expected_via); known false: the model cannot say (a rewrite).
struct Prefixes {
  1: bool known,
  2: list<Expected> expected,
}

struct Lookup {
  1: i64 version,
  2: list<Answer> answers,
}

struct IfEntry {
  1: string agent,
  2: i32 sub_agent,
  3: i32 if_index,
  4: i64 dpid,
  5: i32 port,
}

// A fault a worker stored (or resolved); pazzd counts it, logs it and localizes it.
struct FaultNote {
  1: i64 fault_id,
  2: string kind,
  3: string location,
  4: string header_class,
  5: i64 egress_dpid = -1,
  6: i32 egress_port = -1,
  7: string header_json,
  8: list<i64> candidates,
  9: bool opened,            // first seen or reopened
  10: bool resolved,
  11: bool localize,
}

// A sample of a critical flow (pazzd runs the blackhole timers).
struct FlowSeen {
  1: bool report,             // true: a report at an egress; false: an ingress sample
  2: i64 dpid,
  3: i32 port,
  4: map<string, i64> header,
  5: double now,
  6: i32 sampling_rate,
  7: bool probe = false,      // a report of one of the fuzzer's marked probes
}

// A fault's first sample: pazzd has the fuzzer send its header again (corroboration),
// from the ingresses the model expects it from (or, unexplained, where it came in).
struct PortRef {
  1: i64 dpid,
  2: i32 port,
}

struct Suspect {
  1: i64 egress_dpid,
  2: i32 egress_port,
  3: map<string, i64> header,
  4: list<PortRef> ingresses,
  // >= 0: a first sample no ingress explains (Type-a), with its Verify_Port: pazzd has
  // the fuzzer replay it from the edge ports whose Bloom bits it carries
  5: i64 unexplained_verify_port = -1,
}

struct WorkerReport {
  1: i32 worker,
  2: map<string, i64> stats,  // the worker's cumulative TesterStats
  3: list<FaultNote> faults,
  4: list<FlowSeen> flows,
  5: double last_datagram = 0.0,  // wall time the worker last received a datagram
  6: list<Suspect> suspects = [],
  7: list<string> unsaved = [],  // faults waiting in memory for the store (JSON: tester.unsaved)
}

service ModelService {
  i64 version(),
  Lookup lookup(1: list<Query> queries, 2: double now),
  list<Expected> expected(1: Query query),
  Prefixes expected_at(1: Query query),
  Prefixes expected_via(1: i64 dpid, 2: map<string, i64> header),
  list<Rule> rules_at(1: i64 dpid),
  list<IfEntry> ifmap(),
  void report(1: WorkerReport report),
}

// --- Scale-out over NATS JetStream (pazzd/scaleout), compact protocol --------------------
// sFlow datagrams of one agent that a collector decoded and checked (the agent allowed),
// published to pazz.samples.<shard> as received, a few milliseconds' worth at a time: the
// worker decodes the XDR again (tester.sflow: about 10 µs a datagram, against 120 µs for
// the same samples as Thrift structs in pure Python), and one message carries many.
struct SampleBatch {
  1: double received,         // the collector's wall time of the last: the samples' time
  2: string source,           // the UDP source address
  3: list<binary> datagrams,  // sFlow v5 XDR, in the order received
}

// A flow sample (tester.sflow.FlowSample) in a worker's fault evidence; unsigned 32-bit
// sFlow fields travel as i64.
struct WireFlowSample {
  1: i64 seq,
  2: i64 source_type,
  3: i64 source_index,
  4: i64 sampling_rate,
  5: i64 sample_pool,
  6: i64 drops,
  7: i64 input_format,
  8: i64 input,
  9: i64 output_format,
  10: i64 output,
  11: i64 header_protocol,
  12: i64 frame_length,
  13: i64 stripped,
  14: binary header,
  15: bool expanded,
}

// One change of the model, replayed on the replicas: an entry added or removed (ovs-ofctl
// text, cpc.ofctl.format_flow), a group set or deleted, a port up or down.
struct ModelChange {
  1: string kind,             // add | remove | group | ungroup | port_up | port_down
  2: i64 dpid,
  3: string text = "",        // add, remove: the flow; group: the group
  4: i64 number = 0,          // ungroup: the group id; port_*: the port
}

// A committed model update (pazz.model.log), or the state at a version in parts
// (pazz.model.snapshot.part, then pazz.model.snapshot.head naming them).
struct ModelRecord {
  1: string epoch,            // one run of the primary: versions count within it
  2: i64 version,
  3: double time,             // the primary's wall time of the commit
  4: list<ModelChange> changes,
  5: list<IfEntry> ifmap = [],  // the whole sFlow ifIndex map, when it changed
  6: bool has_ifmap = false,
}

struct SnapshotHead {
  1: string epoch,
  2: i64 version,
  3: double time,
  4: i64 first_part,          // stream sequence of the first part
  5: i32 parts,
  6: string topology,         // the topology's fingerprint: replicas must have the same
  7: list<IfEntry> ifmap,
}

// "At `time` the model of `epoch` was at `version`" (pazz.model.tick, core NATS, 50/s):
// a replica at that version may judge samples up to that time.
struct Tick {
  1: string epoch,
  2: i64 version,
  3: double time,
}

// A sample a worker judged a fault, or a probe's report (marked: the worker does not judge
// it): the primary judges it against its own model and records it (pazz.faults, with the
// worker's report). A probe's report reaches the primary's watches (confirmations).
struct Evidence {
  1: string agent,
  2: i64 sub_agent,
  3: WireFlowSample sample,
  4: i64 dpid,                // the egress (a report) or where the sample was taken (hop)
  5: i32 port,
  6: bool hop,
  7: double time,
  8: bool probe = false,
}

struct ScaleoutReport {
  1: string worker,
  2: map<string, i64> stats,
  3: list<Evidence> evidence,
  4: list<FlowSeen> flows,
  5: list<Suspect> suspects,
  6: double lag,              // seconds the worker's replica is behind the primary
  7: i64 version,             // the replica's model version
  8: list<i32> shards,
  9: list<i64> judged = [],   // PAZZ_SAMPLES stream sequences (batches) judged since the last report
}
