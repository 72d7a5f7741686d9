"""The lab: emulated PAZZ networks for tests, the demo and operators rehearsing their own
networks, kept apart from the daemon's production code path.

- `pazzlab.ovs`: processes, network namespaces, veth pairs, a private patched OVS;
- `pazzlab.labnet`: the lab's Mininet network (Mininet is the `pazz[lab]` extra);
- `pazzlab.lab`: a whole network with hosts, rules and sFlow (`python -m pazzlab.lab`);
- `pazzlab.demo`: the end-to-end demo (`python -m pazzlab.demo`, `make demo`).

It uses pazzd, cpc, fuzzer and tester; none of them imports it.
"""
