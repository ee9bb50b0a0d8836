"""A two-processor job exchanges its losses over a direct link of the pair's own: the same
steps as over the communicator's all-gather, the same bytes, TLS between parties."""

from __future__ import annotations

import itertools
import socket
from typing import Any

import pytest
import torch

from tessera_ml import worlds
from tessera_ml.algorithms.zo_pair.protocol import PairProcessor, Schedule
from tessera_ml.algorithms.zo_pair.seeds import direction_seed
from tessera_ml.bench.zo_pair.dp_mezo import DataParallelMezo
from tessera_ml.comm import pair_link
from tessera_ml.comm.base import Communicator
from tessera_ml.comm.local import LocalCommunicator, LocalWorld
from tessera_ml.comm.pair_link import open_link
from tessera_ml.comm.peer import CommPeer, Peer, local_pair
from tessera_ml.worlds import WorldJob, run_world
from tests.ml.split_nn.world import RecordingCommunicator
from tests.ml.worlds import world_parties
from tests.ml.zo_pair.world import all_inputs

STEPS = 200
CONFIG: dict[str, Any] = {
    "seed": 3,
    "steps": STEPS,
    "dataset": "sklearn:wine",
    "model": {"kind": "mlp", "hidden": [8]},
    "micro_batch": 4,
    "lr": 0.01,
    "eval_every": 0,
    "log_every": 50,
}
TWO_PARTIES = [
    {"party": "alice", "role": "processor", "processes": 1},
    {"party": "bob", "role": "processor", "processes": 1},
]
ONE_PARTY = [{"party": "alice", "role": "processor", "processes": 2}]


RUNS: dict[str, dict[str, Any]] = {
    "direct": {**CONFIG, "link": "direct"},
    "communicator": {**CONFIG, "link": "communicator"},
    "fallback": {**CONFIG, "link": "direct"},  # processor 0 cannot listen: see _jobs
}


def _cannot_listen(host: str) -> socket.socket:
    raise OSError("no address to listen on (test)")


def _jobs(comm: Communicator, assignments: list[dict[str, Any]]) -> dict[str, Any]:
    torch.set_num_threads(1)
    out = {}
    listen = pair_link.listen
    for name, config in RUNS.items():
        comm.stats.reset()
        pair_link.listen = _cannot_listen if name == "fallback" else listen
        try:
            outcome = worlds.run_job(comm, WorldJob("zo_pair", assignments, config))
        finally:
            pair_link.listen = listen
        comm.barrier()
        out[name] = {
            "result": outcome.result,
            "bytes_sent": [p.value for p in outcome.points if p.name == "bytes_sent"],
            "sent_to": outcome.sent_to,
            "warnings": [line for line in outcome.lines if "direct link" in str(line)],
        }
    return out


def _plans(assignments: list[dict[str, Any]]) -> list[str]:
    return world_parties([("zo_pair", assignments, CONFIG)])


@pytest.fixture(scope="module", params=["two_parties", "one_party"])
def jobs(request: pytest.FixtureRequest) -> tuple[str, list[dict[str, Any]]]:
    assignments = TWO_PARTIES if request.param == "two_parties" else ONE_PARTY
    return request.param, run_world(_jobs, 2, assignments, parties=_plans(assignments))


def test_the_direct_link_takes_the_same_steps_as_the_all_gather(
    jobs: tuple[str, list[dict[str, Any]]],
) -> None:
    _, ranks = jobs
    assert len({r[run]["result"]["checksum"] for r in ranks for run in RUNS}) == 1
    assert [r["direct"]["result"]["link"] for r in ranks] == ["direct", "direct"]
    assert [r["communicator"]["result"]["link"] for r in ranks] == ["communicator"] * 2
    assert not any(r[run]["warnings"] for r in ranks for run in ("direct", "communicator"))


def test_a_link_that_cannot_be_made_falls_back_to_the_communicator_and_says_why(
    jobs: tuple[str, list[dict[str, Any]]],
) -> None:
    _, ranks = jobs
    assert [r["fallback"]["result"]["link"] for r in ranks] == ["communicator"] * 2
    reasons = [" ".join(str(w) for w in r["fallback"]["warnings"]) for r in ranks]
    assert "cannot listen: no address to listen on (test)" in reasons[0]
    assert "the other end cannot listen" in reasons[1]


