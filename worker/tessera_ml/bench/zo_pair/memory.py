"""Peak tensor memory of one training step, weights included.

On CPU the step runs under ``torch.profiler`` with memory profiling: every allocation and free is
an event, and the running sum of their sizes peaks at the step's high-water mark above what was
resident when it began (``resident``: weights, gradients kept between steps, inputs). On GPU
``torch.cuda.max_memory_allocated`` already counts everything allocated.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import torch
from torch.profiler import ProfilerActivity, profile


def tensor_bytes(tensors: Iterable[torch.Tensor | None]) -> int:
    return sum(t.numel() * t.element_size() for t in tensors if t is not None)


def peak_step_bytes(step: Callable[[], Any], *, resident: int, device: torch.device) -> int:
    """Highest tensor memory in use while ``step()`` runs."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        step()
        torch.cuda.synchronize(device)
        return int(torch.cuda.max_memory_allocated(device))
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        step()
    events = prof.profiler.kineto_results.events() if prof.profiler is not None else []
    deltas = sorted((e.start_ns(), e.nbytes()) for e in events if e.name() == "[memory]")
    if not deltas:
        raise RuntimeError("the profiler recorded no memory events")
    current = high = 0
    for _, delta in deltas:
        current += delta
        high = max(high, current)
    return resident + high
