"""Cut encodings: exact, fp16 and int8 with per-row scale, and the bytes they put on the wire."""

from __future__ import annotations

import pytest
import torch

from tessera_ml.algorithms.split_nn.codecs import codec


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_exact_codec_round_trips_bit_for_bit(dtype: torch.dtype) -> None:
    x = torch.randn(7, 5, dtype=dtype, generator=torch.Generator().manual_seed(1))
    c = codec("none")
    assert torch.equal(c.decode(c.encode(x), dtype), x)
    assert c.wire_bytes(7, 5, dtype) == x.numel() * x.element_size()


def test_int8_rows_error_is_bounded_by_half_a_step_per_row() -> None:
    gen = torch.Generator().manual_seed(2)
    x = torch.randn(64, 32, generator=gen) * torch.logspace(-6, 2, 64)[:, None]
    x[3] = 0.0
    c = codec("int8")
    wire = c.encode(x)
    assert [w.dtype for w in wire] == [torch.int8, torch.float32]
    back = c.decode(wire, torch.float32)
    step = x.abs().amax(dim=1, keepdim=True) / 127
    assert torch.all((back - x).abs() <= step / 2 + 1e-6 * step)
    assert torch.equal(back[3], torch.zeros(32))
    assert c.wire_bytes(64, 32, torch.float32) == 64 * 32 + 64 * 4


def test_fp16_halves_float32_bytes_with_half_precision_error() -> None:
    x = torch.randn(16, 8, generator=torch.Generator().manual_seed(3))
    c = codec("fp16")
    back = c.decode(c.encode(x), torch.float32)
    assert torch.allclose(back, x, rtol=1e-3, atol=1e-4)
    assert c.wire_bytes(16, 8, torch.float32) == 16 * 8 * 2


def test_unknown_codec_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="unknown compression"):
        codec("int4")
