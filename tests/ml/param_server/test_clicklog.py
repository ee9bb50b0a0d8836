"""The generated click log and the torch AUC."""

from __future__ import annotations

import torch
from sklearn.metrics import roc_auc_score

from tessera_ml.algorithms.param_server.metrics import auc
from tessera_ml.data.clicks import ClickLog


def test_samples_are_a_function_of_index_and_seed() -> None:
    log = ClickLog(ids_per_field=1000, seed=4)
    ids, labels = log.samples(torch.arange(100, 200))
    again_ids, again_labels = log.samples(torch.arange(150, 200))
    assert torch.equal(ids[50:], again_ids) and torch.equal(labels[50:], again_labels)
    other, _ = ClickLog(ids_per_field=1000, seed=5).samples(torch.arange(100, 200))
    assert not torch.equal(ids, other)


def test_ids_follow_a_zipf_law_and_fields_do_not_share_ids() -> None:
    log = ClickLog(fields=2, ids_per_field=10_000, zipf=1.1)
    ranks = log.ranks(torch.arange(200_000))
    share_of_top = float((ranks == 1).double().mean())
    expected = 1.0 / sum(k**-1.1 for k in range(1, 10_001))
    assert abs(share_of_top - expected) < 0.1 * expected
    ids = log.ids(torch.arange(5000))
    assert not set(ids[:, 0].tolist()) & set(ids[:, 1].tolist())


def test_the_generating_model_separates_clicks() -> None:
    log = ClickLog(ids_per_field=5000)
    ids, labels = log.samples(log.test_indices(20_000))
    truth = log.logits(ids)
    assert 0.1 < float(labels.mean()) < 0.6
    assert auc(truth, labels) > 0.7


def test_auc_matches_scikit_learn_with_ties() -> None:
    gen = torch.Generator().manual_seed(0)
    labels = (torch.rand(2000, generator=gen) < 0.3).float()
    tied = torch.randint(0, 15, (2000,), generator=gen).float() + labels
    for scores in (tied, torch.randn(2000, generator=gen)):
        assert abs(auc(scores, labels) - roc_auc_score(labels.numpy(), scores.numpy())) < 1e-12
    assert auc(torch.ones(3), torch.ones(3)) != auc(torch.ones(3), torch.ones(3))  # NaN
