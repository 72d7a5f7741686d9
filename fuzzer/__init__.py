"""PAZZ fuzzer package."""
