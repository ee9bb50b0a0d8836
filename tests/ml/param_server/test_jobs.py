"""Whole jobs on a real world wired as the platform wires it: two servers on alice, a worker on
bob and one on carol (each party on its own gloo world, TLS between parties)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
import torch.nn.functional as F

from tessera_ml.algorithms.param_server.data import open_source
from tessera_ml.algorithms.param_server.hashing import init_rows, shard_of
from tessera_ml.algorithms.param_server.metrics import auc
from tessera_ml.algorithms.param_server.model import dense_tower, forward
from tessera_ml.algorithms.param_server.spec import ParamServerConfig
from tessera_ml.comm.base import Communicator
from tessera_ml.data.clicks import ClickLog
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
# the full job: evaluating after two steps sends a LOOKUP while step 3's pull is on its way
FULL: dict[str, Any] = {**BASE, "checkpoint_every": 2, "eval_every": 2}
# evaluating after two steps sends a LOOKUP while the next two steps' pulls are in flight
STALE: dict[str, Any] = {**BASE, "mode": "async", "staleness": 2, "eval_every": 2}


def _final(folder: Path, steps: int, rank: int) -> dict[str, Any]:
    state: dict[str, Any] = torch.load(
        folder / f"step-{steps:09d}" / f"rank-{rank}.pt", weights_only=True
    )
    return state


def _by_id(state: dict[str, Any]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    order = torch.argsort(state["ids"])
    return state["ids"][order], state["params"][order], state["state"][order]


def _series(points: list[tuple[int, str, float]], name: str) -> list[float]:
    return [v for _, n, v in points if n == name]


def _seen_ids(config: dict[str, Any], steps: int) -> torch.Tensor:
    log = ClickLog(ids_per_field=config["data"]["vocab"], seed=config["seed"])
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


NAMES = (
    "full",
    "resumed",
    "undeduped",
    "stale",
    "evicting",
    "from_dataset",
    "admitting",
    "expiring",
    "stopped",
)
Outcomes = dict[str, list[tuple[dict[str, Any], list[tuple[int, str, float]]]]]


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Outcomes]:
    """One world (starting worlds is what costs) running nine jobs one after the other; each
    test below reads the behaviour of one of them."""
    root = tmp_path_factory.mktemp("param_server")
    jobs: list[tuple[dict[str, Any], str | None, str | None]] = [
        (FULL, str(root / "a"), None),
        (FULL, str(root / "b"), str(root / "a" / "step-000000002")),
        ({**FULL, "dedup": False}, str(root / "c"), None),
        (STALE, str(root / "d"), None),
        ({**BASE, "eviction": "lfu", "max_rows": 150, "evict_every": 2}, None, None),
        ({**BASE, "dataset": "generated:clicks?rows=3000&fields=3&ids=200"}, None, None),
        ({**BASE, "admission_count": 3}, str(root / "e"), None),
        ({**BASE, "eviction": "ttl", "ttl_steps": 1, "evict_every": 3}, None, None),
        ({**BASE, "steps": 8, "stop_after": 2}, str(root / "f"), None),
    ]
    # servers on alice, workers on bob and carol: the mesh, as on the platform
    parties = world_parties(_planned(config) for config, _, _ in jobs)
    assert parties == ["alice", "alice", "bob", "carol"]
    per_rank = run_world(_jobs, 4, jobs, parties=parties)
    by_job = list(zip(*per_rank, strict=True))
    return root, {name: list(ranks) for name, ranks in zip(NAMES, by_job, strict=True)}


def test_rows_exist_for_exactly_the_ids_trained_on_each_on_its_server(
    world: tuple[Path, Outcomes],
) -> None:
    root, runs = world
    full = runs["full"]
    exported = [_final(root / "a", 4, s) for s in SERVERS]
    for s, state in zip(SERVERS, exported, strict=True):
        result, points = full[s]
        assert result["exported_rows"] == result["live_rows"]
        assert state["ids"].shape == (result["live_rows"],)
        assert state["params"].shape == (result["live_rows"], 4)
        assert bool((shard_of(state["ids"], 2) == s).all())
        assert sum(_series(points, "rows_created")) == result["live_rows"]
        assert len(_series(points, "table_rows")) >= 4
    union = torch.cat([state["ids"] for state in exported]).sort().values
    assert torch.equal(union, _seen_ids({**BASE}, 4))
    # each server also keeps its table's export (no optimizer state) for its party to download
    for s, state in zip(SERVERS, exported, strict=True):
        export = torch.load(root / "a" / "export" / f"step-{4:09d}" / f"rank-{s}.pt")
        assert set(export) == {"ids", "embeddings"}
        assert torch.equal(export["ids"], state["ids"])
        assert torch.equal(export["embeddings"], state["params"])
    lead, lead_points = full[WORKERS[0]]
    assert len(_series(lead_points, "loss")) == 4
    assert _series(lead_points, "auc")[-1] == lead["auc"]
    assert lead["auc"] > 0.5  # better than chance on the generated log after four steps
    assert _series(lead_points, "bytes_sent")[-1] > 0


def _evaluation_of_checkpoint(folder: Path, step: int) -> tuple[float, float]:
    """The test AUC and loss of a sync job's checkpoint at ``step``, computed here from its
    tables and the workers' model: what an evaluation at that step must report."""
    config = ParamServerConfig.model_validate(BASE)
    table = {s: _final(folder, step, s) for s in SERVERS}
    ids = torch.cat([t["ids"] for t in table.values()])
    params = torch.cat([t["params"] for t in table.values()])
    scores, labels = [], []
    for index, rank in enumerate(WORKERS):
        source = open_source(config, None, index, len(WORKERS), None)
        keys, truth_labels, _ = source.test_set()
        flat = keys.flatten()
        # rows of the ids in the tables; the others read their initial values
        emb = init_rows(flat, config.dim, config.seed, config.init_scale)
        where = (flat.unsqueeze(1) == ids.unsqueeze(0)).nonzero()
        emb[where[:, 0]] = params[where[:, 1]]
        model = dense_tower(source.num_fields, config.dim, config.hidden, config.seed)
        model.load_state_dict(_final(folder, step, rank)["model"])
        with torch.no_grad():
            scores.append(forward(model, emb.view(*keys.shape, config.dim), config.interactions))
        labels.append(truth_labels)
    every_score, every_label = torch.cat(scores), torch.cat(labels)
    loss = F.binary_cross_entropy_with_logits(every_score, every_label)
    return auc(every_score, every_label), float(loss)


