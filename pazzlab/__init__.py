"""The lab: emulated PAZZ networks for tests, the demo and operators rehearsing their own
networks, kept apart from the daemon's production code path.

- `pazzlab.ovs`: processes, network namespaces, veth pairs, a private patched OVS;
- `pazzlab.labnet`: the lab's Mininet network (Mininet is the `pazz[lab]` extra);
- `pazzlab.lab`: a whole network with hosts, rules and sFlow (`python -m pazzlab.lab`);
- `pazzlab.demo`: the end-to-end demo (`python -m pazzlab.demo`, `make demo`);
- `pazzlab.sim`, `pazzlab.steady`: detection-effect simulations of the real Fuzzer on the
  reference data plane (cpc.refdp), no switches needed.

It uses cpc, fuzzer, tester, pazzdata, ofwire (its switches and controllers speak OpenFlow)
and pazzapi (pazzd's API client); it runs pazzd as a process and imports nothing of it.
None of them imports pazzlab (tests/test_layering.py).
"""
