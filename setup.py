"""The compiled core of param_server's embedding table. Optional: where it cannot be built the
install still succeeds and the table runs on torch operations alone."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "tessera_ml.algorithms.param_server._native_table",
            sources=["worker/tessera_ml/algorithms/param_server/native_table.c"],
            extra_compile_args=["-O3", "-std=gnu11", "-ffp-contract=off", "-pthread"],
            extra_link_args=["-pthread"],
            optional=True,
        )
    ]
)
