"""The Rademacher stream: ±1 signs of which any range can be formed on its own.

Element e of the stream of key k is +1 where bit ``e mod 64`` of word ``e // 64`` is set and -1
where it is not. Word j is the splitmix64 output for the state ``k + (j + 1)·g`` (g the golden
ratio constant 0x9E3779B97F4A7C15): the generator behind Java's ``SplittableRandom``, which
passes BigCrush. Being counter-based, a range starting anywhere costs only its own words, and
the same key gives the same signs on any device and in any order of ranges.

``add_signs`` writes ``base + alpha·z`` for a range in one pass through the compiled core
(``native_signs.c``, one thread) for contiguous CPU float32 and float64 tensors, and through
torch operations (the same numbers) otherwise or where the core is not built.
"""

from __future__ import annotations

import math

import torch

from tessera_ml.algorithms.zo_pair.seeds import GAMMA, MASK, MUL1, MUL2, splitmix64

try:
    from tessera_ml.algorithms.zo_pair import _native_signs as _core

    UNAVAILABLE = ""
except ImportError as exc:  # built without a compiler: torch operations give the same signs
    _core = None  # type: ignore[assignment]
    UNAVAILABLE = str(exc)

WORD = 64
_NATIVE_DTYPES = (torch.float32, torch.float64)
CHUNK = 1 << 19
"""Elements formed at once by torch operations (2 MiB of float32 signs)."""


def available() -> bool:
    return _core is not None


def word(key: int, j: int) -> int:
    """Word ``j`` of the stream of ``key``, in Python integers (the definition)."""
    return splitmix64(key + (j + 1) * GAMMA)


def _signed(value: int) -> int:
    """The int64 holding the same 64 bits as ``value``."""
    return value - (1 << 64) if value >= 1 << 63 else value


def _shift_right(z: torch.Tensor, bits: int) -> torch.Tensor:
    """Logical shift of int64 words (torch's ``>>`` copies the sign bit)."""
    return (z >> bits) & ((1 << (64 - bits)) - 1)


def _sign_table(dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """Row b holds the eight signs of byte b: +1 where bit i of b is set, -1 where it is not."""
    bits = (torch.arange(256).unsqueeze(1) >> torch.arange(8)) & 1
    return (bits * 2 - 1).to(dtype=dtype, device=device)


_tables: dict[tuple[torch.dtype, torch.device], torch.Tensor] = {}


def torch_signs(
    key: int, start: int, count: int, dtype: torch.dtype, device: torch.device
) -> torch.Tensor:
    """Elements ``[start, start + count)`` of the stream, by torch operations on ``device``."""
    if count <= 0:
        return torch.empty(0, dtype=dtype, device=device)
    first, last = start // WORD, (start + count - 1) // WORD
    z = torch.arange(first + 1, last + 2, dtype=torch.int64, device=device)
    # int64 products wrap around: the arithmetic is modulo 2^64, as in the definition
    z = z * _signed(GAMMA) + _signed(key & MASK)
    z = (z ^ _shift_right(z, 30)) * _signed(MUL1)
    z = (z ^ _shift_right(z, 27)) * _signed(MUL2)
    z = z ^ _shift_right(z, 31)
    octets = (z.unsqueeze(1) >> torch.arange(0, WORD, 8, device=device)) & 0xFF
    table = _tables.get((dtype, torch.device(device)))
    if table is None:
        table = _tables[(dtype, torch.device(device))] = _sign_table(dtype, device)
    signs = table[octets.reshape(-1)].reshape(-1)
    offset = start - first * WORD
    return signs[offset : offset + count]


def _native(out: torch.Tensor, base: torch.Tensor | None) -> bool:
    """Whether the compiled core may write ``out``: contiguous CPU memory of a dtype it knows,
    nothing autograd must see, and ``base`` either ``out`` itself or apart from it."""
    if _core is None or out.device.type != "cpu" or out.dtype not in _NATIVE_DTYPES:
        return False
    if not out.is_contiguous() or (out.requires_grad and torch.is_grad_enabled()):
        return False
    if base is None or base.data_ptr() == out.data_ptr():
        return base is None or base.is_contiguous()
    if base.device.type != "cpu" or not base.is_contiguous():
        return False
    size = out.numel() * out.element_size()
    return base.data_ptr() + size <= out.data_ptr() or out.data_ptr() + size <= base.data_ptr()


def add_signs(
    out: torch.Tensor,
    base: torch.Tensor | None,
    key: int,
    start: int,
    alpha: float,
) -> torch.Tensor:
    """``out = base + alpha·z[start : start + out.numel()]`` (``alpha·z`` without a base).

    ``out`` and ``base`` are flat, of one dtype and device; ``out`` may be ``base``. Through
    torch operations the range is formed ``CHUNK`` elements at a time.
    """
    n = out.numel()
    if base is not None and (base.numel() != n or base.dtype != out.dtype):
        raise ValueError("base must match out in size and dtype")
    if start < 0 or not math.isfinite(alpha):
        raise ValueError(f"need start >= 0 and a finite alpha, got {start} and {alpha}")
    if _native(out, base):
        base_address = 0 if base is None else base.data_ptr()
        is_double = out.dtype == torch.float64
        _core.add(out.data_ptr(), base_address, n, start, key & MASK, alpha, is_double)
        return out
    for offset in range(0, n, CHUNK):
        end = min(offset + CHUNK, n)
        z = torch_signs(key, start + offset, end - offset, out.dtype, out.device)
        if base is None:
            out[offset:end].copy_(z.mul_(alpha))
        else:
            torch.add(base[offset:end], z, alpha=alpha, out=out[offset:end])
    return out
