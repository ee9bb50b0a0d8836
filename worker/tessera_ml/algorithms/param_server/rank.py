"""Entry point of a ``param_server`` rank: dispatch on the role."""

from __future__ import annotations

from typing import Any

from tessera_ml.algorithms.param_server.server import run_server
from tessera_ml.algorithms.param_server.spec import SERVER, WORKER
from tessera_ml.algorithms.param_server.worker import run_worker
from tessera_ml.context import RankContext


def run(ctx: RankContext) -> dict[str, Any]:
    workers, servers = ctx.ranks_of(WORKER), ctx.ranks_of(SERVER)
    group = ctx.comm.new_group(workers, "workers")
    if ctx.role == SERVER:
        return run_server(ctx, workers)
    return run_worker(ctx, servers, group)
