"""Tensor bytes for the links, and pending operations that keep their buffers alive."""

from __future__ import annotations

from typing import Any

import torch


def byte_view(tensor: torch.Tensor) -> memoryview:
    """The bytes of a contiguous CPU tensor, writable in place."""
    if tensor.numel() == 0:
        return memoryview(bytearray())
    raw: Any = tensor.reshape(-1).view(torch.uint8).numpy()
    return memoryview(raw).cast("B")


def host_bytes(tensor: torch.Tensor) -> memoryview:
    """The bytes of a tensor, copied to contiguous CPU memory where it is not already."""
    host = tensor.detach()
    if host.device.type != "cpu":
        host = host.cpu()
    return byte_view(host.contiguous())


class Kept:
    """A pending operation that keeps its buffer alive until it is waited for."""

    def __init__(self, work: Any, keep: Any) -> None:
        self._work = work
        self._keep = keep

    def wait(self) -> Any:
        return self._work.wait()


class Staged:
    """A receive into a CPU staging buffer, copied to its device tensor on ``wait``."""

    def __init__(self, work: Any, staging: torch.Tensor, target: torch.Tensor) -> None:
        self._work = work
        self._staging = staging
        self._target = target

    def wait(self) -> None:
        self._work.wait()
        self._target.copy_(self._staging)
