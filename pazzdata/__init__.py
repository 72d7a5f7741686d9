"""Data for the model, not the model: importers and generators that produce topologies and
rules in cpc's terms (they depend on cpc; cpc, fuzzer and tester never import them).

- `pazzdata.workloads`: generated grids and fat-trees with routes, ACLs and groups (the
  paper's benchmark topologies), and the random graphs of the harnesses;
- `pazzdata.stanford`: the Stanford backbone importer (`python -m pazzdata.stanford`);
- `pazzdata.detectnet`: random networks, faults and benign churn for the steady-state
  detection harness on the lab (bench/detect.py).
"""
