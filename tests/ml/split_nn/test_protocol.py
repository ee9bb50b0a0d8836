"""split_nn on a real world: equality with centralised training, schedules, bytes, privacy.

One world of three processes runs every job below in turn (process start-up is the expensive
part on a loaded machine); the tests then check what each job returned and sent. The world is
wired as the platform wires these jobs (alice, bob and carol, TLS between them), so every job
plans the same party on each rank.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

from tessera_ml.algorithms.split_nn.party_data import load_party
from tessera_ml.algorithms.split_nn.spec import SplitNNConfig
from tessera_ml.bench.split_nn.centralized import max_abs_diff, train_centralized
from tessera_ml.comm import codec
from tessera_ml.worlds import run_world
from tests.ml.split_nn.world import Job, parties, run_jobs

DATA = "sklearn:breast_cancer"
SMALL = {
    "bottom": {"hidden": [], "out": 6},
    "middle": {"hidden": [], "out": 5},
    "batch_size": 16,
    "lr": 0.1,
    "eval_every": 0,
    "report_every": 25,
}
CHAIN = [
    {
        "party": "alice",
        "role": "feature",
        "dataset": f"{DATA}?columns=0:30",
        "options": {"keep": 0.9},
    },
    {"party": "bob", "role": "middle"},
    {"party": "carol", "role": "label", "dataset": DATA, "options": {"keep": 0.95}},
]
TWO_FEATURES = [
    {
        "party": "alice",
        "role": "feature",
        "dataset": f"{DATA}?columns=0:12",
        "options": {"keep": 0.9},
    },
    {
        "party": "bob",
        "role": "feature",
        "dataset": f"{DATA}?columns=12:30",
        "options": {"keep": 0.85},
    },
    {"party": "carol", "role": "label", "dataset": DATA},
]
JOBS = {
    "chain": Job(CHAIN, {**SMALL, "dtype": "float64", "steps": 200}),
    "two_concat": Job(TWO_FEATURES, {**SMALL, "dtype": "float64", "steps": 200}),
    "sequential_mb": Job(
        CHAIN, {**SMALL, "dtype": "float64", "steps": 24, "micro_batches": 4, "pipelined": False}
    ),
    "pipelined_mb": Job(CHAIN, {**SMALL, "dtype": "float64", "steps": 24, "micro_batches": 4}),
    "wine_mean_pipelined": Job(
        [
            {"party": "alice", "role": "feature", "dataset": "sklearn:wine?columns=0:6"},
            {"party": "bob", "role": "feature", "dataset": "sklearn:wine?columns=6:13"},
            {"party": "carol", "role": "label", "dataset": "sklearn:wine"},
        ],
        {
            **SMALL,
            "dtype": "float64",
            "steps": 30,
            "combine": "mean",
            "micro_batches": 2,
            "eval_every": 10,
            "report_every": 10,
        },
    ),
    "two_sum_int8": Job(
        TWO_FEATURES,
        {**SMALL, "steps": 40, "combine": "sum", "compression": "int8", "micro_batches": 2},
    ),
}


RESUMABLE = {**SMALL, "steps": 20, "checkpoint_every": 10, "stop_check_every": 5}


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[dict[str, Any]]]:
    torch.set_num_threads(1)
    ckpt = tmp_path_factory.mktemp("split_nn")
    jobs = {
        **JOBS,
        "checkpointed": Job(TWO_FEATURES, RESUMABLE, checkpoint_dir=str(ckpt / "a")),
        "resumed": Job(
            TWO_FEATURES,
            RESUMABLE,
            checkpoint_dir=str(ckpt / "b"),
            resume_from=str(ckpt / "a" / "step-000000010"),
        ),
        "cancelled": Job(TWO_FEATURES, RESUMABLE, stop_on_rank=1),
    }
    names = list(jobs)
    listed = [jobs[n] for n in names]
    per_rank = run_world(run_jobs, 3, listed, timeout_s=180, parties=parties(listed))
    return {n: [per_rank[r][i] for r in range(3)] for i, n in enumerate(names)}


def test_a_resumed_job_ends_where_the_uninterrupted_one_does(
    outcomes: dict[str, list[dict[str, Any]]],
) -> None:
    for full, resumed in zip(outcomes["checkpointed"], outcomes["resumed"], strict=True):
        assert resumed["train_steps"] == 10
        for k, v in full["parameters"].items():
            assert np.array_equal(v, resumed["parameters"][k]), k


def test_a_stop_seen_by_one_rank_stops_every_rank_at_the_same_step(
    outcomes: dict[str, list[dict[str, Any]]],
) -> None:
    assert [o["steps"] for o in outcomes["cancelled"]] == [0, 0, 0]


def test_pipelined_mean_of_two_parties_without_a_middle_matches_centralised_training(
    outcomes: dict[str, list[dict[str, Any]]],
) -> None:
    job = JOBS["wine_mean_pipelined"]
    ref = train_centralized(job.assignments, SplitNNConfig.model_validate(job.config))
    runs = outcomes["wine_mean_pipelined"]
    for rank, out in enumerate(runs):
        assert max_abs_diff(out["parameters"], ref.parameters[rank]) <= 1e-10
    assert {"middle.0.weight", "top.0.weight"} <= set(runs[2]["parameters"])
    assert [s for s, name, _ in runs[2]["metrics"] if name == "accuracy"] == [10, 20, 30]
    assert runs[2]["eval"]["accuracy"] == ref.eval["accuracy"]


@pytest.mark.parametrize("name", ["chain", "two_concat"])
def test_200_float64_steps_match_centralised_training(
    outcomes: dict[str, list[dict[str, Any]]], name: str
) -> None:
    job = JOBS[name]
    ref = train_centralized(job.assignments, SplitNNConfig.model_validate(job.config))
    for rank, out in enumerate(outcomes[name]):
        assert out["steps"] == 200
        assert max_abs_diff(out["parameters"], ref.parameters[rank]) <= 1e-10
    label = outcomes[name][2]
    assert label["eval"]["accuracy"] == pytest.approx(ref.eval["accuracy"], abs=1e-12)
    assert label["eval"]["accuracy"] > 0.9
    assert ref.losses[-1] < ref.losses[0]


def test_alignment_keeps_only_samples_every_party_holds(
    outcomes: dict[str, list[dict[str, Any]]],
) -> None:
    shares = [
        load_party(a.get("dataset") or DATA, a["role"], a["party"], a.get("options", {}))
        for a in TWO_FEATURES
    ]
    common = set.intersection(*(set(s.train.ids.tolist()) for s in shares))
    assert 0 < len(common) < min(len(s.train.ids) for s in shares)
    assert {out["num_train"] for out in outcomes["two_concat"]} == {len(common)}


def test_pipelined_schedule_leaves_parameters_identical(
    outcomes: dict[str, list[dict[str, Any]]],
) -> None:
    for seq, pipe in zip(outcomes["sequential_mb"], outcomes["pipelined_mb"], strict=True):
        assert set(seq["parameters"]) == set(pipe["parameters"])
        for k, v in seq["parameters"].items():
            assert np.array_equal(v, pipe["parameters"][k]), k
    job = JOBS["pipelined_mb"]
    ref = train_centralized(job.assignments, SplitNNConfig.model_validate(job.config))
    for rank, out in enumerate(outcomes["pipelined_mb"]):
        assert max_abs_diff(out["parameters"], ref.parameters[rank]) <= 1e-10


@pytest.mark.parametrize("name", ["chain", "two_concat", "pipelined_mb"])
def test_bytes_per_step_are_the_cut_tensors(
    outcomes: dict[str, list[dict[str, Any]]], name: str
) -> None:
    measured = sum(o["train_bytes_sent"] / o["train_steps"] for o in outcomes[name])
    analytic = sum(o["analytic_bytes_sent_per_step"] for o in outcomes[name])
    assert analytic <= measured <= 1.05 * analytic


def test_int8_cuts_send_int8_rows_plus_scales_and_still_learn(
    outcomes: dict[str, list[dict[str, Any]]],
) -> None:
    runs = outcomes["two_sum_int8"]
    measured = sum(o["train_bytes_sent"] / o["train_steps"] for o in runs)
    analytic = sum(o["analytic_bytes_sent_per_step"] for o in runs)
    width = JOBS["two_sum_int8"].config["bottom"]["out"]
    int8_over_float32 = (width + 4) / (4 * width)  # int8 payload plus one float32 scale per row
    assert measured / analytic == pytest.approx(int8_over_float32, rel=0.01)
    assert runs[2]["eval"]["accuracy"] > 0.85


def test_every_rank_reports_bytes_and_the_label_party_reports_loss(
    outcomes: dict[str, list[dict[str, Any]]],
) -> None:
    chain = outcomes["chain"]
    for rank, out in enumerate(chain):
        names = {name for _, name, _ in out["metrics"]}
        assert {"bytes_sent", "bytes_received", "step_time_s", "progress"} <= names
        peers = {2: {1}, 1: {0, 2}, 0: {1}}[rank]
        assert {f"bytes_sent.to.{p}" for p in peers} <= names
    label_names = {name for _, name, _ in chain[2]["metrics"]}
    assert {"loss", "eval_loss", "accuracy", "auc"} <= label_names
    losses = [v for _, name, v in chain[2]["metrics"] if name == "loss"]
    assert losses[-1] < losses[0]


def _serialised(values: np.ndarray) -> set[bytes]:
    """The float64 encodings of the non-zero values (8 bytes: a random 16-byte digest in an encoded
    payload matches one by chance with negligible probability, unlike 4-byte float32 ones)."""
    return {np.float64(v).tobytes() for v in values.ravel() if v != 0}


def test_no_raw_feature_or_label_leaves_its_party(
    outcomes: dict[str, list[dict[str, Any]]],
) -> None:
    for name, job in JOBS.items():
        for rank, assignment in enumerate(job.assignments):
            if assignment["role"] == "middle":
                continue
            share = load_party(
                assignment.get("dataset") or DATA,
                assignment["role"],
                assignment["party"],
                assignment.get("options", {}),
            )
            sent = outcomes[name][rank]["sent"]
            if assignment["role"] == "feature":
                _assert_no_features(share.train.x, share.test.x, sent)
            else:
                _assert_no_labels(share.train.y, share.test.y, sent)


def _assert_no_features(x_train: Any, x_test: Any, sent: list[tuple[int, np.ndarray]]) -> None:
    """No non-zero raw value (in the message's own precision) is in any 2-D tensor sent, and no
    float64 encoding of one is in any encoded payload; int8 tensors come with their row scales."""
    raw = np.concatenate([x_train.numpy(), x_test.numpy()]).ravel()
    raw = raw[raw != 0]
    raw_in = {dt: set(raw.astype(dt).tolist()) for dt in (np.float64, np.float32, np.float16)}
    patterns = _serialised(raw)
    messages = iter(sent)
    for dst, msg in messages:
        if msg.dtype == np.int64 and msg.shape == (1,):
            _, payload = next(messages)
            data = payload.tobytes()
            windows = {data[i : i + 8] for i in range(len(data) - 7)}
            assert not (windows & patterns), "a raw feature value was encoded"
        elif msg.dtype == np.int8:
            _, scale = next(messages)
            assert scale.dtype == np.float32 and scale.shape == (msg.shape[0],)
        elif msg.ndim == 2 and msg.dtype.kind == "f":
            assert not (set(msg.ravel().tolist()) & raw_in[msg.dtype.type]), "raw features sent"
        else:
            assert dst == -1 and msg.size == 1, f"unexpected message {msg.dtype} {msg.shape}"


def _assert_no_labels(y_train: Any, y_test: Any, sent: list[tuple[int, np.ndarray]]) -> None:
    """Label-party messages are: encoded alignment data (salt, positions, counts), gradients of
    its input (int8 ones followed by their row scales) whose columns are never label vectors,
    and the one-element stop flag."""
    labels = set(np.unique(np.concatenate([y_train.numpy(), y_test.numpy()])).tolist())
    messages = iter(sent)
    for dst, msg in messages:
        if msg.dtype == np.int64 and msg.shape == (1,):
            _, payload = next(messages)
            assert payload.dtype == np.uint8 and payload.size == msg[0]
            obj = codec.decode(payload.tobytes())
            for part in obj if isinstance(obj, tuple) else (obj,):
                if isinstance(part, torch.Tensor):
                    assert part.dtype == torch.int64 and part.unique().numel() == part.numel()
                else:
                    assert isinstance(part, bytes | int), type(part)
        elif msg.ndim == 2 and msg.dtype.kind in "fi":
            values = msg.astype(np.float64)
            if msg.dtype == np.int8:
                _, scale = next(messages)
                assert scale.dtype == np.float32 and scale.shape == (msg.shape[0],)
                values = values * scale[:, None]
            for column in values.T:
                assert not set(np.unique(column).tolist()) <= labels, "labels crossed"
        else:
            assert dst == -1 and msg.size == 1, f"unexpected message {msg.dtype} {msg.shape}"
