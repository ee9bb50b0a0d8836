"""Generated click logs whose ground truth is known, so the best achievable AUC is known.

Two forms, with the same names for the same parameters (``fields``, ``ids_per_field``, ``zipf``,
``dim``, ``seed``, ``bias``):

- ``make_clicks(ClickParams)`` (the dataset ``generated:clicks``): a table of ``rows`` samples
  with dense ids ``0 .. ids_per_field - 1`` per field, for models with one embedding row per id;
- ``ClickLog``: an endless log, sample ``i`` a pure function of ``(i, seed)`` read without any
  file, its ids hashed to scattered int64 values so the id space is sparse and new ids keep
  appearing as the log is read (the parameter server's dynamic tables train on it).

The table:

Each row has one categorical id per field, drawn from a Zipf law over ``ids_per_field`` ids
(popular ids scattered by a fixed permutation). The click is drawn from a factorisation-machine
model: ``logit = bias + sum_f w[f, id_f] + sum_{f<g} <e[f, id_f], e[g, id_g]>``. The oracle
scores the test rows with the true probabilities: ``meta["oracle_auc"]`` is the AUC no model can
beat in expectation, ``meta["oracle_logloss"]`` the matching log loss.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import numpy as np
import torch

from tessera_ml.data.tabular import Dataset, Table, split_by_id
from tessera_ml.hashing import salted, uniform, uniform64
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


@cache
def _zipf_cdf(ids_per_field: int, a: float) -> torch.Tensor:
    weights = torch.arange(1, ids_per_field + 1, dtype=torch.float64) ** -a
    cdf = torch.cumsum(weights, 0)
    return cdf / cdf[-1]


TEST_OFFSET = 1 << 40
EXACT_ZIPF_IDS = 1 << 22
_FIELD_SHIFT = 40


@dataclass(frozen=True)
class ClickLog:
    """The endless form: sample ``i`` a pure function of ``(i, seed)``, ids sparse int64."""

    fields: int = 3
    ids_per_field: int = 100_000
    zipf: float = 1.1
    seed: int = 0
    effect_scale: float = 0.7
    """Standard deviation of each id's additive effect on the click logit."""
    interaction_scale: float = 1.0
    """Weight of the dot product between the latent vectors of fields 0 and 1."""
    dim: int = 4
    bias: float = -1.0

    def ranks(self, index: torch.Tensor) -> torch.Tensor:
        """Popularity rank (1 = most frequent) of each field of each sample: [n, fields].

        Exact Zipf (inverse of the cumulative distribution) up to ``EXACT_ZIPF_IDS`` ranks; above,
        a power law continuous on [0.5, ids_per_field + 0.5) rounded to the nearest rank.
        """
        fields = torch.arange(self.fields, dtype=torch.int64)
        keys = index.unsqueeze(1) * self.fields + fields
        u = uniform64(salted(keys, self.seed))
        if self.ids_per_field <= EXACT_ZIPF_IDS:
            cdf = _zipf_cdf(self.ids_per_field, self.zipf)
            return torch.searchsorted(cdf, u, right=True).clamp_(max=self.ids_per_field - 1) + 1
        power = 1.0 - self.zipf
        low, top = 0.5**power, (self.ids_per_field + 0.5) ** power
        x = (low + u * (top - low)) ** (1.0 / power)
        return x.round().to(torch.int64).clamp_(1, self.ids_per_field)

    def ids_of_ranks(self, ranks: torch.Tensor) -> torch.Tensor:
        fields = torch.arange(self.fields, dtype=torch.int64)
        return salted(ranks + (fields << _FIELD_SHIFT), self.seed + 1)

    def ids(self, index: torch.Tensor) -> torch.Tensor:
        """Feature ids of samples: [n, fields] int64."""
        return self.ids_of_ranks(self.ranks(index))

    def _normal(self, ids: torch.Tensor, salt: int) -> torch.Tensor:
        u1 = uniform(salted(ids, self.seed * 7919 + salt)).clamp_min(1e-7)
        u2 = uniform(salted(ids, self.seed * 7919 + salt + 1))
        return torch.sqrt(-2.0 * torch.log(u1)) * torch.cos(2.0 * torch.pi * u2)

    def _latent(self, ids: torch.Tensor) -> torch.Tensor:
        cols = [self._normal(ids, 100 + 2 * k) for k in range(self.dim)]
        return torch.stack(cols, dim=-1) / self.dim**0.5

    def logits(self, ids: torch.Tensor) -> torch.Tensor:
        """The generating model's click logit of each sample."""
        effects = self._normal(ids, 10).sum(dim=1) * self.effect_scale
        logit = self.bias + effects
        if self.fields >= 2 and self.interaction_scale:
            dot = (self._latent(ids[:, 0]) * self._latent(ids[:, 1])).sum(dim=1)
            logit = logit + self.interaction_scale * dot
        return logit

    def samples(self, index: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Ids [n, fields] and 0/1 click labels [n] of the given sample indices."""
        ids = self.ids(index)
        p = torch.sigmoid(self.logits(ids))
        u = uniform(salted(index, self.seed + 12345))
        return ids, (u < p).to(torch.float32)

    def train_indices(self, start: int, count: int) -> torch.Tensor:
        return torch.arange(start, start + count, dtype=torch.int64)

    def test_indices(self, count: int) -> torch.Tensor:
        return torch.arange(TEST_OFFSET, TEST_OFFSET + count, dtype=torch.int64)
