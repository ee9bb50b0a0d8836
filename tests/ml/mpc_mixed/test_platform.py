"""The algorithm as the platform runs it: five ranks, TLS between parties."""

import itertools
import socket
from pathlib import Path
from typing import Any

import pytest
import torch

from tessera_ml.algorithms.mpc_mixed import data
from tessera_ml.algorithms.mpc_mixed.model import init_params
from tessera_ml.bench.mpc_mixed.reference import PlainMlp
from tessera_ml.comm import pair_link as link
from tessera_ml.comm.base import Communicator
from tessera_ml.worlds import entry_point, rank_context, run_algorithm, run_world

from ..test_pair_link_tls import _closed
from .test_spec import BASE


def test_training_job_with_every_role_reveals_the_model_to_the_named_party(
    tmp_path: Path,
) -> None:
    config = {
        "hidden": [8],
        "batch_size": 32,
        "max_steps": 3,
        "epochs": 1,
        "log_every": 2,
        "reveal_to": ["bob"],
        "learning_rate": 0.5,
    }
    outcomes = run_algorithm("mpc_mixed", BASE, config, checkpoint_dir=str(tmp_path), timeout_s=600)
    by_role = {o.role: o for o in outcomes}
    compute = [o for o in outcomes if o.role == "compute"]
    # bob plays compute (rank 1) and labels (rank 4): his first rank gets the model
    assert "model" in compute[1].result and "model" not in compute[0].result
    assert "model" not in by_role["labels"].result and "model" not in by_role["features"].result
    assert "model" not in by_role["dealer"].result
    assert all(o.result["steps"] == 3 for o in compute)
    assert all(o.result["link"] == "direct" for o in compute)
    assert all(o.result["cross_party_tls"] for o in compute)
    # party 0 derives its material from a seed; only party 1 receives dealer traffic
    assert compute[0].result["offline_bytes"] == 0 < compute[1].result["offline_bytes"]
    assert compute[0].result["online_bytes"] == compute[1].result["online_bytes"] > 0
    assert len(compute[0].series("step_time_s")) == 3
    # throughput counts the whole step: its online phase and the wait for its material
    for o in compute:
        online, offline = dict(o.series("step_time_s")), dict(o.series("offline_time_s"))
        for step, rate in o.series("throughput"):
            assert rate * (online[step] + offline[step]) == pytest.approx(32, rel=1e-3)
    assert [s for s, _ in by_role["labels"].series("loss")] == [1]

    # the revealed model is the plaintext reference's, up to fixed-point error
    feats = data.features("sklearn:digits")
    labels, classes = data.labels("sklearn:digits")
    ref = PlainMlp(init_params([64, 8, classes], True, 0), True)
    onehot = torch.nn.functional.one_hot(labels.train, classes).double()
    for idx in data.batches(feats.train.shape[0], 32, 0, 0)[:3]:
        ref.train_step(feats.train[idx], onehot[idx], 0.5)
    model = compute[1].result["model"]
    # bob's rank keeps the model on his host, reported for him to download; no other rank does
    [(kind, _, folder, size, _)] = compute[1].artifacts
    kept = torch.load(Path(folder) / "rank-1.pt")
    assert kind == "model" and size > 0 and set(kept) == set(model)
    assert all(torch.equal(kept[k], torch.tensor(v)) for k, v in model.items())
    assert not [a for o in outcomes if o.rank != 1 for a in o.artifacts]
    for name, value in ref.p.items():
        assert torch.allclose(torch.tensor(model[name], dtype=torch.float64), value, atol=0.03), (
            name
        )
    # the accuracy the labels party reported is the reference's on the test rows
    reported = by_role["labels"].result["test_accuracy"]
    assert reported == by_role["labels"].series("accuracy")[-1][1]
    plain = float((ref.forward(feats.test).argmax(1) == labels.test).double().mean())
    assert reported == pytest.approx(plain, abs=0.02)

    # every rank recorded the checkpoint step, so the platform can resume from it; the resumed
    # job (nothing left to train) reveals the same model
    assert all([c[0] for c in o.checkpoints] == [3] for o in outcomes)
    resumed = run_algorithm(
        "mpc_mixed",
        BASE,
        config,
        checkpoint_dir=str(tmp_path),
        resume_from=str(tmp_path / "step-000000003"),
        timeout_s=600,
    )
    assert resumed[1].result["steps"] == 0
    assert resumed[1].result["model"] == model