def test_an_evaluation_between_sync_steps_sees_the_tables_of_its_step(
    world: tuple[Path, Outcomes],
) -> None:
    root, runs = world
    _, points = runs["full"][WORKERS[0]]
    reported = list(zip(_series(points, "auc"), _series(points, "eval_loss"), strict=True))
    # after step 2 (the next step's rows already requested), then at the end
    assert len(reported) == 2
    for (got_auc, got_loss), step in zip(reported, (2, 4), strict=True):
        want_auc, want_loss = _evaluation_of_checkpoint(root / "a", step)
        assert got_auc == pytest.approx(want_auc, abs=1e-12)
        assert got_loss == pytest.approx(want_loss, rel=1e-6)


def _assert_same_end(first: Path, second: Path) -> None:
    """Two jobs' final checkpoints (step 4) hold the same tables, row by row, and the same
    model, bit for bit."""
    for s in SERVERS:
        for a, b in zip(_by_id(_final(first, 4, s)), _by_id(_final(second, 4, s)), strict=True):
            assert torch.equal(a, b)
    for w in WORKERS:
        one, other = _final(first, 4, w)["model"], _final(second, 4, w)["model"]
        assert all(torch.equal(one[k], other[k]) for k in one)


def test_resuming_ends_with_the_tables_and_model_of_the_uninterrupted_job(
    world: tuple[Path, Outcomes],
) -> None:
    root, runs = world
    for s in SERVERS:
        assert runs["resumed"][s][0]["start_step"] == 2
    _assert_same_end(root / "a", root / "b")


def test_without_deduplication_the_same_training_sends_far_more_bytes(
    world: tuple[Path, Outcomes],
) -> None:
    root, runs = world
    dedup_bytes = sum(runs["full"][r][0]["bytes_sent"] for r in range(4))
    plain_bytes = sum(runs["undeduped"][r][0]["bytes_sent"] for r in range(4))
    assert plain_bytes > 1.3 * dedup_bytes
    for s in SERVERS:
        a, b = _by_id(_final(root / "a", 4, s)), _by_id(_final(root / "c", 4, s))
        assert torch.equal(a[0], b[0])
        assert torch.allclose(a[1], b[1], atol=1e-6)


