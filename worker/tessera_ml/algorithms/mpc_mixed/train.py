"""The rank entry point: compute parties train, the dealer serves, data holders share.

Plan (role-table order): ranks 0 and 1 compute, then the dealer, the features party and the
labels party. Data holders send each compute party one additive share of their data. The labels
party also receives both shares of the softmax outputs of logged training batches and of the test
set: it owns the labels the loss and accuracy are measured against, and reports them.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from tessera_ml.algorithms.mpc_mixed import data
from tessera_ml.algorithms.mpc_mixed.channel import Peer
from tessera_ml.algorithms.mpc_mixed.dealer import (
    FetchingProvider,
    Provider,
    SeededProvider,
    receive_seed,
    serve,
)
from tessera_ml.algorithms.mpc_mixed.link import link_encrypted, open_link
from tessera_ml.algorithms.mpc_mixed.model import SharedMlp, forward, init_params, train_step
from tessera_ml.algorithms.mpc_mixed.model_cnn import SIDE, cnn_forward, cnn_train_step, init_cnn
from tessera_ml.algorithms.mpc_mixed.precision import Precision
from tessera_ml.algorithms.mpc_mixed.protocols import Engine
from tessera_ml.algorithms.mpc_mixed.ring import Ring
from tessera_ml.algorithms.mpc_mixed.spec import MpcMixedConfig
from tessera_ml.context import RankContext

PHASE_TRAIN, PHASE_EVAL = 1, 2
MSG_DONE, MSG_LOSS, MSG_EVAL, MSG_STEP = 0, 1, 2, 3


@dataclass(frozen=True)
class Roles:
    compute: tuple[int, int]
    dealer: int
    features: int
    labels: int

    @staticmethod
    def of(ctx: RankContext) -> Roles:
        c = ctx.ranks_of("compute")
        return Roles(
            (c[0], c[1]),
            ctx.ranks_of("dealer")[0],
            ctx.ranks_of("features")[0],
            ctx.ranks_of("labels")[0],
        )


def _config(ctx: RankContext) -> MpcMixedConfig:
    assert isinstance(ctx.config, MpcMixedConfig)
    return ctx.config


def _precision(cfg: MpcMixedConfig) -> Precision:
    return Precision.of(cfg.mode, cfg.ring32_frac, cfg.ring64_frac)


def _listeners(ctx: RankContext, roles: Roles) -> list[int]:
    """The data holders, who wait while the compute parties train. Compute rank 0 sends them a
    short header every step (and evaluation and checkpoint steps), so none of them sits in one
    receive for the whole run."""
    return sorted({roles.features, roles.labels})


def _marker(ctx: RankContext) -> Callable[[int], object]:
    """Ranks without state still record each checkpoint step, so a retry finds a step that
    every rank reported."""
    return lambda step: ctx.save_checkpoint(step, {"role": ctx.role})


def _await_done(ctx: RankContext, roles: Roles) -> None:
    while True:
        header = torch.empty(3, dtype=torch.int64)
        ctx.comm.recv(header, roles.compute[0])
        kind, step = int(header[0]), int(header[1])
        if kind == MSG_DONE:
            return
        if kind == MSG_EVAL:
            _marker(ctx)(step)


def _reveal_targets(ctx: RankContext) -> list[int]:
    cfg = _config(ctx)
    return sorted(min(s.rank for s in ctx.plan if s.party == p) for p in set(cfg.reveal_to))


def run(ctx: RankContext) -> dict[str, Any] | None:
    roles = Roles.of(ctx)
    role = ctx.role
    if role == "compute":
        result = _compute(ctx, roles)
    elif role == "dealer":
        result = {"dealer": serve(ctx.comm, roles.compute[0], roles.compute[1], _marker(ctx))}
    elif role == "features":
        result = _features(ctx, roles)
    elif role == "labels":
        result = _labels(ctx, roles)
    else:
        raise ValueError(f"mpc_mixed has no role {role!r}")
    if role == "features":
        _await_done(ctx, roles)
    if role != "compute" and ctx.rank in _reveal_targets(ctx):
        result["model"] = _receive_model(ctx, roles)
    ctx.reporter.flush()
    return result


# --- data holders ---------------------------------------------------------------------------


def _send_shares(ctx: RankContext, roles: Roles, x: torch.Tensor, ring: Ring) -> None:
    encoded = ring.encode(x)
    gen = torch.Generator().manual_seed(int.from_bytes(os.urandom(7), "little"))
    share0 = ring.random(tuple(encoded.shape), gen)
    ctx.comm.send(share0, roles.compute[0])
    ctx.comm.send(encoded - share0, roles.compute[1])


def _features(ctx: RankContext, roles: Roles) -> dict[str, Any]:
    cfg = _config(ctx)
    prec = _precision(cfg)
    split = data.features(data.dataset_ref(ctx.slot.dataset, cfg.dataset), ctx.data_root)
    meta = {"n_train": split.train.shape[0], "n_test": split.test.shape[0]}
    meta["n_features"] = split.train.shape[1]
    for r in roles.compute:
        ctx.comm.send_data(meta, r)
    _send_shares(ctx, roles, split.train, prec.forward)
    if prec.split:
        _send_shares(ctx, roles, split.train, prec.backward)
    _send_shares(ctx, roles, split.test, prec.forward)
    return {"rows": meta}


def _labels(ctx: RankContext, roles: Roles) -> dict[str, Any]:
    cfg = _config(ctx)
    prec = _precision(cfg)
    ref = data.dataset_ref(ctx.slot.dataset, cfg.dataset)
    split, classes = data.labels(ref, ctx.data_root)
    for r in roles.compute:
        ctx.comm.send_data({"classes": classes}, r)
    onehot = torch.nn.functional.one_hot(split.train, classes).to(torch.float64)
    _send_shares(ctx, roles, onehot, prec.backward)
    accuracy = None
    n_train = split.train.shape[0]
    per_epoch = n_train // cfg.batch_size
    while True:
        header = torch.empty(3, dtype=torch.int64)
        ctx.comm.recv(header, roles.compute[0])
        kind, step, rows = (int(v) for v in header)
        if kind == MSG_DONE:
            break
        if kind == MSG_STEP:
            continue
        probs = _receive_open(ctx, roles, (rows, classes), prec.forward)
        if kind == MSG_LOSS:
            idx = data.batches(n_train, cfg.batch_size, step // per_epoch, cfg.seed)
            labels = split.train[idx[step % per_epoch]]
            ctx.reporter.metrics(step, {"loss": float(_cross_entropy(probs, labels))})
        else:
            accuracy = float((probs.argmax(1) == split.test).double().mean())
            eval_loss = float(_cross_entropy(probs, split.test))
            ctx.reporter.metrics(step, {"accuracy": accuracy, "eval_loss": eval_loss})
            _marker(ctx)(step)
    return {"test_accuracy": accuracy}


def _cross_entropy(probs: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    picked = probs.gather(1, labels.view(-1, 1)).clamp(min=1e-6)
    return -picked.log().mean()


def _receive_open(
    ctx: RankContext, roles: Roles, shape: tuple[int, int], ring: Ring
) -> torch.Tensor:
    total = torch.zeros(shape, dtype=ring.dtype)
    for r in roles.compute:
        part = torch.empty(shape, dtype=ring.dtype)
        ctx.comm.recv(part, r)
        total = total + part
    return ring.decode(total)


# --- compute parties ------------------------------------------------------------------------


@dataclass
class _Inputs:
    x_train: torch.Tensor
    x_train_back: torch.Tensor
    x_test: torch.Tensor
    y_train: torch.Tensor
    classes: int


def _receive_inputs(ctx: RankContext, roles: Roles, prec: Precision) -> _Inputs:
    meta = ctx.comm.recv_data(roles.features)
    classes = int(ctx.comm.recv_data(roles.labels)["classes"])
    n_train, n_test, width = meta["n_train"], meta["n_test"], meta["n_features"]

    def recv(rows: int, cols: int, ring: Ring, src: int) -> torch.Tensor:
        t = torch.empty(rows, cols, dtype=ring.dtype)
        ctx.comm.recv(t, src)
        return t

    x_train = recv(n_train, width, prec.forward, roles.features)
    x_back = recv(n_train, width, prec.backward, roles.features) if prec.split else x_train
    x_test = recv(n_test, width, prec.forward, roles.features)
    y_train = recv(n_train, classes, prec.backward, roles.labels)
    return _Inputs(x_train, x_back, x_test, y_train, classes)


def initial_params(cfg: MpcMixedConfig, width: int, classes: int) -> dict[str, torch.Tensor]:
    """The preset initial weights of the configured network (float64)."""
    if cfg.model == "cnn":
        if width != SIDE * SIDE:
            raise ValueError(f"the cnn model takes {SIDE}x{SIDE} images, not {width} features")
        return init_cnn(cfg.channels, classes, cfg.seed)
    return init_params([width, *cfg.hidden, classes], cfg.batch_norm, cfg.seed)


def _provider(ctx: RankContext, roles: Roles, index: int) -> Provider:
    if index == 0:
        return SeededProvider(receive_seed(ctx.comm, roles.dealer))
    return FetchingProvider(ctx.comm, roles.dealer)


def _send_open(
    ctx: RankContext, roles: Roles, index: int, kind: int, step: int, x: torch.Tensor
) -> None:
    if index == 0:
        header = torch.tensor([kind, step, x.shape[0] if x.dim() else 0], dtype=torch.int64)
        for r in _listeners(ctx, roles):
            ctx.comm.send(header, r)
    if kind not in (MSG_DONE, MSG_STEP):
        ctx.comm.send(x.contiguous(), roles.labels)


def _compute(ctx: RankContext, roles: Roles) -> dict[str, Any]:
    cfg = _config(ctx)
    prec = _precision(cfg)
    index = roles.compute.index(ctx.rank)
    peer, fell_back = open_link(
        ctx.comm, index, roles.compute[1 - index], cfg.link, os.environ.get("GLOO_SOCKET_IFNAME")
    )
    if fell_back is not None:
        ctx.reporter.log(
            f"direct link to the other compute party failed ({fell_back}); "
            "rounds go over the communicator",
            level="warning",
        )
    encrypted = link_encrypted(ctx.comm, peer)
    ctx.harness.pin(index)
    try:
        result = _train(ctx, roles, cfg, prec, index, peer)
    finally:
        peer.close()
    result["link"] = "communicator" if fell_back else cfg.link
    result["cross_party_tls"] = encrypted
    return result


def _train(
    ctx: RankContext,
    roles: Roles,
    cfg: MpcMixedConfig,
    prec: Precision,
    index: int,
    peer: Peer,
) -> dict[str, Any]:
    provider = _provider(ctx, roles, index)
    eng = Engine(index, peer, provider, cfg.comparison)
    inputs = _receive_inputs(ctx, roles, prec)
    plain = initial_params(cfg, inputs.x_train.shape[1], inputs.classes)
    model = SharedMlp.from_plain(eng, plain, prec.backward, cfg.batch_norm, cfg.seed)
    n_train = inputs.x_train.shape[0]
    per_epoch = n_train // cfg.batch_size
    if per_epoch == 0:
        raise ValueError(f"batch_size {cfg.batch_size} exceeds the {n_train} training rows")
    total = per_epoch * cfg.epochs
    if cfg.max_steps is not None:
        total = min(total, cfg.max_steps)
    start_epoch, step = 0, 0
    state = ctx.load_checkpoint()
    if state is not None:
        model.params = state["params"]
        start_epoch, step = int(state["epoch"]), int(state["step"])
    steps: list[dict[str, float]] = []
    for epoch in range(start_epoch, cfg.epochs):
        for idx in data.batches(n_train, cfg.batch_size, epoch, cfg.seed):
            if step >= total or ctx.stop.is_set():
                break
            steps.append(_one_step(ctx, eng, prec, model, inputs, idx, cfg, step))
            step += 1
        if step >= total or ctx.stop.is_set() or (epoch + 1) % cfg.eval_every_epochs == 0:
            _evaluate(ctx, roles, eng, prec, model, inputs, index, step)
            ctx.save_checkpoint(step, {"params": model.params, "epoch": epoch + 1, "step": step})
            provider.checkpoint(step)
        if step >= total or ctx.stop.is_set():
            break
    _send_open(ctx, roles, index, MSG_DONE, step, torch.empty(0))
    revealed = _reveal_model(ctx, roles, index, model, prec)
    provider.close()
    result = _summary(steps, cfg)
    if revealed is not None:
        result["model"] = revealed
    return result


def _one_step(
    ctx: RankContext,
    eng: Engine,
    prec: Precision,
    model: SharedMlp,
    inputs: _Inputs,
    idx: torch.Tensor,
    cfg: MpcMixedConfig,
    step: int,
) -> dict[str, float]:
    roles = Roles.of(ctx)
    index = eng.index
    step_fn = cnn_train_step if cfg.model == "cnn" else train_step
    with ctx.harness.turn(index, eng.peer.barrier):
        t0 = time.perf_counter()
        eng.provider.begin(PHASE_TRAIN)
        eng.peer.barrier()  # party 0 has its material at once; party 1 receives it first
        link0 = ctx.harness.link_bytes()
        t1, cpu1 = time.perf_counter(), time.process_time()
        sent0, rounds0 = eng.peer.stats.snapshot()
        probs = step_fn(
            eng,
            prec,
            model,
            inputs.x_train[idx],
            inputs.x_train_back[idx],
            inputs.y_train[idx],
            cfg.learning_rate,
        )
        t2, cpu2 = time.perf_counter(), time.process_time()
        link1 = ctx.harness.link_bytes()
        eng.provider.end()
    sent1, rounds1 = eng.peer.stats.snapshot()
    record = {
        "step_time_s": t2 - t1,
        "step_cpu_s": cpu2 - cpu1,
        "offline_time_s": t1 - t0,
        "online_bytes": float(sent1 - sent0),
        "online_rounds": float(rounds1 - rounds0),
        "offline_bytes": float(eng.provider.stats.bytes_received),
    }
    if link0 is not None and link1 is not None:
        # this party's host link, read from the kernel during the online phase only
        record["link_online_bytes"] = float(link1.sent - link0.sent)
    if (step + 1) % cfg.log_every == 0:
        _send_open(ctx, roles, index, MSG_LOSS, step, probs)
    else:
        _send_open(ctx, roles, index, MSG_STEP, step, torch.empty(0))
    stats = ctx.comm.stats
    ctx.reporter.metrics(
        step,
        {
            "step_time_s": record["step_time_s"],
            "step_cpu_s": record["step_cpu_s"],
            "offline_time_s": record["offline_time_s"],
            "online_bytes": float(sent1),
            "online_rounds": float(rounds1),
            "offline_bytes": record["offline_bytes"],
            # samples per second of the whole step: waiting for its material, then online
            "throughput": len(idx) / max(t2 - t0, 1e-9),
            "bytes_sent": float(stats.sent),
            "bytes_received": float(stats.received),
        },
    )
    ctx.reporter.progress(step + 1, None)
    return record


def _evaluate(
    ctx: RankContext,
    roles: Roles,
    eng: Engine,
    prec: Precision,
    model: SharedMlp,
    inputs: _Inputs,
    index: int,
    step: int,
) -> None:
    forward_fn = cnn_forward if _config(ctx).model == "cnn" else forward
    with ctx.harness.turn(index, eng.peer.barrier):
        eng.provider.begin(PHASE_EVAL)
        probs = forward_fn(eng, prec, model, inputs.x_test)
        eng.provider.end()
    _send_open(ctx, roles, index, MSG_EVAL, step, probs)


def _summary(steps: list[dict[str, float]], cfg: MpcMixedConfig) -> dict[str, Any]:
    """Per-step numbers over the steady state (the first step records the dealer schedule):
    medians of times, means of traffic."""
    steady = steps[1:] if len(steps) > 1 else steps
    out: dict[str, Any] = {"steps": len(steps), "mode": cfg.mode}
    for key in ("step_time_s", "step_cpu_s", "offline_time_s"):
        out[key] = statistics.median(s[key] for s in steady) if steady else float("nan")
    for key in ("online_bytes", "online_rounds", "link_online_bytes"):
        if all(key in s for s in steady):
            out[key] = sum(s[key] for s in steady) / max(len(steady), 1)
    if len(steps) > 1:
        out["offline_bytes"] = (steps[-1]["offline_bytes"] - steps[0]["offline_bytes"]) / (
            len(steps) - 1
        )
    return out


# --- revealing the model --------------------------------------------------------------------


def _reveal_model(
    ctx: RankContext, roles: Roles, index: int, model: SharedMlp, prec: Precision
) -> dict[str, Any] | None:
    """Both shares of every parameter to each named party's first rank (as nested lists)."""
    targets = _reveal_targets(ctx)
    mine = dict(model.params)
    other = roles.compute[1 - index]
    plain = None
    for t in targets:
        if t == ctx.rank:
            continue
        if t == other:
            if index == 0:
                ctx.comm.send_data(mine, other)
            continue
        ctx.comm.send_data(mine, t)
    if ctx.rank in targets:
        theirs = ctx.comm.recv_data(other)
        plain = {k: prec.backward.decode(v + theirs[k]).tolist() for k, v in mine.items()}
    if index == 1 and other in targets:
        ctx.comm.send_data(mine, other)
    return plain


def _receive_model(ctx: RankContext, roles: Roles) -> dict[str, Any]:
    cfg = _config(ctx)
    prec = _precision(cfg)
    a = ctx.comm.recv_data(roles.compute[0])
    b = ctx.comm.recv_data(roles.compute[1])
    return {k: prec.backward.decode(v + b[k]).tolist() for k, v in a.items()}
