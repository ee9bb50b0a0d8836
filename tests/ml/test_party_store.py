"""In a job of several parties, a party's process group meets in a store only that party can
reach: another party serving the attempt's store (or writing to it) never sees nor sets where
the party's ranks connect to each other without TLS."""

from __future__ import annotations

import multiprocessing as mp
import tempfile
from pathlib import Path
from typing import Any

import torch

from tessera_ml.comm.world import join_world
from tessera_ml.worlds import free_port
from tessera_ml.worlds.processes import PartyWorld, party_world

PARTIES = ["bob", "alice", "alice", "carol"]


def _rank(rank: int, wiring: PartyWorld, port: int, results: Any) -> None:
    world = join_world(
        rank=rank,
        parties=wiring.parties,
        store_address=("127.0.0.1", port),
        address="127.0.0.1",
        credentials=wiring.credentials[rank],
        attempt=wiring.attempt,
        secret=wiring.secret,
        timeout_s=60,
    )
    total = torch.ones(1) * (rank + 1)
    world.comm.all_reduce(total)
    inside = torch.ones(1)
    if rank in (1, 2):
        world.comm.all_reduce(inside, group=world.comm.new_group([1, 2], "alice"))
    attempt_keys = world.server.keys() if world.server is not None else None
    party_keys = world.party_server.keys() if world.party_server is not None else None
    world.close()
    results.put((rank, float(total), float(inside), attempt_keys, party_keys))


def test_a_partys_group_meets_in_its_own_store_not_in_the_attempts() -> None:
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    with tempfile.TemporaryDirectory() as folder:
        wiring = party_world(PARTIES, ["127.0.0.1"] * len(PARTIES), Path(folder))
        port = free_port()
        procs = [
            ctx.Process(target=_rank, args=(r, wiring, port, results), daemon=True)
            for r in range(len(PARTIES))
        ]
        for p in procs:
            p.start()
        try:
            got = {r: rest for r, *rest in (results.get(timeout=120) for _ in PARTIES)}
        finally:
            for p in procs:
                p.join(timeout=10)
                if p.is_alive():
                    p.kill()

    assert [got[r][0] for r in range(4)] == [10.0] * 4
    assert got[1][1] == got[2][1] == 2.0
    attempt_keys = got[0][2]  # served by bob's rank 0
    assert attempt_keys is not None and "party-store/alice" in attempt_keys
    assert not [k for k in attempt_keys if k.startswith("party/")]
    alice_keys = got[1][3]  # served by alice's lowest rank
    assert alice_keys is not None and any(k.startswith("party/alice/") for k in alice_keys)
    assert got[2][3] is None and got[3][3] is None  # alice's other rank; carol has no group
