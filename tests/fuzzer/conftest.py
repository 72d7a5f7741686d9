"""Fuzzer tests; the patched-OVS fixtures come from tests/ovs/conftest.py."""

from tests.ovs.conftest import cleanup, ovs, ovs_factory, ovs_prefix  # noqa: F401
