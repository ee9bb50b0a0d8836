"""Encodings of the tensors crossing a cut: exact, half precision, or int8 with per-row scale.

A codec turns a ``[rows, dim]`` tensor into the wire tensors sent for it and back. Both sides of a
cut know ``rows``, ``dim`` and the codec in advance, so only payload crosses the wire.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import torch

INT8_MAX = 127.0


class Codec(ABC):
    name: str

    @abstractmethod
    def encode(self, t: torch.Tensor) -> list[torch.Tensor]: ...

    @abstractmethod
    def buffers(self, rows: int, dim: int, dtype: torch.dtype) -> list[torch.Tensor]:
        """Empty wire tensors to receive one encoded ``[rows, dim]`` tensor into."""

    @abstractmethod
    def decode(self, wire: list[torch.Tensor], dtype: torch.dtype) -> torch.Tensor: ...

    def wire_bytes(self, rows: int, dim: int, dtype: torch.dtype) -> int:
        return sum(b.numel() * b.element_size() for b in self.buffers(rows, dim, dtype))


class Exact(Codec):
    name = "none"

    def encode(self, t: torch.Tensor) -> list[torch.Tensor]:
        return [t.detach().contiguous()]

    def buffers(self, rows: int, dim: int, dtype: torch.dtype) -> list[torch.Tensor]:
        return [torch.empty(rows, dim, dtype=dtype)]

    def decode(self, wire: list[torch.Tensor], dtype: torch.dtype) -> torch.Tensor:
        return wire[0].to(dtype)


class Half(Codec):
    name = "fp16"

    def encode(self, t: torch.Tensor) -> list[torch.Tensor]:
        return [t.detach().to(torch.float16).contiguous()]

    def buffers(self, rows: int, dim: int, dtype: torch.dtype) -> list[torch.Tensor]:
        return [torch.empty(rows, dim, dtype=torch.float16)]

    def decode(self, wire: list[torch.Tensor], dtype: torch.dtype) -> torch.Tensor:
        return wire[0].to(dtype)


class Int8Rows(Codec):
    """Symmetric int8 with a float32 scale per row: ``x ≈ q * s``, ``s = max|x| / 127``."""

    name = "int8"

    def encode(self, t: torch.Tensor) -> list[torch.Tensor]:
        x = t.detach().to(torch.float32)
        scale = x.abs().amax(dim=1) / INT8_MAX
        safe = torch.where(scale > 0, scale, torch.ones_like(scale))
        q = torch.round(x / safe[:, None]).clamp_(-INT8_MAX, INT8_MAX).to(torch.int8)
        return [q.contiguous(), scale.contiguous()]

    def buffers(self, rows: int, dim: int, dtype: torch.dtype) -> list[torch.Tensor]:
        return [torch.empty(rows, dim, dtype=torch.int8), torch.empty(rows, dtype=torch.float32)]

    def decode(self, wire: list[torch.Tensor], dtype: torch.dtype) -> torch.Tensor:
        q, scale = wire
        return (q.to(torch.float32) * scale[:, None]).to(dtype)


CODECS: dict[str, type[Codec]] = {c.name: c for c in (Exact, Half, Int8Rows)}


def codec(name: str) -> Codec:
    if name not in CODECS:
        raise ValueError(f"unknown compression {name!r} (known: {', '.join(CODECS)})")
    return CODECS[name]()