def _job_with_strangers(comm: Communicator) -> dict[str, Any]:
    """A rank of a training job in which, on compute party 0, two strangers connect to the
    direct link's listener before party 1 learns where it is: one stays silent, one sends
    garbage."""
    strangers: list[socket.socket] = []
    if comm.rank == 0:
        listen = link.listen

        def listen_behind_strangers(host: str) -> socket.socket:
            listener = listen(host)
            strangers.append(socket.create_connection(listener.getsockname()[:2]))
            strangers.append(socket.create_connection(listener.getsockname()[:2]))
            strangers[1].sendall(b"\x16\x03\x01garbage" * 8)
            return listener

        link.listen = listen_behind_strangers
    config = {"hidden": [8], "batch_size": 32, "max_steps": 2, "epochs": 1}
    ctx = rank_context(comm, "mpc_mixed", BASE, config)
    result = entry_point("mpc_mixed")(ctx)
    closed = [_closed(stranger) for stranger in strangers]
    return {"role": ctx.role, "result": result, "strangers_closed": closed}


@pytest.mark.parametrize(
    ("in_process", "link_kind"),
    [(True, "direct"), (False, "communicator")],
    ids=["in-process", "platform-communicator-link"],
)
def test_an_evaluation_between_steps_leaves_the_next_steps_bundle_on_its_way(
    tmp_path: Path, in_process: bool, link_kind: str
) -> None:
    """Party 1 asks for the next step's bundle during each step; the evaluation after the
    first epoch asks for its own while step 2's is on its way, and each phase still gets its
    own material: the job trains, evaluates twice and every step receives one bundle of the
    same size (and the evaluation one of its own)."""
    config = {
        "hidden": [8],
        "batch_size": 512,  # 2 steps an epoch
        "epochs": 2,
        "eval_every_epochs": 1,
        "learning_rate": 0.5,
        "link": link_kind,
    }
    outcomes = run_algorithm(
        "mpc_mixed",
        BASE,
        config,
        checkpoint_dir=str(tmp_path),
        in_process=in_process,
        timeout_s=600,
    )
    compute = [o for o in outcomes if o.role == "compute"]
    labels = next(o for o in outcomes if o.role == "labels")
    assert all(o.result["steps"] == 4 for o in compute)
    assert all(o.result["link"] == link_kind for o in compute)
    assert [s for s, _ in labels.series("accuracy")] == [2, 4]
    assert labels.result["test_accuracy"] > 0.2  # 10 classes, after 4 steps
    received = [v for _, v in compute[1].series("offline_bytes")]
    bundles = [b - a for a, b in itertools.pairwise(received)]
    # one training bundle a step; between steps 1 and 2 the evaluation's bundle too
    assert len(bundles) == 3 and bundles[0] == bundles[2] > 0 and bundles[1] > bundles[0]


def test_strangers_at_the_direct_links_listener_do_not_fail_the_job() -> None:
    out = run_world(_job_with_strangers, len(BASE), parties=[a["party"] for a in BASE])
    compute = [o for o in out if o["role"] == "compute"]
    assert [o["result"]["link"] for o in compute] == ["direct", "direct"]
    assert [o["result"]["cross_party_tls"] for o in compute] == [True, True]
    assert all(o["result"]["steps"] == 2 for o in compute)
    assert out[0]["strangers_closed"] == [True, True]
