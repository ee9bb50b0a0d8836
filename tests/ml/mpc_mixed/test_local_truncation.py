"""Local truncation (each party shifts its own share): floor or floor + 1 below the stated range,
wrong by 2^(64 - d) about as often as stated above it, and no round or material."""

import pytest
import torch

from tessera_ml.algorithms.mpc_mixed.local import engines, run_two
from tessera_ml.algorithms.mpc_mixed.protocols import Engine
from tessera_ml.algorithms.mpc_mixed.ring import Ring

from .helpers import on_both, shared

R64 = Ring(64, 20)
GEN = torch.Generator().manual_seed(11)


def _local(x: torch.Tensor, shift: int) -> torch.Tensor:
    return on_both(lambda eng, v: eng.arith.trunc(v, shift, R64), x, ring=R64, truncation="local")


@pytest.mark.parametrize("shift", [1, 20, 34])
def test_local_truncation_is_floor_or_floor_plus_one_for_values_below_2_to_the_40(
    shift: int,
) -> None:
    top = 2**40
    edges = [-top, -top + 1, -(2**shift) - 1, -(2**shift), -1, 0, 1, 2**shift, top - 1]
    rand = torch.randint(-top, top, (5000,), generator=GEN, dtype=torch.int64)
    x = torch.cat([torch.tensor(edges, dtype=torch.int64), rand])
    out = _local(x, shift)
    exact = torch.div(x, 2**shift, rounding_mode="floor")
    assert ((out == exact) | (out == exact + 1)).all()


def test_local_truncation_rounds_stochastically_without_bias() -> None:
    shift, low = 8, 64
    x = torch.full((20000,), 5 * 2**shift + low, dtype=torch.int64)
    ups = (_local(x, shift) - 5).double()
    assert set(ups.unique().tolist()) <= {0.0, 1.0}
    assert abs(ups.mean().item() - low / 2**shift) < 0.02


@pytest.mark.parametrize("sign", [1, -1])
def test_local_truncation_is_off_by_2_to_the_64_minus_d_with_probability_x_over_2_to_the_64(
    sign: int,
) -> None:
    shift, n = 20, 20000
    x = torch.full((n,), sign * 2**60, dtype=torch.int64)  # wraps with probability 1/16
    out = _local(x, shift)
    off = out - sign * 2**40
    wrong = (off != 0) & (off != 1)
    # the error is one wrap of the shares' sum, shifted: 2^44 (mod 2^64), up to the rounding
    assert ((off[wrong] + sign * 2**44).abs() <= 1).all()
    assert abs(wrong.double().mean().item() - 1 / 16) < 0.01


def test_local_truncation_takes_no_round_and_no_material_in_z64_only() -> None:
    r32 = Ring(32, 12)

    def rounds_and_material(eng: Engine, v64: torch.Tensor, v32: torch.Tensor) -> list[int]:
        counts = []
        for step in (
            lambda: eng.arith.trunc_many([v64, v64 * 3], 20, R64),
            lambda: eng.arith.mul_public(v64, 0.25, R64),
            lambda: eng.arith.trunc(v64, 34, R64, large=True),
            lambda: eng.arith.trunc(v32, 12, r32),
        ):
            rounds, got = eng.peer.stats.rounds, eng.provider.stats.bytes_received
            step()
            counts += [eng.peer.stats.rounds - rounds, eng.provider.stats.bytes_received - got]
        return counts

    x64 = R64.encode(torch.randn(40, generator=GEN, dtype=torch.float64))
    x32 = Ring(32, 12).encode(torch.randn(40, generator=GEN, dtype=torch.float64))
    a0, a1 = shared(x64, x32, ring=R64)
    _, party1 = run_two(rounds_and_material, a0, a1, truncation="local")
    local, public, large, narrow = party1[0:2], party1[2:4], party1[4:6], party1[6:8]
    assert local == [0, 0] and public == [0, 0]
    assert large[0] == 1 and large[1] > 0  # a value the caller marks large is masked
    assert narrow[0] == 1 and narrow[1] > 0  # Z_2^32 truncation stays masked


def test_an_unknown_truncation_is_refused() -> None:
    with pytest.raises(ValueError, match="truncation is one of masked, local"):
        engines(truncation="exact")
