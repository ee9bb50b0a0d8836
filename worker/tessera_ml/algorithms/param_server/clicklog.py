"""A generated click log with Zipf-distributed ids and a known generating model.

Sample ``i`` is a pure function of ``(i, seed)``: every worker can read its own rows without any
file, and the true click probability of every sample is known, so the best achievable AUC on a
test set is known too. Ids are drawn per field from a truncated power law over ``vocab`` ranks
and hashed to scattered int64 ids, so the id space is sparse and new ids keep appearing as the
log is read.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import torch

from tessera_ml.algorithms.param_server.hashing import salted, uniform, uniform64


@cache
def _zipf_cdf(vocab: int, a: float) -> torch.Tensor:
    weights = torch.arange(1, vocab + 1, dtype=torch.float64) ** -a
    cdf = torch.cumsum(weights, 0)
    return cdf / cdf[-1]


TEST_OFFSET = 1 << 40
EXACT_VOCAB = 1 << 22
_FIELD_SHIFT = 40


@dataclass(frozen=True)
class ClickLog:
    num_fields: int = 3
    vocab: int = 100_000
    zipf_a: float = 1.1
    seed: int = 0
    effect_scale: float = 0.7
    """Standard deviation of each id's additive effect on the click logit."""
    interaction_scale: float = 1.0
    """Weight of the dot product between the latent vectors of fields 0 and 1."""
    latent_dim: int = 4
    bias: float = -1.0

    def ranks(self, index: torch.Tensor) -> torch.Tensor:
        """Popularity rank (1 = most frequent) of each field of each sample: [n, fields].

        Exact Zipf (inverse of the cumulative distribution) up to ``EXACT_VOCAB`` ranks; above,
        a power law continuous on [0.5, vocab + 0.5) rounded to the nearest rank.
        """
        fields = torch.arange(self.num_fields, dtype=torch.int64)
        keys = index.unsqueeze(1) * self.num_fields + fields
        u = uniform64(salted(keys, self.seed))
        if self.vocab <= EXACT_VOCAB:
            cdf = _zipf_cdf(self.vocab, self.zipf_a)
            return torch.searchsorted(cdf, u, right=True).clamp_(max=self.vocab - 1) + 1
        power = 1.0 - self.zipf_a
        low, top = 0.5**power, (self.vocab + 0.5) ** power
        x = (low + u * (top - low)) ** (1.0 / power)
        return x.round().to(torch.int64).clamp_(1, self.vocab)

    def ids_of_ranks(self, ranks: torch.Tensor) -> torch.Tensor:
        fields = torch.arange(self.num_fields, dtype=torch.int64)
        return salted(ranks + (fields << _FIELD_SHIFT), self.seed + 1)

    def ids(self, index: torch.Tensor) -> torch.Tensor:
        """Feature ids of samples: [n, fields] int64."""
        return self.ids_of_ranks(self.ranks(index))

    def _normal(self, ids: torch.Tensor, salt: int) -> torch.Tensor:
        u1 = uniform(salted(ids, self.seed * 7919 + salt)).clamp_min(1e-7)
        u2 = uniform(salted(ids, self.seed * 7919 + salt + 1))
        return torch.sqrt(-2.0 * torch.log(u1)) * torch.cos(2.0 * torch.pi * u2)

    def _latent(self, ids: torch.Tensor) -> torch.Tensor:
        cols = [self._normal(ids, 100 + 2 * k) for k in range(self.latent_dim)]
        return torch.stack(cols, dim=-1) / self.latent_dim**0.5

    def logits(self, ids: torch.Tensor) -> torch.Tensor:
        """The generating model's click logit of each sample."""
        effects = self._normal(ids, 10).sum(dim=1) * self.effect_scale
        logit = self.bias + effects
        if self.num_fields >= 2 and self.interaction_scale:
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
