"""Blockwise quantisation and the quantised inter-node all-reduce with error feedback."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from tessera_ml.algorithms.hier_sync.compressed import CompressedAllReduce
from tessera_ml.algorithms.hier_sync.quantize import QMAX, Codec
from tessera_ml.algorithms.hier_sync.slicing import even_bounds
from tessera_ml.comm.base import Communicator
from tessera_ml.worlds import run_world

MEMBERS = 3
SLICE = 1000
STEPS = 6
BLOCK = 64


@pytest.mark.parametrize("bits", [8, 4])
@pytest.mark.parametrize("n", [1, 63, 64, 65, 1001])
def test_round_trip_is_within_half_a_step_of_each_block_scale(bits: Any, n: int) -> None:
    codec = Codec(bits, BLOCK)
    x = torch.randn(n, generator=torch.Generator().manual_seed(n)) * 10
    x[n // 2] = 0.0
    wire = codec.encode(x)
    assert wire.dtype == torch.uint8 and wire.numel() == codec.wire_bytes(n)
    back = codec.decode(wire, n)
    padded = torch.zeros(codec.blocks(n) * BLOCK)
    padded[:n] = x
    step = padded.view(-1, BLOCK).abs().amax(1) / QMAX[bits]
    bound = (step / 2).repeat_interleave(BLOCK)[:n]
    assert bool(((x - back).abs() <= bound * (1 + 1e-6)).all())
    # a larger element of the block is not clipped: the block's maximum comes back exactly
    assert torch.allclose(back.abs().max(), x.abs().max())
    assert codec.round_trip(torch.zeros(n)).abs().max().item() == 0.0


def test_wire_bytes_are_a_quarter_or_an_eighth_of_fp32_plus_one_scale_per_block() -> None:
    n = 64 * 1000
    assert Codec(8, 64).wire_bytes(n) == n + 4 * 1000
    assert Codec(4, 64).wire_bytes(n) == n // 2 + 4 * 1000


def _gradient(rank: int, step: int) -> torch.Tensor:
    return torch.randn(SLICE, generator=torch.Generator().manual_seed(1000 * step + rank))


def _member(comm: Communicator, bits: Any) -> dict[str, Any]:
    torch.set_num_threads(1)
    ranks = list(range(MEMBERS))
    reducer = CompressedAllReduce(comm, ranks, Codec(bits, BLOCK), SLICE, torch.device("cpu"))
    applied = []
    for step in range(STEPS):
        piece = _gradient(comm.rank, step)
        if step % 2:  # the slice in two pieces, as buckets hand it over
            reducer.all_reduce(piece[:400], 0)
            reducer.all_reduce(piece[400:], 400)
        else:
            reducer.all_reduce(piece, 0)
        applied.append(piece)
    return {  # lists: tensors do not outlive the rank's process on the way back
        "applied": torch.stack(applied).tolist(),
        "residual": reducer.residual.tolist(),
        "owner_residual": reducer.owner_residual.tolist(),
        "sent": reducer.sent_bytes,
        "stats_sent": comm.stats.sent,
    }


@pytest.fixture(scope="module")
def members() -> dict[int, list[dict[str, Any]]]:
    runs = {bits: run_world(_member, MEMBERS, bits, timeout_s=120) for bits in (8, 4)}
    for outs in runs.values():
        for out in outs:
            for key in ("applied", "residual", "owner_residual"):
                out[key] = torch.tensor(out[key])
    return runs


@pytest.mark.parametrize("bits", [8, 4])
def test_every_member_applies_the_same_sum_close_to_the_true_one(
    members: dict[int, list[dict[str, Any]]], bits: int
) -> None:
    out = members[bits]
    for other in out[1:]:
        assert torch.equal(other["applied"], out[0]["applied"])
    true = torch.stack([sum(_gradient(r, s) for r in range(MEMBERS)) for s in range(STEPS)])
    error = (out[0]["applied"] - true).abs().max().item()
    scale = true.abs().max().item()
    assert error < scale * (0.05 if bits == 8 else 0.6)
    assert error > 0  # it was quantised


@pytest.mark.parametrize("bits", [8, 4])
def test_error_feedback_applies_the_summed_gradients_up_to_the_last_residuals(
    members: dict[int, list[dict[str, Any]]], bits: int
) -> None:
    out = members[bits]
    applied = out[0]["applied"].double().sum(0)
    true = sum(_gradient(r, s).double() for r in range(MEMBERS) for s in range(STEPS))
    left = sum(o["residual"].double() + o["owner_residual"].double() for o in out)
    assert torch.allclose(applied, true - left, atol=1e-4)
    # without the residuals the gap is the size of a quantisation step, far above rounding
    assert (applied - true).abs().max().item() > 1e-2


def test_each_member_sends_its_chunks_once_each_way_in_quantised_bytes(
    members: dict[int, list[dict[str, Any]]],
) -> None:
    codec = Codec(8, BLOCK)

    def step_bytes(length: int, position: int) -> int:
        cuts = even_bounds(length, MEMBERS, BLOCK)
        sizes = [cuts[j + 1] - cuts[j] for j in range(MEMBERS)]
        others = sum(codec.wire_bytes(s) for j, s in enumerate(sizes) if j != position)
        return others + (MEMBERS - 1) * codec.wire_bytes(sizes[position])

    for position, out in enumerate(members[8]):
        whole = step_bytes(SLICE, position)
        halves = step_bytes(400, position) + step_bytes(600, position)
        expected = (STEPS // 2) * (whole + halves)
        assert out["sent"] == expected == out["stats_sent"]
        assert expected < 0.3 * STEPS * 2 * SLICE * 4 * (MEMBERS - 1) / MEMBERS
