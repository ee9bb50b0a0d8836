"""The Rademacher sign stream: its definition, the compiled core and torch operations agree."""

from __future__ import annotations

import itertools
import random

import pytest
import torch

from tessera_ml.algorithms.zo_pair import signs

CPU = torch.device("cpu")


def test_the_compiled_core_is_built() -> None:
    assert signs.available(), signs.UNAVAILABLE


def test_words_are_splitmix64_outputs() -> None:
    # splitmix64 seeded with 0 starts e220a8397b1dcdaf, 6e789e6aa1b965f4 (its reference outputs)
    assert [signs.word(0, j) for j in range(2)] == [0xE220A8397B1DCDAF, 0x6E789E6AA1B965F4]
    from tessera_ml.algorithms.zo_pair import _native_signs as core

    for key in (0, 1, 12345, (1 << 63) - 1, (1 << 64) - 1):
        for j in (0, 1, 63, 10**9):
            assert core.word(key, j) == signs.word(key, j)


def test_torch_signs_read_the_words_bit_by_bit() -> None:
    key = 0x1234_5678_9ABC_DEF0
    z = signs.torch_signs(key, 40, 200, torch.float64, CPU)
    for i in range(200):
        e = 40 + i
        bit = (signs.word(key, e // 64) >> (e % 64)) & 1
        assert z[i].item() == (1.0 if bit else -1.0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_compiled_and_torch_ranges_give_the_same_numbers(dtype: torch.dtype) -> None:
    rng = random.Random(7)
    for _ in range(200):
        key, start, n = rng.getrandbits(63), rng.randrange(0, 300), rng.randrange(0, 300)
        alpha = rng.choice([1.0, -0.37, 1e-3, 3.3e-5])
        base = torch.randn(n, dtype=dtype)
        z = signs.torch_signs(key, start, n, dtype, CPU)
        added = signs.add_signs(torch.empty(n, dtype=dtype), base, key, start, alpha)
        assert torch.equal(added, torch.add(base, z, alpha=alpha))
        scaled = signs.add_signs(torch.empty(n, dtype=dtype), None, key, start, alpha)
        assert torch.equal(scaled, z * alpha)
        in_place = base.clone()
        signs.add_signs(in_place, in_place, key, start, alpha)
        assert torch.equal(in_place, added)
    # a strided tensor goes through torch operations, to the same numbers
    strided = torch.zeros(1000, dtype=dtype)[::2]
    signs.add_signs(strided, None, 99, 5, 1.0)
    whole = signs.add_signs(torch.empty(500, dtype=dtype), None, 99, 5, 1.0)
    assert torch.equal(strided, whole)


def test_without_the_core_torch_forms_long_ranges_chunk_by_chunk(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    n = signs.CHUNK + 1000
    base = torch.randn(n)
    compiled = signs.add_signs(torch.empty(n), base, 31, 17, 0.5)
    monkeypatch.setattr(signs, "_core", None)
    assert torch.equal(signs.add_signs(torch.empty(n), base, 31, 17, 0.5), compiled)
    in_place = base.clone()
    assert torch.equal(signs.add_signs(in_place, in_place, 31, 17, 0.5), compiled)


def test_ranges_put_together_are_the_stream() -> None:
    whole = signs.torch_signs(5, 0, 1000, torch.float32, CPU)
    cuts = [0, 1, 9, 64, 65, 200, 999, 1000]
    pairs = itertools.pairwise(cuts)
    parts = [signs.torch_signs(5, a, b - a, torch.float32, CPU) for a, b in pairs]
    assert torch.equal(torch.cat(parts), whole)
    assert set(whole.unique().tolist()) == {-1.0, 1.0}


def test_a_base_of_another_size_a_negative_start_or_an_infinite_alpha_is_refused() -> None:
    with pytest.raises(ValueError, match="base"):
        signs.add_signs(torch.empty(4), torch.empty(5), 1, 0, 1.0)
    with pytest.raises(ValueError, match="start"):
        signs.add_signs(torch.empty(4), None, 1, -1, 1.0)
    for alpha in (float("inf"), float("nan")):
        with pytest.raises(ValueError, match="alpha"):
            signs.add_signs(torch.empty(4), None, 1, 0, alpha)


def test_overlapping_ranges_and_tensors_autograd_watches_are_left_to_torch() -> None:
    buffer = torch.randn(300)
    with pytest.raises(RuntimeError, match="memory location"):
        signs.add_signs(buffer[1:], buffer[:-1], 3, 0, 1.0)
    weight = torch.zeros(100, requires_grad=True)
    with pytest.raises(RuntimeError, match="requires grad"):
        signs.add_signs(weight, weight, 3, 0, 1.0)
    with torch.no_grad():
        signs.add_signs(weight, weight, 3, 0, 1.0)
    assert torch.equal(weight.detach(), signs.torch_signs(3, 0, 100, torch.float32, CPU))


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_a_gpu_forms_the_same_signs_as_the_cpu() -> None:
    cuda = torch.device("cuda")
    for dtype in (torch.float32, torch.float64):
        on_gpu = signs.torch_signs(12345, 77, 100_000, dtype, cuda)
        assert torch.equal(on_gpu.cpu(), signs.torch_signs(12345, 77, 100_000, dtype, CPU))
        base = torch.randn(5000, dtype=dtype)
        moved = signs.add_signs(
            torch.empty(5000, dtype=dtype, device=cuda), base.to(cuda), 9, 3, 0.1
        )
        assert torch.equal(moved.cpu(), signs.add_signs(torch.empty_like(base), base, 9, 3, 0.1))
