"""Scale-out over NATS JetStream: `pazzd collector` (sFlow in, samples out, sharded by
agent), `pazzd worker` (a model replica and a tester, judging the shards it holds), and the
primary's side of it (its model journal, and the workers' reports judged again and
stored). Single-host pazzd needs none of it. See docs/scaling.md."""
