"""What one micro-batch of the pipelined job costs: its compute, and its transfer on a link.

Pipelining can only hide a transfer behind compute (or another transfer) when transfers take
at least as long as the compute they overlap; these two numbers show that the benchmark's link
is such a link.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

import torch

from tessera_ml.algorithms.split_nn.models import (
    DTYPES,
    bottom_model,
    loss_sum,
    middle_model,
    output_width,
    top_model,
)
from tessera_ml.algorithms.split_nn.spec import SplitNNConfig

WARMUP = 3


def compute_s(
    config: dict[str, Any], *, features: int, classes: int, rows: int, repeats: int = 30
) -> float:
    """Median seconds, on one thread (as each rank runs), of the forward and backward of one
    micro-batch of ``rows`` through the bottom, middle and top models together: the compute
    of all three parties for that micro-batch, added up."""
    cfg = SplitNNConfig.model_validate(config)
    dtype = DTYPES[cfg.dtype]
    bottom = bottom_model(cfg, 0, features)
    width = output_width(bottom, features, dtype)
    middle = middle_model(cfg, width)
    top = top_model(cfg, output_width(middle, width, dtype), classes)
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(rows, features, generator=gen, dtype=dtype)
    y = torch.randint(classes, (rows,), generator=gen)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    times = []
    try:
        for _ in range(WARMUP + repeats):
            start = time.perf_counter()
            loss_sum(top(middle(bottom(x))), y, "classification").backward()
            times.append(time.perf_counter() - start)
    finally:
        torch.set_num_threads(threads)
    return statistics.median(times[WARMUP:])


def transfer_s(config: dict[str, Any], *, rows: int, rate_mbit: float) -> float:
    """Seconds one micro-batch's widest cut message (activation or gradient, uncompressed)
    takes at ``rate_mbit``, without protocol overhead."""
    cfg = SplitNNConfig.model_validate(config)
    widths = [spec.out for spec in (cfg.bottom, cfg.middle) if spec.out is not None]
    elem = torch.empty(0, dtype=DTYPES[cfg.dtype]).element_size()
    return rows * max(widths) * elem * 8 / (rate_mbit * 1e6)
