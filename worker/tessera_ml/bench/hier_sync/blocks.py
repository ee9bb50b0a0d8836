"""How the block size of the inter-node quantisation trades error against bytes.

One gradient of the benchmark's model (the same MLP, seeded data), the slice one device of a
job of 2 nodes of 2 devices holds (a quarter), quantised with each block size: the relative L2 error
of what the receiver reads back and the bytes per element on the wire (codes plus one fp32
scale per block).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import torch

from tessera_ml.algorithms.hier_sync.quantize import Codec

BLOCKS = (32, 64, 128, 256, 512, 1024, 4096)


def benchmark_gradient(widths: Sequence[int], classes: int, batch: int, seed: int) -> torch.Tensor:
    """The flat gradient of an MLP ``widths[0] → … → classes`` on one seeded random batch."""
    gen = torch.Generator().manual_seed(seed)
    layers: list[torch.nn.Module] = []
    for a, b in itertools.pairwise(widths):
        layers += [torch.nn.Linear(a, b), torch.nn.ReLU()]
    layers.append(torch.nn.Linear(widths[-1], classes))
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = torch.nn.Sequential(*layers)
    x = torch.randn(batch, widths[0], generator=gen)
    y = torch.randint(0, classes, (batch,), generator=gen)
    torch.nn.functional.cross_entropy(model(x), y).backward()
    return torch.cat([p.grad.reshape(-1) for p in model.parameters() if p.grad is not None])


def block_sweep(gradient: torch.Tensor, share: float = 0.25) -> list[dict[str, Any]]:
    part = gradient[: int(gradient.numel() * share)]
    rows = []
    for bits in (8, 4):
        for block in BLOCKS:
            codec = Codec(bits, block)
            error = (codec.round_trip(part) - part).norm() / part.norm()
            rows.append(
                {
                    "bits": bits,
                    "block": block,
                    "relative_l2_error": round(float(error), 5),
                    "wire_bytes_per_element": round(
                        codec.wire_bytes(part.numel()) / part.numel(), 4
                    ),
                }
            )
    return rows
