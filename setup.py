"""Compiled cores: param_server's embedding table and zo_pair's sign stream. Both are optional:
where they cannot be built the install still succeeds and torch operations do the same work
(the same numbers, for zo_pair's z)."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "tessera_ml.algorithms.param_server._native_table",
            sources=["worker/tessera_ml/algorithms/param_server/native_table.c"],
            extra_compile_args=["-O3", "-std=gnu11", "-ffp-contract=off", "-pthread"],
            extra_link_args=["-pthread"],
            optional=True,
        ),
        Extension(
            "tessera_ml.algorithms.zo_pair._native_signs",
            sources=["worker/tessera_ml/algorithms/zo_pair/native_signs.c"],
            extra_compile_args=["-O3", "-std=gnu11", "-ffp-contract=off"],
            optional=True,
        ),
    ]
)
