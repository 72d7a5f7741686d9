"""The one compiled module, cpc._walkc (the class walk's hot loops); everything else is in
pyproject.toml."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension("cpc._walkc", ["cpc/_walkc.c"], extra_compile_args=["-O2", "-Wall", "-Werror"])
    ]
)
