"""The rank entry point: compute parties train, the dealer serves, data holders share.

Plan (role-table order): ranks 0 and 1 compute, then the dealer, the features party and the
labels party. Data holders send each compute party one additive share of their data
(``data_holders``); the compute parties train (``compute_party``) and tell the data holders
about each step (``messages``). The labels party also receives both shares of the softmax
outputs of logged training batches and of the test set: it owns the labels the loss and
accuracy are measured against, and reports them.
"""

from __future__ import annotations

from typing import Any

import torch

from tessera_ml.algorithms.mpc_mixed import data_holders
from tessera_ml.algorithms.mpc_mixed.compute_party import compute
from tessera_ml.algorithms.mpc_mixed.dealer import serve
from tessera_ml.algorithms.mpc_mixed.messages import await_done, receive_model, reveal_targets
from tessera_ml.algorithms.mpc_mixed.roles import (
    Roles,
    checkpoint_marker,
    job_config,
    precision_of,
)
from tessera_ml.context import RankContext


@torch.inference_mode()
def run(ctx: RankContext) -> dict[str, Any] | None:
    # every role works on integer shares and never differentiates: without autograd's
    # bookkeeping each of a step's thousand-odd small tensor operations costs less
    roles = Roles.of(ctx)
    role = ctx.role
    if role == "compute":
        result = compute(ctx, roles)
    elif role == "dealer":
        marker = checkpoint_marker(ctx)
        result = {"dealer": serve(ctx.comm, roles.compute[0], roles.compute[1], marker)}
    elif role == "features":
        result = data_holders.features(ctx, roles)
    elif role == "labels":
        result = data_holders.labels(ctx, roles)
    else:
        raise ValueError(f"mpc_mixed has no role {role!r}")
    if role == "features":
        await_done(ctx, roles)
    if role != "compute" and ctx.rank in reveal_targets(ctx):
        result["model"] = receive_model(ctx, roles, precision_of(job_config(ctx)))
    if "model" in result:
        # the model in the clear stays on this party's host, offered to this party alone
        weights = {name: torch.tensor(value) for name, value in result["model"].items()}
        ctx.save_result("model", 0, weights)
    ctx.reporter.flush()
    return result
