"""A model's parameters and gradients as two flat buffers, cut into buckets.

Parameters are laid out last-layer first, so the buckets become ready in order while the
backward pass runs. A bucket takes parameters until it holds at least ``bucket_bytes``, as
``DistributedDataParallel`` fills its buckets: a layer's bias, laid out just before its weight
and ready at the same moment, then shares the weight's bucket instead of closing a bucket of
its own, and every bucket costs a barrier and a collective whatever its size. Each parameter
(and its ``.grad``) becomes a view into the buffers, and autograd accumulates into those views
in place.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import torch
from torch import nn


class FlatParams:
    """``param`` and ``grad`` hold every trainable parameter; ``buckets`` are (start, end)."""

    def __init__(self, model: nn.Module, bucket_bytes: int) -> None:
        params = [p for p in model.parameters() if p.requires_grad]
        if not params:
            raise ValueError("the model has no trainable parameters")
        dtypes = {p.dtype for p in params}
        if len(dtypes) != 1:
            raise ValueError(f"all parameters must share one dtype, got {sorted(map(str, dtypes))}")
        params.reverse()
        self.params = params
        total = sum(p.numel() for p in params)
        device, dtype = params[0].device, params[0].dtype
        self.param = torch.empty(total, dtype=dtype, device=device)
        self.grad = torch.zeros(total, dtype=dtype, device=device)
        self.buckets: list[tuple[int, int]] = []
        self.bucket_of: list[int] = []
        element_bytes = self.param.element_size()
        offset = bucket_start = 0
        for p in params:
            n = p.numel()
            if (offset - bucket_start) * element_bytes >= bucket_bytes:
                self.buckets.append((bucket_start, offset))
                bucket_start = offset
            self.bucket_of.append(len(self.buckets))
            with torch.no_grad():
                self.param[offset : offset + n].copy_(p.detach().reshape(-1))
            p.data = self.param[offset : offset + n].view_as(p)
            p.grad = self.grad[offset : offset + n].view_as(p)
            offset += n
        self.buckets.append((bucket_start, offset))

    def rebind(self, param: torch.Tensor, grad: torch.Tensor) -> None:
        """Make ``param`` and ``grad`` (flat, same size and dtype) the buffers, as they are:
        every parameter and its ``.grad`` become views into them."""
        offset = 0
        for p in self.params:
            n = p.numel()
            p.data = param[offset : offset + n].view_as(p)
            p.grad = grad[offset : offset + n].view_as(p)
            offset += n
        self.param, self.grad = param, grad

    @property
    def numel(self) -> int:
        return self.param.numel()

    @property
    def nbytes(self) -> int:
        return self.param.numel() * self.param.element_size()

    def watch(self, on_bucket_ready: Callable[[int], None]) -> BucketWatch:
        """Call ``on_bucket_ready(b)`` once every parameter of bucket ``b`` has its gradient."""
        return BucketWatch(self, on_bucket_ready)


class BucketWatch:
    """Counts gradient arrivals per bucket from post-accumulate hooks; ``reset`` each step."""

    def __init__(self, flat: FlatParams, on_ready: Callable[[int], None]) -> None:
        self._sizes = [0] * len(flat.buckets)
        for b in flat.bucket_of:
            self._sizes[b] += 1
        self._pending = list(self._sizes)
        self._on_ready = on_ready
        self._lock = threading.Lock()
        self._handles = [
            p.register_post_accumulate_grad_hook(self._hook(b))
            for p, b in zip(flat.params, flat.bucket_of, strict=True)
        ]

    def _hook(self, bucket: int) -> Callable[[torch.Tensor], None]:
        def hook(_: torch.Tensor) -> None:
            with self._lock:
                self._pending[bucket] -= 1
                ready = self._pending[bucket] == 0
            if ready:
                self._on_ready(bucket)

        return hook

    def reset(self) -> None:
        with self._lock:
            self._pending = list(self._sizes)

    def remove(self) -> None:
        for handle in self._handles:
            handle.remove()
