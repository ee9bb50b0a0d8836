"""A compute party's run: it receives the data holders' shares, trains on them with the other
compute party, evaluates, checkpoints its shares, and reports each step's time and traffic."""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Any

import torch

from tessera_ml.algorithms.mpc_mixed import data
from tessera_ml.algorithms.mpc_mixed.dealer import receive_seed
from tessera_ml.algorithms.mpc_mixed.messages import Message, Phase, reveal_model, send_to_holders
from tessera_ml.algorithms.mpc_mixed.model import SharedMlp, forward, init_params, train_step
from tessera_ml.algorithms.mpc_mixed.model_cnn import SIDE, cnn_forward, cnn_train_step, init_cnn
from tessera_ml.algorithms.mpc_mixed.precision import Precision
from tessera_ml.algorithms.mpc_mixed.protocols import Engine
from tessera_ml.algorithms.mpc_mixed.providers import FetchingProvider, Provider, SeededProvider
from tessera_ml.algorithms.mpc_mixed.ring import Ring
from tessera_ml.algorithms.mpc_mixed.roles import Roles, job_config, precision_of
from tessera_ml.algorithms.mpc_mixed.spec import MpcMixedConfig
from tessera_ml.comm.pair_link import link_encrypted, open_link
from tessera_ml.comm.peer import DirectPeer, Peer
from tessera_ml.context import RankContext


@dataclass
class Inputs:
    """This party's shares of the data: features in the forward ring (and the backward ring
    in ``mixed``), the test features, and the one-hot labels in the backward ring."""

    x_train: torch.Tensor
    x_train_back: torch.Tensor
    x_test: torch.Tensor
    y_train: torch.Tensor
    classes: int


def receive_inputs(ctx: RankContext, roles: Roles, prec: Precision) -> Inputs:
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
    return Inputs(x_train, x_back, x_test, y_train, classes)


def initial_params(cfg: MpcMixedConfig, width: int, classes: int) -> dict[str, torch.Tensor]:
    """The preset initial weights of the configured network (float64)."""
    if cfg.model == "cnn":
        if width != SIDE * SIDE:
            raise ValueError(f"the cnn model takes {SIDE}x{SIDE} images, not {width} features")
        return init_cnn(cfg.channels, classes, cfg.seed)
    return init_params([width, *cfg.hidden, classes], cfg.batch_norm, cfg.seed)


def _provider(ctx: RankContext, roles: Roles, index: int) -> Provider:
    """Party 0 draws its material from the dealer's seed; party 1 draws its shares of the
    masks from a seed of its own and receives the rest."""
    seed = receive_seed(ctx.comm, roles.dealer)
    if index == 0:
        return SeededProvider(seed)
    return FetchingProvider(ctx.comm, roles.dealer, seed)


def compute(ctx: RankContext, roles: Roles) -> dict[str, Any]:
    """The compute role: open the link to the other compute party, then train over it."""
    cfg = job_config(ctx)
    prec = precision_of(cfg)
    index = roles.compute.index(ctx.rank)
    peer, fell_back = open_link(ctx.comm, index, roles.compute[1 - index], cfg.link)
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
    # what went over the direct link, beside the communicator's own accounting
    result["direct_link_bytes_sent"] = peer.stats.bytes_sent if isinstance(peer, DirectPeer) else 0
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
    eng = Engine(index, peer, provider, cfg.comparison, cfg.truncation)
    inputs = receive_inputs(ctx, roles, prec)
    plain = initial_params(cfg, inputs.x_train.shape[1], inputs.classes)
    model = SharedMlp.from_plain(eng, plain, prec.backward, cfg.batch_norm, cfg.seed)
    n_train = inputs.x_train.shape[0]
    total = data.batches_per_epoch(n_train, cfg.batch_size) * cfg.epochs
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
            steps.append(
                _one_step(ctx, roles, eng, prec, model, inputs, idx, cfg, step, step + 1 < total)
            )
            step += 1
        if step >= total or ctx.stop.is_set() or (epoch + 1) % cfg.eval_every_epochs == 0:
            _evaluate(ctx, roles, eng, prec, model, inputs, step)
            ctx.save_checkpoint(step, {"params": model.params, "epoch": epoch + 1, "step": step})
            provider.checkpoint(step)
        if step >= total or ctx.stop.is_set():
            break
    send_to_holders(ctx, roles, index, Message.DONE, step, torch.empty(0))
    revealed = reveal_model(ctx, roles, index, model.params, prec)
    provider.close()
    result = _summary(steps, cfg)
    if revealed is not None:
        result["model"] = revealed
    return result


def _one_step(
    ctx: RankContext,
    roles: Roles,
    eng: Engine,
    prec: Precision,
    model: SharedMlp,
    inputs: Inputs,
    idx: torch.Tensor,
    cfg: MpcMixedConfig,
    step: int,
    more: bool,
) -> dict[str, float]:
    """One training step; ``more``: another follows, whose material is fetched during this one."""
    index = eng.index
    step_fn = cnn_train_step if cfg.model == "cnn" else train_step
    with ctx.harness.turn(index, eng.peer.barrier):
        t0 = time.perf_counter()
        eng.provider.begin(Phase.TRAIN, ahead=more)
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
        "whole_step_time_s": t2 - t0,
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
        send_to_holders(ctx, roles, index, Message.LOSS, step, probs)
    else:
        send_to_holders(ctx, roles, index, Message.STEP, step, torch.empty(0))
    stats = ctx.comm.stats
    ctx.reporter.metrics(
        step,
        {
            "whole_step_time_s": record["whole_step_time_s"],
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
    inputs: Inputs,
    step: int,
) -> None:
    forward_fn = cnn_forward if job_config(ctx).model == "cnn" else forward
    with ctx.harness.turn(eng.index, eng.peer.barrier):
        eng.provider.begin(Phase.EVAL)
        probs = forward_fn(eng, prec, model, inputs.x_test)
        eng.provider.end()
    send_to_holders(ctx, roles, eng.index, Message.EVAL, step, probs)


def _summary(steps: list[dict[str, float]], cfg: MpcMixedConfig) -> dict[str, Any]:
    """Per-step numbers over the steady state (the first step records the dealer schedule):
    medians of times, means of traffic."""
    steady = steps[1:] if len(steps) > 1 else steps
    out: dict[str, Any] = {"steps": len(steps), "mode": cfg.mode}
    for key in ("whole_step_time_s", "step_time_s", "step_cpu_s", "offline_time_s"):
        out[key] = statistics.median(s[key] for s in steady) if steady else float("nan")
    for key in ("online_bytes", "online_rounds", "link_online_bytes"):
        if all(key in s for s in steady):
            out[key] = sum(s[key] for s in steady) / max(len(steady), 1)
    if len(steps) > 1:
        out["offline_bytes"] = (steps[-1]["offline_bytes"] - steps[0]["offline_bytes"]) / (
            len(steps) - 1
        )
    return out