def test_async_keeps_the_rows_and_diverges_only_through_staleness(
    world: tuple[Path, Outcomes],
) -> None:
    root, runs = world
    for s in SERVERS:
        ids, params, _ = _by_id(_final(root / "d", 4, s))
        full_ids, full_params, _ = _by_id(_final(root / "a", 4, s))
        assert torch.equal(ids, full_ids)
        assert not torch.equal(params, full_params)
    assert runs["stale"][WORKERS[0]][0]["steps"] == 4
    # evaluated at step 2 and at the end; the LOOKUP made no rows (the ids are the full job's)
    aucs = _series(runs["stale"][WORKERS[0]][1], "auc")
    assert len(aucs) == 2 and all(0.0 <= a <= 1.0 for a in aucs)


def test_lfu_eviction_keeps_each_shard_at_its_bound(world: tuple[Path, Outcomes]) -> None:
    _, runs = world
    for s in SERVERS:
        result, points = runs["evicting"][s]
        assert result["evicted_rows"] > 0
        sizes = {step: v for step, name, v in points if name == "table_rows"}
        assert sizes[1] <= 150 and sizes[3] <= 150


def test_workers_reading_a_party_dataset(world: tuple[Path, Outcomes]) -> None:
    _, runs = world
    lead = runs["from_dataset"][WORKERS[0]][0]
    # rows per (field, id) seen; the AUC beside the generator's own (the best achievable)
    assert 0.5 < lead["auc"] <= lead["ground_truth_auc"] + 0.02
    rows = sum(runs["from_dataset"][s][0]["live_rows"] for s in SERVERS)
    assert 0 < rows <= 3 * 200


def test_admission_makes_a_row_only_for_ids_seen_in_three_batches(
    world: tuple[Path, Outcomes],
) -> None:
    root, runs = world
    log = ClickLog(ids_per_field=BASE["data"]["vocab"], seed=BASE["seed"])
    size = BASE["batch_size"]
    batches = [log.ids(torch.arange(b * size, (b + 1) * size)).unique() for b in range(8)]
    ids, counts = torch.cat(batches).unique(return_counts=True)
    admitted = torch.cat([_final(root / "e", 4, s)["ids"] for s in SERVERS]).sort().values
    assert torch.equal(admitted, ids[counts >= 3])
    assert sum(runs["admitting"][s][0]["live_rows"] for s in SERVERS) == admitted.numel()


def test_ttl_drops_rows_idle_for_more_than_a_step(world: tuple[Path, Outcomes]) -> None:
    _, runs = world
    for s in SERVERS:
        result, _ = runs["expiring"][s]
        assert result["evicted_rows"] > 0
        assert result["live_rows"] < runs["full"][s][0]["live_rows"]


def test_a_stop_ends_every_rank_after_the_same_step_with_an_export(
    world: tuple[Path, Outcomes],
) -> None:
    root, runs = world
    # the stop read in step 2 is agreed in that step's reduction; step 3, whose rows were
    # already requested, is the last
    assert [runs["stopped"][r][0]["steps"] for r in range(4)] == [4, 4, 4, 4]
    for s in SERVERS:
        assert _final(root / "f", 4, s)["ids"].numel() == runs["stopped"][s][0]["live_rows"]
    # rows exist for exactly the ids of the steps trained
    union = torch.cat([_final(root / "f", 4, s)["ids"] for s in SERVERS]).sort().values
    assert torch.equal(union, _seen_ids({**BASE}, 4))


ONE_PARTY: list[dict[str, Any]] = [
    {"party": "alice", "role": "server", "processes": 2},
    {"party": "alice", "role": "worker", "processes": 2},
]


def _one_party_jobs(comm: Communicator, jobs: list[tuple[dict[str, Any], str]]) -> list[Any]:
    entry = entry_point("param_server")
    return [
        entry(rank_context(comm, "param_server", ONE_PARTY, config, checkpoint_dir=folder))
        for config, folder in jobs
    ]


def test_over_gloo_alone_the_same_job_ends_with_the_same_tables_and_model(
    world: tuple[Path, Outcomes], tmp_path: Path
) -> None:
    """Servers and workers of one party talk over gloo, whose sends wait for the receiver:
    the order of requests and replies must hold there too (sync and async, evaluating while
    pulls are in flight)."""
    root, _ = world
    jobs = [(FULL, str(tmp_path / "sync")), (STALE, str(tmp_path / "async"))]
    results = run_world(_one_party_jobs, 4, jobs, parties=["alice"] * 4)
    _assert_same_end(root / "a", tmp_path / "sync")
    for w in WORKERS:
        assert [r["steps"] for r in results[w]] == [4, 4]
