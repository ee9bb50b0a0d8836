"""Blockwise symmetric quantisation of fp32 vectors to int8 or int4, packed for the wire.

A vector is cut into blocks of ``block`` elements; each block keeps one fp32 scale
(``max |x| / qmax``) and one signed code per element, ``round(x / scale)`` in
``[-qmax, qmax]`` (``qmax`` 127 for int8, 7 for int4). Dequantising gives ``code * scale``, so an
element is off by at most half a scale step: ``|x - x̂| <= max|block| / (2 qmax)``.

On the wire a quantised vector is one ``uint8`` tensor: the codes (int4: two per byte, low
nibble first, each stored as ``code + 8``) padded to a multiple of four bytes, then the
scales' bytes. Every operation is a torch
operation on the vector's own device.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch

Bits = Literal[8, 4]
QMAX = {8: 127, 4: 7}


@dataclass(frozen=True)
class Codec:
    bits: Bits
    block: int

    def __post_init__(self) -> None:
        if self.bits not in QMAX:
            raise ValueError(f"bits must be 8 or 4, not {self.bits}")
        if self.block < 2 or self.block % 2:
            raise ValueError(f"block must be an even number of at least 2, not {self.block}")

    def blocks(self, n: int) -> int:
        return -(-n // self.block)

    def code_bytes(self, n: int) -> int:
        """Bytes of ``n`` codes, padded to a multiple of 4 so the scales after them align."""
        raw = n if self.bits == 8 else -(-n // 2)
        return -(-raw // 4) * 4

    def wire_bytes(self, n: int) -> int:
        """Bytes of a quantised vector of ``n`` elements on the wire."""
        return self.code_bytes(n) + 4 * self.blocks(n) if n else 0

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        """``x`` (1-D fp32) quantised and packed into ``wire_bytes(x.numel())`` bytes."""
        n = x.numel()
        if n == 0:
            return torch.empty(0, dtype=torch.uint8, device=x.device)
        qmax = QMAX[self.bits]
        blocks = self.blocks(n)
        padded = torch.zeros(blocks * self.block, dtype=torch.float32, device=x.device)
        padded[:n] = x
        rows = padded.view(blocks, self.block)
        scales = rows.abs().amax(dim=1) / qmax
        safe = torch.where(scales > 0, scales, torch.ones_like(scales))
        codes = torch.round(rows / safe[:, None]).clamp_(-qmax, qmax).to(torch.int16).view(-1)[:n]
        out = torch.zeros(self.wire_bytes(n), dtype=torch.uint8, device=x.device)
        body = self.code_bytes(n)
        if self.bits == 8:
            out[:n] = codes.to(torch.int8).view(torch.uint8)
        else:
            nibbles = (codes + 8).to(torch.uint8)
            if n % 2:
                nibbles = torch.cat([nibbles, nibbles.new_full((1,), 8)])
            pairs = nibbles.view(-1, 2)
            out[: pairs.shape[0]] = pairs[:, 0] | (pairs[:, 1] << 4)
        out[body:] = scales.view(torch.uint8)
        return out

    def decode(self, wire: torch.Tensor, n: int, out: torch.Tensor | None = None) -> torch.Tensor:
        """The fp32 vector of ``n`` elements that ``wire`` encodes (written into ``out``)."""
        if out is None:
            out = torch.empty(n, dtype=torch.float32, device=wire.device)
        if n == 0:
            return out
        body = self.code_bytes(n)
        scales = wire[body:].view(torch.float32)
        if self.bits == 8:
            codes = wire[:n].view(torch.int8).to(torch.float32)
        else:
            packed = wire[: -(-n // 2)]
            low = (packed & 0x0F).to(torch.float32) - 8
            high = (packed >> 4).to(torch.float32) - 8
            codes = torch.stack([low, high], dim=1).view(-1)[:n]
        per_element = scales.repeat_interleave(self.block)[:n]
        torch.mul(codes, per_element, out=out)
        return out

    def round_trip(self, x: torch.Tensor) -> torch.Tensor:
        """What the receiver of ``encode(x)`` reads back."""
        return self.decode(self.encode(x), x.numel())
