"""The compiled modules, cpc._walkc (the class walk's hot loops) and cpc._leqc (the
partition's per-class tests); everything else is in pyproject.toml."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension("cpc._walkc", ["cpc/_walkc.c"], extra_compile_args=["-O2", "-Wall", "-Werror"]),
        Extension("cpc._leqc", ["cpc/_leqc.c"], extra_compile_args=["-O2", "-Wall", "-Werror"]),
    ]
)
