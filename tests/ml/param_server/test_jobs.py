"""Whole jobs on a real world wired as the platform wires it: two servers on alice, a worker on
bob and one on carol (each party on its own gloo world, TLS between parties)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from tessera_ml.algorithms.param_server.clicklog import ClickLog
from tessera_ml.algorithms.param_server.hashing import shard_of
from tessera_ml.comm.base import Communicator
from tessera_ml.worlds import entry_point, rank_context, run_world
from tests.ml.worlds import world_parties

ASSIGNMENTS: list[dict[str, Any]] = [
    {"party": "alice", "role": "server", "processes": 2},
    {"party": "bob", "role": "worker"},
    {"party": "carol", "role": "worker"},
]
BASE: dict[str, Any] = {
    "seed": 3,
    "steps": 4,
    "batch_size": 64,
    "dim": 4,
    "hidden": [8],
    "data": {"vocab": 400},
    "eval_samples": 400,
}
SERVERS, WORKERS = (0, 1), (2, 3)


def _final(folder: Path, steps: int, rank: int) -> dict[str, Any]:
    state: dict[str, Any] = torch.load(
        folder / f"step-{steps:09d}" / f"rank-{rank}.pt", weights_only=False
    )
    return state


def _by_id(state: dict[str, Any]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    order = torch.argsort(state["ids"])
    return state["ids"][order], state["params"][order], state["state"][order]


def _series(points: list[tuple[int, str, float]], name: str) -> list[float]:
    return [v for _, n, v in points if n == name]


def _seen_ids(config: dict[str, Any], steps: int) -> torch.Tensor:
    log = ClickLog(vocab=config["data"]["vocab"], seed=config["seed"])
    count = steps * len(WORKERS) * config["batch_size"]
    return log.ids(torch.arange(count)).unique()


class _StopAfter:
    """A stop signal that the platform raises after the rank has asked ``calls`` times."""

    def __init__(self, calls: int) -> None:
        self.calls = calls

    def is_set(self) -> bool:
        self.calls -= 1
        return self.calls < 0


def _planned(config: dict[str, Any]) -> tuple[str, list[dict[str, Any]], dict[str, Any]]:
    """The algorithm, assignments and config of a job of ``_jobs``: ``dataset`` goes to the
    workers, ``stop_after`` to the stop signal."""
    dataset = config.get("dataset")
    assignments = [{**a, "dataset": dataset} if a["role"] == "worker" else a for a in ASSIGNMENTS]
    rest = {k: v for k, v in config.items() if k not in ("dataset", "stop_after")}
    return "param_server", assignments, rest


def _jobs(comm: Communicator, jobs: list[tuple[dict[str, Any], str | None, str | None]]) -> Any:
    """Run param_server jobs one after the other in this world.

    Each job is planned and started exactly as ``tessera_ml.worlds.run_algorithm`` does it.
    """
    from tessera_ml.report import MemoryReporter

    entry = entry_point("param_server")
    outcomes = []
    for config, checkpoint_dir, resume_from in jobs:
        stop_after = config.get("stop_after")
        comm.stats.reset()
        reporter = MemoryReporter()
        ctx = rank_context(
            comm,
            *_planned(config),
            reporter=reporter,
            stop=_StopAfter(stop_after if stop_after is not None else 1 << 62),
            checkpoint_dir=checkpoint_dir,
            resume_from=resume_from,
        )
        result = entry(ctx)
        outcomes.append((result, [(p.step, p.name, p.value) for p in reporter.points]))
    return outcomes


def test_sync_job_then_resume_dedup_async_and_eviction(tmp_path: Path) -> None:
    """One world (starting worlds is what costs) running five jobs one after the other."""
    config = {**BASE, "checkpoint_every": 2}
    jobs: list[tuple[dict[str, Any], str | None, str | None]] = [
        (config, str(tmp_path / "a"), None),
        (config, str(tmp_path / "b"), str(tmp_path / "a" / "step-000000002")),
        ({**BASE, "dedup": False}, str(tmp_path / "c"), None),
        ({**BASE, "mode": "async", "staleness": 2}, str(tmp_path / "d"), None),
        ({**BASE, "eviction": "lfu", "max_rows": 150, "evict_every": 2}, None, None),
        ({**BASE, "dataset": "generated:clicks?rows=3000&fields=3&ids=200"}, None, None),
        ({**BASE, "admission_count": 3}, str(tmp_path / "e"), None),
        ({**BASE, "eviction": "ttl", "ttl_steps": 1, "evict_every": 3}, None, None),
        ({**BASE, "stop_after": 2}, str(tmp_path / "f"), None),
    ]
    # servers on alice, workers on bob and carol: the mesh, as on the platform
    parties = world_parties(_planned(config) for config, _, _ in jobs)
    assert parties == ["alice", "alice", "bob", "carol"]
    outcomes = run_world(_jobs, 4, jobs, parties=parties)
    full, resumed, undeduped, stale, evicting, from_dataset, admitting, expiring, stopped = zip(
        *outcomes, strict=True
    )

    # rows exist for exactly the ids the workers trained on, each on the server its hash names
    exported = [_final(tmp_path / "a", 4, s) for s in SERVERS]
    for s, state in zip(SERVERS, exported, strict=True):
        result, points = full[s]
        assert result["exported_rows"] == result["live_rows"]
        assert state["ids"].shape == (result["live_rows"],)
        assert state["params"].shape == (result["live_rows"], 4)
        assert bool((shard_of(state["ids"], 2) == s).all())
        assert sum(_series(points, "rows_created")) == result["live_rows"]
        assert len(_series(points, "table_rows")) >= 4
    union = torch.cat([state["ids"] for state in exported]).sort().values
    assert torch.equal(union, _seen_ids(config, 4))
    lead, lead_points = full[WORKERS[0]]
    assert len(_series(lead_points, "loss")) == 4 and _series(lead_points, "auc")
    assert 0.0 <= lead["auc"] <= 1.0
    assert _series(lead_points, "bytes_sent")[-1] > 0

    # resuming from step 2 ends with exactly the tables and dense model of the uninterrupted job
    for s in SERVERS:
        assert resumed[s][0]["start_step"] == 2
        for a, b in zip(_by_id(exported[s]), _by_id(_final(tmp_path / "b", 4, s)), strict=True):
            assert torch.equal(a, b)
    for w in WORKERS:
        before, after = _final(tmp_path / "a", 4, w)["model"], _final(tmp_path / "b", 4, w)["model"]
        assert all(torch.equal(before[k], after[k]) for k in before)

    # without deduplication the same training sends far more bytes
    dedup_bytes = sum(full[r][0]["bytes_sent"] for r in range(4))
    plain_bytes = sum(undeduped[r][0]["bytes_sent"] for r in range(4))
    assert plain_bytes > 1.3 * dedup_bytes
    for s in SERVERS:
        a, b = _by_id(exported[s]), _by_id(_final(tmp_path / "c", 4, s))
        assert torch.equal(a[0], b[0])
        assert torch.allclose(a[1], b[1], atol=1e-6)

    # async: same rows, training diverges only through staleness
    for s in SERVERS:
        ids, params, _ = _by_id(_final(tmp_path / "d", 4, s))
        assert torch.equal(ids, _by_id(exported[s])[0])
        assert not torch.equal(params, _by_id(exported[s])[1])
    assert stale[WORKERS[0]][0]["steps"] == 4

    # lfu eviction keeps each shard at its bound after each pass
    for s in SERVERS:
        result, points = evicting[s]
        assert result["evicted_rows"] > 0
        sizes = {step: v for step, name, v in points if name == "table_rows"}
        assert sizes[1] <= 150 and sizes[3] <= 150

    # workers reading a party dataset: rows per (field, id) seen, AUC beside the generator's
    lead = from_dataset[WORKERS[0]][0]
    assert 0.5 < lead["ground_truth_auc"] <= 1.0 and 0.0 <= lead["auc"] <= 1.0
    rows = sum(from_dataset[s][0]["live_rows"] for s in SERVERS)
    assert 0 < rows <= 3 * 200

    # admission: a row only for ids seen in at least 3 worker batches
    log = ClickLog(vocab=BASE["data"]["vocab"], seed=BASE["seed"])
    size = BASE["batch_size"]
    batches = [log.ids(torch.arange(b * size, (b + 1) * size)).unique() for b in range(8)]
    ids, counts = torch.cat(batches).unique(return_counts=True)
    admitted = torch.cat([_final(tmp_path / "e", 4, s)["ids"] for s in SERVERS]).sort().values
    assert torch.equal(admitted, ids[counts >= 3])
    assert sum(admitting[s][0]["live_rows"] for s in SERVERS) == admitted.numel()

    # ttl: rows idle for more than one step are dropped at step 3
    for s in SERVERS:
        result, points = expiring[s]
        assert result["evicted_rows"] > 0
        assert result["live_rows"] < full[s][0]["live_rows"]

    # a stop from the platform ends every rank after the same step, with a final export
    assert [stopped[r][0]["steps"] for r in range(4)] == [3, 3, 3, 3]
    for s in SERVERS:
        assert _final(tmp_path / "f", 3, s)["ids"].numel() == stopped[s][0]["live_rows"]
