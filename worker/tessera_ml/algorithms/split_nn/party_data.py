"""A party's local share of a vertically split dataset: ids plus its columns or its labels.

The dataset reference is resolved by ``tessera_ml.data`` on the party's worker (bundled sets,
generated data, or the party's own CSV/Parquet/NPZ file with an id column), e.g.
``sklearn:digits?columns=0:32``. A feature party keeps its columns and never its labels; the
label party keeps the labels and no columns. The per-assignment option ``keep`` (fraction of
rows, drawn with a seed from the party name) makes parties hold different, overlapping sample
sets in different orders, as real vertically split parties do.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from tessera_ml.data.resolver import resolve
from tessera_ml.data.tabular import Table, Task


@dataclass(frozen=True)
class Rows:
    """Rows of one split as this party sees them: ids, and features or labels (never both)."""

    ids: np.ndarray
    x: torch.Tensor | None
    y: torch.Tensor | None

    def take(self, positions: torch.Tensor) -> Rows:
        idx = positions.numpy()
        return Rows(
            self.ids[idx],
            None if self.x is None else self.x[positions],
            None if self.y is None else self.y[positions],
        )


@dataclass(frozen=True)
class PartyData:
    train: Rows
    test: Rows
    task: Task
    num_classes: int

    @property
    def num_features(self) -> int:
        assert self.train.x is not None
        return int(self.train.x.shape[1])

    @property
    def num_outputs(self) -> int:
        return self.num_classes if self.task == "classification" else 1


def load_party(
    ref: str, role: str, party: str, options: dict[str, Any], data_root: Path | None = None
) -> PartyData:
    """This party's share: columns for ``feature``, labels for ``label``."""
    data = resolve(ref, data_root)
    keep = float(options.get("keep", 1.0))
    if not 0.0 < keep <= 1.0:
        raise ValueError(f"split_nn: option keep must be in (0, 1], got {keep}")
    rng = np.random.default_rng(int.from_bytes(hashlib.sha256(party.encode()).digest()[:8]))

    def share(table: Table) -> Rows:
        n = len(table)
        rows = np.sort(rng.permutation(n)[: max(1, round(n * keep))])
        if keep < 1.0:
            rng.shuffle(rows)
        pos = torch.from_numpy(rows)
        ids = table.ids[pos].numpy()
        if role == "label":
            assert table.y is not None, f"{ref} has no labels"
            return Rows(ids, None, table.y[pos])
        return Rows(ids, table.x[pos], None)

    return PartyData(share(data.train), share(data.test), data.task, data.num_classes)
