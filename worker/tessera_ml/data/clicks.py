"""A generated click log whose ground truth is known, so the best achievable AUC is known.

Each row has one categorical id per field, drawn from a Zipf law over ``ids_per_field`` ids
(popular ids scattered by a fixed permutation). The click is drawn from a factorisation-machine
model: ``logit = bias + sum_f w[f, id_f] + sum_{f<g} <e[f, id_f], e[g, id_g]>``. The oracle
scores the test rows with the true probabilities: ``meta["oracle_auc"]`` is the AUC no model can
beat in expectation, ``meta["oracle_logloss"]`` the matching log loss.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from tessera_ml.data.tabular import Dataset, Table, split_by_id
from tessera_ml.metrics import auc, binary_log_loss


@dataclass(frozen=True)
class ClickParams:
    rows: int = 100_000
    fields: int = 8
    ids_per_field: int = 1000
    zipf: float = 1.1
    dim: int = 4
    seed: int = 0
    bias: float = -1.5
    weight_scale: float = 0.5
    embedding_scale: float = 0.5

    def check(self) -> None:
        if self.rows < 10 or self.fields < 1 or self.ids_per_field < 2 or self.dim < 1:
            raise ValueError("clicks need rows >= 10, fields >= 1, ids_per_field >= 2 and dim >= 1")
        if self.zipf < 0:
            raise ValueError(f"zipf exponent must be >= 0, got {self.zipf}")


def zipf_probabilities(n: int, exponent: float) -> np.ndarray:
    weights = np.arange(1, n + 1, dtype=np.float64) ** -exponent
    return weights / weights.sum()


def click_ids(params: ClickParams) -> np.ndarray:
    """The ``[rows, fields]`` id matrix alone (also what the label model is evaluated on)."""
    rng = np.random.default_rng([params.seed, 1])
    p = zipf_probabilities(params.ids_per_field, params.zipf)
    columns = []
    for _ in range(params.fields):
        popularity = rng.choice(params.ids_per_field, size=params.rows, p=p)
        scatter = rng.permutation(params.ids_per_field)
        columns.append(scatter[popularity])
    return np.stack(columns, axis=1).astype(np.int64)


def click_logits(params: ClickParams, ids: np.ndarray) -> np.ndarray:
    """The ground-truth logit of every row."""
    rng = np.random.default_rng([params.seed, 2])
    shape = (params.fields, params.ids_per_field)
    weights = rng.normal(0.0, params.weight_scale, size=shape)
    embeddings = rng.normal(
        0.0, params.embedding_scale / params.dim**0.25, size=(*shape, params.dim)
    )
    field_index = np.arange(params.fields)[None, :]
    linear = weights[field_index, ids].sum(axis=1)
    vectors = embeddings[field_index, ids]
    pairwise = 0.5 * ((vectors.sum(axis=1) ** 2).sum(-1) - (vectors**2).sum(axis=(1, 2)))
    return np.asarray(params.bias + linear + pairwise)


def make_clicks(
    params: ClickParams | None = None, *, test_fraction: float = 0.2, split_seed: int = 0
) -> Dataset:
    params = params or ClickParams()
    params.check()
    ids = click_ids(params)
    probability = 1.0 / (1.0 + np.exp(-click_logits(params, ids)))
    labels = (np.random.default_rng([params.seed, 3]).random(params.rows) < probability).astype(
        np.float32
    )
    full = Table(
        torch.from_numpy(ids),
        torch.from_numpy(labels),
        torch.arange(params.rows, dtype=torch.int64),
    )
    train_idx, test_idx = split_by_id(full.ids, test_fraction, split_seed)
    train, test = full.rows(train_idx), full.rows(test_idx)
    truth = torch.from_numpy(probability)[test_idx]
    assert test.y is not None
    return Dataset(
        name="generated:clicks",
        train=train,
        test=test,
        task="binary",
        columns=tuple(f"field{f}" for f in range(params.fields)),
        num_classes=2,
        meta={
            "categorical": True,
            "ids_per_field": params.ids_per_field,
            "params": params,
            "ctr": float(labels.mean()),
            "oracle_auc": auc(truth, test.y),
            "oracle_logloss": binary_log_loss(truth, test.y),
            "test_probability": truth.float(),
        },
    )
