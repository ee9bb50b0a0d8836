"""Where a worker's samples come from: the endless generated log, or a party's dataset.

Both give batches of int64 keys ``[batch, fields]`` and 0/1 labels. Keys carry their field in
the high bits, so equal ids of different fields are different rows of the embedding tables.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import torch

from tessera_ml.algorithms.param_server.spec import ParamServerConfig
from tessera_ml.data.clicks import ClickLog

FIELD_SHIFT = 40


class Source(Protocol):
    @property
    def num_fields(self) -> int: ...

    def train_batch(self, step: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Keys [batch, fields] and labels [batch] of this worker's batch at ``step``."""

    def test_set(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """This worker's share of the held-out samples: keys, labels, true scores if known."""


@dataclass
class StreamSource:
    """The generated log: sample ``i`` of step ``t`` on worker ``r`` of ``n`` is global sample
    ``(t * n + r) * batch + i``, so the workers together read the log in order."""

    log: ClickLog
    batch: int
    worker: int
    workers: int
    train_samples: int
    eval_samples: int

    @property
    def num_fields(self) -> int:
        return self.log.fields

    def train_batch(self, step: int) -> tuple[torch.Tensor, torch.Tensor]:
        start = (step * self.workers + self.worker) * self.batch
        index = torch.arange(start, start + self.batch, dtype=torch.int64)
        if self.train_samples:
            index = index % self.train_samples
        return self.log.samples(index)

    def test_set(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        per = self.eval_samples // self.workers
        index = self.log.test_indices(per * self.workers)[self.worker * per :][:per]
        keys, labels = self.log.samples(index)
        return keys, labels, self.log.logits(keys)


@dataclass
class TableSource:
    """A resolved dataset: integer id columns and a 0/1 label. Worker ``r`` of ``n`` trains on
    training rows ``r, r + n, …`` and evaluates the test rows ``r, r + n, …``, cycling in order."""

    train_keys: torch.Tensor
    train_labels: torch.Tensor
    test_keys: torch.Tensor
    test_labels: torch.Tensor
    test_truth: torch.Tensor | None
    batch: int

    @property
    def num_fields(self) -> int:
        return int(self.train_keys.shape[1])

    def train_batch(self, step: int) -> tuple[torch.Tensor, torch.Tensor]:
        count = self.train_keys.shape[0]
        index = (step * self.batch + torch.arange(self.batch)) % count
        return self.train_keys[index], self.train_labels[index]

    def test_set(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        return self.test_keys, self.test_labels, self.test_truth


def field_keys(x: torch.Tensor) -> torch.Tensor:
    """Integer ids [rows, fields] to table keys with the field in the high bits."""
    ids = x.to(torch.int64)
    if bool((ids < 0).any()) or bool((ids >= 1 << FIELD_SHIFT).any()):
        raise ValueError(f"ids must lie in [0, 2**{FIELD_SHIFT}) to be keyed by field")
    fields = torch.arange(ids.shape[1], dtype=torch.int64) << FIELD_SHIFT
    return ids + fields


def open_source(
    config: ParamServerConfig,
    dataset: str | None,
    worker: int,
    workers: int,
    data_root: Path | None,
) -> Source:
    if dataset is None:
        log = ClickLog(
            fields=config.data.num_fields,
            ids_per_field=config.data.vocab,
            zipf=config.data.zipf_a,
            seed=config.seed,
        )
        return StreamSource(
            log, config.batch_size, worker, workers, config.data.train_samples, config.eval_samples
        )
    from tessera_ml.data import resolve

    data = resolve(dataset, data_root)
    if data.task != "binary" or data.train.y is None or data.test.y is None:
        raise ValueError(f"{dataset} must have 0/1 labels (task binary, got {data.task})")
    truth = data.meta.get("test_probability")
    mine = slice(worker, None, workers)
    per = len(data.test) // workers
    return TableSource(
        train_keys=field_keys(data.train.x)[mine],
        train_labels=data.train.y[mine].to(torch.float32),
        test_keys=field_keys(data.test.x)[mine][:per],
        test_labels=data.test.y[mine][:per].to(torch.float32),
        test_truth=None if truth is None else truth[mine][:per].to(torch.float32),
        batch=config.batch_size,
    )
