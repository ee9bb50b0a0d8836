"""State files read without running code: ``torch.load`` with its restricted unpickler."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import torch

from tessera_ml.errors import CodedError


def load_state(path: Path, device: torch.device, what: str) -> Any:
    """The tensors and plain values (numbers, strings, lists, tuples, dicts) saved at ``path``.
    A file that holds any other object is refused with the code ``unsafe_checkpoint``, naming
    the object, rather than unpickled."""
    try:
        return torch.load(path, map_location=device, weights_only=True)
    except pickle.UnpicklingError as exc:
        raise CodedError(
            "unsafe_checkpoint",
            f"{what} holds objects other than tensors and plain values, and is read without "
            f"running code ({_refused(exc)})",
        ) from exc


def _refused(exc: pickle.UnpicklingError) -> str:
    """What torch's restricted unpickler refused, from its long message."""
    for line in str(exc).splitlines():
        if "WeightsUnpickler error:" in line:
            return line.split("WeightsUnpickler error:", 1)[1].split(" was not ")[0].strip()
    return "refused by torch.load(weights_only=True)"
