# Set-up and everyday targets. Every target is idempotent.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
APT_PACKAGES := $(shell grep -v '^\s*\#' deploy/apt-packages.txt | grep -v '^\s*$$')
OVS_PREFIX_FILE := .ovs-prefix

.PHONY: all deps venv ovs test test-fast lint format bench eval eval-quick demo clean

all: venv

# Install the Debian packages that are missing (skips apt entirely when none are).
deps:
	@missing=$$(for p in $(APT_PACKAGES); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q 'install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		echo "installing:" $$missing; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing; \
	fi

# setup.py compiles cpc/_walkc.c and cpc/_leqc.c into the source tree (the editable install).
$(VENV)/.installed: pyproject.toml setup.py cpc/_walkc.c cpc/_leqc.c
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev,lab,eval]'
	touch $@

venv: $(VENV)/.installed

# Build (or reuse) the patched Open vSwitch; the prefix is cached by the hash of the patch series.
ovs: deps
	ovs-patches/build.sh > $(OVS_PREFIX_FILE).tmp && mv $(OVS_PREFIX_FILE).tmp $(OVS_PREFIX_FILE)
	@echo "patched OVS in $$(cat $(OVS_PREFIX_FILE))"

test: deps venv ovs
	PAZZ_OVS_PREFIX=$$(cat $(OVS_PREFIX_FILE)) $(PY) -m pytest -q -p no:cacheprovider

test-fast: venv
	$(PY) -m pytest -q -m 'not ovs and not slow'

lint: venv
	$(VENV)/bin/ruff check . && $(VENV)/bin/ruff format --check .

format: venv
	$(VENV)/bin/ruff check --fix . && $(VENV)/bin/ruff format .

bench: venv
	$(PY) bench/cpc.py --topology fattree --k 4 --rules 100000 --json

# The paper's evaluation, simulated at its rates, and how costs grow (docs/evaluation.md):
# JSON and figures into docs/evaluation/. eval-quick: a small run of both into /tmp.
EVAL_DIR ?= docs/evaluation
eval: venv
	mkdir -p $(EVAL_DIR)
	nice -n 10 $(PY) bench/paper.py --jobs 2 --random-shares "" --out $(EVAL_DIR)/paper.json.gz --figures $(EVAL_DIR) -v > /dev/null
	nice -n 10 $(PY) bench/scaling.py --out $(EVAL_DIR)/scaling.json --figures $(EVAL_DIR) -v > /dev/null
	nice -n 10 $(PY) bench/distrib.py --rules 5000,100000,1000000 --out $(EVAL_DIR)/distrib.json > /dev/null
	nice -n 10 $(PY) bench/workers.py --workers 1,2,3,4 --rates 40000,80000,120000 --json > $(EVAL_DIR)/workers.json

eval-quick: venv
	mkdir -p /tmp/pazz-eval
	$(PY) bench/paper.py --quick --out /tmp/pazz-eval/paper.json --figures /tmp/pazz-eval > /dev/null
	$(PY) bench/scaling.py --quick --out /tmp/pazz-eval/scaling.json --figures /tmp/pazz-eval > /dev/null

# The end-to-end demo (root): emulated network, pazzd, traffic, one fault of each class.
# DEMO_ARGS="--topology grid16 --duration 120" for the other topologies.
demo: deps venv ovs
	PAZZ_OVS_PREFIX=$$(cat $(OVS_PREFIX_FILE)) $(PY) -m pazzlab.demo $(DEMO_ARGS)

clean:
	rm -rf $(VENV) $(OVS_PREFIX_FILE) .pytest_cache
