"""Items of material for the dealer's tests: one of every kind, and a seed."""

from tessera_ml.algorithms.mpc_mixed.request import Kind, Request

SEED = bytes(range(32))

REQUESTS = [
    Request(Kind.MUL, 32, (3, 4), (4,)),
    Request(Kind.MATMUL, 64, (3, 4), (4, 2)),
    Request(Kind.TRUNC, 64, (5,), shift=8),
    Request(Kind.EXTEND, 64, (5,)),
    Request(Kind.COMPARE, 32, (6,)),
    Request(Kind.COMPARE, 32, (70,), fan_in=True),
    Request(Kind.COMPARE, 64, (3, 5), fan_in=True),
    Request(Kind.SELECT, 0, (6,), uses=(32, 64)),
    Request(Kind.NORM, 64, (8, 3)),
    Request(Kind.MATMUL_PAIR, 64, (5, 3), (3, 2)),
    Request(Kind.WIDE_MUL, 64, (4, 3)),
    Request(Kind.WIDE_MUL, 64, (4, 3), square=True),
    Request(Kind.WIDE_MATMUL, 64, (4, 3), (3, 2)),
    Request(Kind.PRODUCT, 32, (6, 2), bit_factors=(False, True, True)),
    Request(Kind.PRODUCT, 64, (5,), bit_factors=(True, False, True, False)),
    Request(Kind.COMPARE, 64, (4,)),
]
