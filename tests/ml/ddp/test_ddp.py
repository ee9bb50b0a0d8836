"""``ddp`` on real gloo worlds: equal to one process on the union of the batches, resumable."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

from tessera_ml.algorithms.ddp.spec import SPEC, DDPConfig
from tessera_ml.algorithms.ddp.train import batch_indices, run
from tessera_ml.comm.base import Communicator
from tessera_ml.comm.local import run_local
from tessera_ml.data import resolve, shard_rows
from tessera_ml.models import build_model
from tessera_ml.report import MemoryReporter
from tessera_ml.spec import PlanError
from tessera_ml.worlds import rank_context, run_algorithm

pytestmark = pytest.mark.usefixtures("one_thread")

CONFIG: dict[str, Any] = {
    "model": {"kind": "mlp", "hidden": [16]},
    "dataset": "sklearn:wine",
    "steps": 12,
    "batch_size": 8,
    "lr": 0.1,
    "seed": 3,
    "eval_interval": 6,
    "checkpoint_interval": 6,
    "log_interval": 3,
}
TWO_PARTIES = [
    {"party": "alice", "role": "trainer", "processes": 1},
    {"party": "bob", "role": "trainer", "processes": 1},
]


def _single_process_reference(steps: int) -> dict[str, torch.Tensor]:
    """The same training on one process: each step sees the union of both ranks' batches."""
    cfg = DDPConfig.model_validate(CONFIG)
    data = resolve(cfg.dataset)
    shards = [shard_rows(data.train, r, 2) for r in range(2)]
    torch.manual_seed(cfg.seed)
    model = build_model(cfg.model, dataset=data)
    opt = torch.optim.SGD(model.parameters(), lr=cfg.lr, momentum=cfg.momentum)
    for step in range(1, steps + 1):
        grads = []
        for r, shard in enumerate(shards):
            rows = batch_indices(len(shard), cfg.batch_size, cfg.seed, r, step)
            assert shard.y is not None
            opt.zero_grad()
            nn.functional.cross_entropy(model(shard.x[rows]), shard.y[rows]).backward()
            grads.append([p.grad.clone() for p in model.parameters()])  # type: ignore[union-attr]
        for p, *per_rank in zip(model.parameters(), *grads, strict=True):
            p.grad = torch.stack(per_rank).mean(0)
        opt.step()
    return model.state_dict()


def _weights(checkpoint: Path) -> dict[str, torch.Tensor]:
    state = torch.load(checkpoint, weights_only=True)
    weights: dict[str, torch.Tensor] = state["model"]
    return weights


def test_two_parties_train_like_one_process_and_resume_exactly(tmp_path: Path) -> None:
    outcomes = run_algorithm("ddp", TWO_PARTIES, CONFIG, checkpoint_dir=str(tmp_path / "a"))
    final = _weights(tmp_path / "a" / "step-000000012" / "rank-0.pt")
    for name, expected in _single_process_reference(12).items():
        torch.testing.assert_close(final[name], expected, rtol=1e-4, atol=1e-5)
    other = _weights(tmp_path / "a" / "step-000000012" / "rank-1.pt")
    assert all(torch.equal(final[k], other[k]) for k in final)
    first = outcomes[0]
    assert [s for s, _ in first.series("accuracy")] == [6, 12]
    assert first.result["accuracy"] == first.series("accuracy")[-1][1] > 0.8
    per_step = 2 * 1 * sum(v.numel() for v in final.values()) * 4 // 2
    sent = first.series("bytes_sent.group.world")
    assert sent[1][1] - sent[0][1] == 3 * per_step  # one flat all-reduce per step
    assert len(first.checkpoints) == 2
    progress = [m for level, m in first.lines if m.startswith("step ")]
    assert [m.split(":")[0] for m in progress] == ["step 6/12", "step 12/12"]
    assert f"accuracy {first.series('accuracy')[-1][1]:.4f}" in progress[-1]

    resumed = run_algorithm(
        "ddp",
        TWO_PARTIES,
        CONFIG,
        checkpoint_dir=str(tmp_path / "b"),
        resume_from=str(tmp_path / "a" / "step-000000006"),
        in_process=True,
    )
    again = _weights(tmp_path / "b" / "step-000000012" / "rank-0.pt")
    assert all(torch.equal(final[k], again[k]) for k in final)
    assert resumed[0].lines[0] == ("info", "resumed from step 6")

    # each party naming its own half of the rows trains on exactly the same shards
    own_data = [{**a, "dataset": f"sklearn:wine?shard={i}/2"} for i, a in enumerate(TWO_PARTIES)]
    run_algorithm("ddp", own_data, CONFIG, checkpoint_dir=str(tmp_path / "c"), in_process=True)
    parties = _weights(tmp_path / "c" / "step-000000012" / "rank-0.pt")
    assert all(torch.equal(final[k], parties[k]) for k in final)


class _StopAfter:
    """A stop signal that trips after a number of checks (as a heartbeat reply would)."""

    def __init__(self, checks: int) -> None:
        self._left = checks
        self._lock = threading.Lock()

    def is_set(self) -> bool:
        with self._lock:
            self._left -= 1
            return self._left < 0


def _rank(comm: Communicator, checkpoint_dir: Path) -> tuple[dict[str, Any], MemoryReporter]:
    reporter = MemoryReporter()
    ctx = rank_context(
        comm,
        "ddp",
        TWO_PARTIES,
        {**CONFIG, "steps": 100, "checkpoint_interval": 50},
        reporter=reporter,
        stop=_StopAfter(4),
        checkpoint_dir=checkpoint_dir,
    )
    return run(ctx), reporter


def test_stop_signal_ends_training_with_a_checkpoint(tmp_path: Path) -> None:
    results = run_local(_rank, 2, tmp_path)
    for summary, reporter in results:
        assert summary["stopped"] and summary["step"] == 4
        assert [c[0] for c in reporter.checkpoints] == [4]
    assert (tmp_path / "step-000000004" / "rank-1.pt").exists()


def test_plan_needs_a_trainer_and_config_checks_the_dataset() -> None:
    cfg = SPEC.parse_config({})
    with pytest.raises(PlanError) as info:
        SPEC.make_plan([], cfg)
    assert info.value.code == "role_cardinality"
    with pytest.raises(ValueError, match="sklearn:mnist"):
        SPEC.parse_config({"dataset": "sklearn:mnist"})
    schema = SPEC.describe()["config_schema"]
    assert "model" in schema["properties"]
