"""The features and labels parties: each secret-shares its data with the compute parties once;
the labels party then reports the loss and accuracy of the outputs it receives."""

from __future__ import annotations

from typing import Any

import torch

from tessera_ml.algorithms.mpc_mixed import data
from tessera_ml.algorithms.mpc_mixed.messages import Message, receive_header, receive_open
from tessera_ml.algorithms.mpc_mixed.prg import Prg
from tessera_ml.algorithms.mpc_mixed.ring import Ring
from tessera_ml.algorithms.mpc_mixed.roles import (
    Roles,
    checkpoint_marker,
    job_config,
    precision_of,
)
from tessera_ml.context import RankContext


def send_shares(ctx: RankContext, roles: Roles, x: torch.Tensor, ring: Ring) -> None:
    """One additive share of ``x``, encoded in ``ring``, to each compute party."""
    encoded = ring.encode(x)
    # cryptographic: party 1 must not be able to rebuild party 0's share from a guessed seed
    share0 = Prg.fresh().ring(tuple(encoded.shape), ring.dtype)
    ctx.comm.send(share0, roles.compute[0])
    ctx.comm.send(encoded - share0, roles.compute[1])


def features(ctx: RankContext, roles: Roles) -> dict[str, Any]:
    """Row counts to both compute parties, then the train features in each ring the mode
    needs and the test features in the forward ring."""
    cfg = job_config(ctx)
    prec = precision_of(cfg)
    split = data.features(data.dataset_ref(ctx.slot.dataset, cfg.dataset), ctx.data_root)
    meta = {"n_train": split.train.shape[0], "n_test": split.test.shape[0]}
    meta["n_features"] = split.train.shape[1]
    for r in roles.compute:
        ctx.comm.send_data(meta, r)
    send_shares(ctx, roles, split.train, prec.forward)
    if prec.split:
        send_shares(ctx, roles, split.train, prec.backward)
    send_shares(ctx, roles, split.test, prec.forward)
    return {"rows": meta}


def labels(ctx: RankContext, roles: Roles) -> dict[str, Any]:
    """The class count and the one-hot train labels to the compute parties; then, until
    training ends, the loss of each logged batch and the accuracy of each evaluation."""
    cfg = job_config(ctx)
    prec = precision_of(cfg)
    ref = data.dataset_ref(ctx.slot.dataset, cfg.dataset)
    split, classes = data.labels(ref, ctx.data_root)
    for r in roles.compute:
        ctx.comm.send_data({"classes": classes}, r)
    onehot = torch.nn.functional.one_hot(split.train, classes).to(torch.float64)
    send_shares(ctx, roles, onehot, prec.backward)
    accuracy = None
    n_train = split.train.shape[0]
    while True:
        message, step, rows = receive_header(ctx, roles)
        if message == Message.DONE:
            break
        if message == Message.STEP:
            continue
        probs = receive_open(ctx, roles, (rows, classes), prec.forward)
        if message == Message.LOSS:
            batch_labels = split.train[data.step_rows(n_train, cfg.batch_size, step, cfg.seed)]
            ctx.reporter.metrics(step, {"loss": float(_cross_entropy(probs, batch_labels))})
        else:
            accuracy = float((probs.argmax(1) == split.test).double().mean())
            eval_loss = float(_cross_entropy(probs, split.test))
            ctx.reporter.metrics(step, {"accuracy": accuracy, "eval_loss": eval_loss})
            checkpoint_marker(ctx)(step)
    return {"test_accuracy": accuracy}


def _cross_entropy(probs: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    picked = probs.gather(1, labels.view(-1, 1)).clamp(min=1e-6)
    return -picked.log().mean()