# making the link: end 0 says where it listens and the token (32 bytes), then whether it took
# the connection (8); end 1 whether it connected (8). The same when end 0 cannot listen.
LINK_SETUP = {"direct": [40, 8], "communicator": [0, 0], "fallback": [40, 8]}
OVER_LINK = {"direct": STEPS * 8, "communicator": 0, "fallback": 0}
CHECKSUM = 32


def test_the_link_carries_two_float32_losses_a_step_and_is_counted(
    jobs: tuple[str, list[dict[str, Any]]],
) -> None:
    _, ranks = jobs
    for rank, r in enumerate(ranks):
        for run in RUNS:
            sent = r[run]["bytes_sent"]
            assert [b - a for a, b in itertools.pairwise(sent)] == [50 * 8] * 3
            total = CHECKSUM + LINK_SETUP[run][rank] + STEPS * 8
            assert sent[-1] == r[run]["result"]["bytes_sent"] == total
            assert r[run]["result"]["direct_link_bytes_sent"] == OVER_LINK[run]
            # per peer too (the dashboard's traffic matrix): what went to the other processor,
            # the link's losses included; without the link the losses are an all-gather's
            to_other = LINK_SETUP[run][rank] + OVER_LINK[run]
            assert r[run]["sent_to"] == ({1 - rank: to_other} if to_other else {})


def test_the_link_is_tls_between_parties_and_plain_tcp_within_one(
    jobs: tuple[str, list[dict[str, Any]]],
) -> None:
    layout, ranks = jobs
    assert [r["direct"]["result"]["link_tls"] for r in ranks] == [layout == "two_parties"] * 2
    assert not any(
        r[run]["result"]["link_tls"] for r in ranks for run in ("communicator", "fallback")
    )


def test_a_peer_serves_two_processors_only() -> None:
    peer, _ = local_pair()
    with pytest.raises(ValueError, match="two processors' losses, not 4"):
        PairProcessor(
            torch.nn.Linear(2, 2),
            None,  # type: ignore[arg-type]
            role_rank=0,
            num_processors=4,
            job_seed=0,
            epsilon=1e-3,
            schedule=Schedule(1e-3, 10),
            peer=peer,
        )


def _mezo_both_ways(comm: Communicator) -> list[list[Any]]:
    """Data-parallel MeZO over the direct link, then with the all-reduce, from one start."""
    torch.set_num_threads(1)
    peer, fell_back = open_link(comm, comm.rank, 1 - comm.rank, "direct")
    assert fell_back is None
    try:
        return [_mezo_steps(comm, link) for link in (peer, None)]
    finally:
        peer.close()


def _mezo_steps(comm: Communicator, link: Peer | None) -> list[Any]:
    """Three data-parallel MeZO steps; the scalar summed over ``link``, else all-reduced."""
    torch.manual_seed(1)
    model = torch.nn.Sequential(torch.nn.Linear(5, 6), torch.nn.ReLU(), torch.nn.Linear(6, 3))
    mezo = DataParallelMezo(
        model,
        comm,
        epsilon=1e-2,
        lr=0.05,
        task="classification",
        distribution="rademacher",
        peer=link,
    )
    for step in range(3):
        mezo.step(direction_seed(7, step, 0), *all_inputs(step, 2))
    return [p.detach().numpy().copy() for p in model.parameters()]


def test_data_parallel_mezo_sums_its_scalar_over_the_link_as_the_all_reduce_does() -> None:
    ranks = run_world(_mezo_both_ways, 2)
    over_link = [f[0] for f in ranks]
    all_reduced = [f[1] for f in ranks]
    for a, b in zip(over_link[0] + over_link[1], all_reduced[0] + all_reduced[1], strict=True):
        assert (a == b).all()


def test_a_communicator_that_cannot_name_parties_gets_no_plaintext_link() -> None:
    """A wrapper might hide a mesh joining two parties: the link refuses it rather than open
    plain TCP, and the rounds stay on the communicator (TLS between parties, if a mesh)."""
    wrapped = RecordingCommunicator(LocalCommunicator(LocalWorld(2), 0))
    peer, fell_back = open_link(wrapped, 0, 1, "direct")
    assert isinstance(peer, CommPeer)
    assert fell_back == "a RecordingCommunicator does not say whether rank 1 is of another party"
