"""The benchmark's baseline without dynamic tables: a hashed ``EmbeddingBag`` trained
data-parallel on the parameter server's data, model and optimizers."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from tessera_ml.algorithms.param_server.data import field_keys, open_source
from tessera_ml.algorithms.param_server.spec import ParamServerConfig
from tessera_ml.bench.param_server.static_hash import (
    StaticHashModel,
    StaticHashRun,
    StaticHashWorker,
    equal_memory_rows,
    hashed_rows,
    run_static_hash,
)
from tessera_ml.comm.base import Communicator
from tessera_ml.comm.local import run_local

DATASET = "generated:clicks?rows=6000&fields=4&ids=200&zipf=1.1&test=0.2"
CONFIG: dict[str, Any] = {"steps": 3, "batch_size": 64, "dim": 4, "hidden": [8]}


def test_ids_hash_to_rows_modulo_the_table_size() -> None:
    ids = torch.arange(4000).view(1000, 4)
    keys = field_keys(ids).flatten()
    rows = hashed_rows(keys, 4096)
    assert torch.equal(rows, hashed_rows(keys.clone(), 4096))
    assert int(rows.min()) >= 0 and int(rows.max()) < 4096
    # a hash, not the id itself: 4,000 ids fill about 4096 * (1 - e^(-4000/4096)) rows
    expected = 4096 * (1 - (1 - 1 / 4096) ** 4000)
    assert abs(rows.unique().numel() - expected) < 0.03 * expected
    assert not torch.equal(rows, keys % 4096)
    # colliding ids share one row; one table for every field (the field is in the key)
    model = StaticHashModel(4096, 4, ParamServerConfig.model_validate(CONFIG))
    model(field_keys(ids[:50])).sum().backward()
    assert model.table.weight.grad is not None
    touched = model.table.weight.grad.coalesce().indices()[0]
    assert torch.equal(touched, hashed_rows(field_keys(ids[:50]), 4096).flatten().unique())


def test_equal_memory_counts_parameters_and_optimizer_state() -> None:
    assert equal_memory_rows(1 << 20, 16, "adagrad") == (1 << 20) // (2 * 16 * 4)
    assert equal_memory_rows(1 << 20, 16, "sgd") == (1 << 20) // (16 * 4)
    assert equal_memory_rows(1 << 20, 16, "adam") == (1 << 20) // (3 * 16 * 4)


def _train(comm: Communicator, rows: int) -> dict[str, torch.Tensor]:
    config = ParamServerConfig.model_validate(CONFIG)
    worker = StaticHashWorker(comm, comm.world, config, DATASET, rows)
    for step in range(config.steps):
        worker.train_step(step)
    return {k: v.clone() for k, v in worker.model.state_dict().items()}


def test_workers_apply_the_average_gradient_of_both_batches() -> None:
    rows = 300
    replicas = run_local(_train, 2, rows, timeout_s=120)
    config = ParamServerConfig.model_validate(CONFIG)
    sources = [open_source(config, DATASET, r, 2, None) for r in range(2)]
    model = StaticHashModel(rows, 4, config)
    sparse = torch.optim.Adagrad([model.table.weight], lr=config.sparse_lr)
    dense = torch.optim.Adam(model.tower.parameters(), lr=config.dense_lr)
    for step in range(config.steps):
        losses = []
        for source in sources:
            keys, labels = source.train_batch(step)
            losses.append(F.binary_cross_entropy_with_logits(model(keys), labels))
        sparse.zero_grad(set_to_none=True)
        dense.zero_grad(set_to_none=True)
        torch.stack(losses).mean().backward()
        sparse.step()
        dense.step()
    for name, value in model.state_dict().items():
        torch.testing.assert_close(replicas[0][name], value, rtol=0, atol=1e-6)
        assert torch.equal(replicas[0][name], replicas[1][name])


def test_the_baseline_learns_in_a_world_wired_as_the_platform_does() -> None:
    config = CONFIG | {"steps": 60, "batch_size": 128, "dim": 8}
    workers = run_static_hash(StaticHashRun(DATASET, 2048, config), ("a", "b"), timeout_s=120)
    assert [w["steps"] for w in workers] == [60, 60]
    assert workers[0]["auc"] == workers[1]["auc"] > 0.65
    assert workers[0]["table_bytes"] == 2048 * 8 * 2 * 4
