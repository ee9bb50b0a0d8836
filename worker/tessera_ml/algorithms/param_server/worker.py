"""The worker role: reads its share of the click log, pulls rows, trains the dense tower.

Per step: read the next step's batch and group its distinct ids by server (``grouping``) while
the servers answer this step's PULL; forward and backward (autograd sums each unique id's
gradient); send each server its part of the per-id gradients together with the next step's ids
(PUSH_PULL), so the servers apply the step and answer the next pull while the workers
all-reduce the dense gradient and step the dense tower. In async mode the pulls of the next
``staleness`` steps are already in flight while a step computes.

Requests go out from the worker's own thread. In sync mode, with one pull in flight, the worker
reads each reply when it needs the rows, before it sends its next request, so a server never
waits on a worker that is not reading; in async mode, with more in flight, replies are read as
they arrive, by a receive posted with the request.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from tessera_ml.algorithms.param_server.data import open_source
from tessera_ml.algorithms.param_server.grouping import Grouped, group_by_shard
from tessera_ml.algorithms.param_server.metrics import auc
from tessera_ml.algorithms.param_server.model import dense_tower, forward
from tessera_ml.algorithms.param_server.spec import ParamServerConfig
from tessera_ml.algorithms.param_server.wire import (
    UNIQUE,
    Header,
    Kind,
    push_pull_payload,
    send_request,
)
from tessera_ml.comm.base import Communicator, Group, Work
from tessera_ml.context import RankContext


@dataclass
class Pull:
    """Rows requested from every server for one set of grouped keys, possibly on their way.

    Each server's reply lands in its span of ``rows``: read as it arrives (``eager``, a receive
    posted with the request) or, in sync mode, on the worker's own thread when the
    rows are needed, which spares a hand-off between threads per server and step.
    """

    comm: Communicator
    keys: Grouped
    servers: list[int]
    rows: torch.Tensor
    works: list[Work]
    later: list[tuple[int, torch.Tensor]]

    def wait(self) -> torch.Tensor:
        for w in self.works:
            w.wait()
        for server, into in self.later:
            self.comm.recv(into, server)
        self.works, self.later = [], []
        return self.rows


@dataclass
class Pushed:
    """The gradients of a step's pulled rows, to travel with the next PULL."""

    pull: Pull
    step: int
    grads: torch.Tensor


def request_rows(
    comm: Communicator,
    servers: list[int],
    keys: Grouped,
    *,
    kind: Kind,
    step: int,
    dim: int,
    unique: bool,
    eager: bool,
    pushed: Pushed | None = None,
) -> Pull:
    """Send each server the keys it owns (after its part of ``pushed``, in the same message)
    and post or note the receive of its reply."""
    flags = UNIQUE if unique else 0
    rows = torch.empty((keys.keys.numel(), dim), dtype=torch.float32)
    works: list[Work] = []
    later: list[tuple[int, torch.Tensor]] = []
    done = pushed.pull.keys.spans() if pushed is not None else []
    for s, (server, (lo, hi)) in enumerate(zip(servers, keys.spans(), strict=True)):
        mine = keys.keys[lo:hi]
        if pushed is None:
            send_request(comm, server, Header(kind, step, hi - lo, flags), mine)
        else:
            assert kind == Kind.PULL
            done_lo, done_hi = done[s]
            header = Header(Kind.PUSH_PULL, pushed.step, done_hi - done_lo, flags, step, hi - lo)
            payload = push_pull_payload(mine, pushed.grads[done_lo:done_hi])
            send_request(comm, server, header, payload)
        if hi > lo:
            if eager:
                works.append(comm.irecv(rows[lo:hi], server))
            else:
                later.append((server, rows[lo:hi]))
    return Pull(comm, keys, servers, rows, works, later)


def push_grads(comm: Communicator, pull: Pull, step: int, grads: torch.Tensor) -> None:
    for server, (lo, hi) in zip(pull.servers, pull.keys.spans(), strict=True):
        send_request(comm, server, Header(Kind.PUSH, step, hi - lo), grads[lo:hi])


@dataclass
class Ids:
    """One step's data before its rows are requested: the keys to pull and how to lay them out."""

    keys: Grouped
    labels: torch.Tensor
    shape: tuple[int, int]


@dataclass
class Batch:
    """A step's data with its rows requested."""

    ids: Ids
    pull: Pull


class Worker:
    def __init__(self, ctx: RankContext, servers: list[int], group: Group) -> None:
        config = ctx.config
        assert isinstance(config, ParamServerConfig)
        self.ctx, self.config, self.servers, self.group = ctx, config, servers, group
        self.index = group.index(ctx.rank)
        self.source = open_source(config, ctx.slot.dataset, self.index, group.size, ctx.data_root)
        self.device = ctx.device
        self.model = dense_tower(self.source.num_fields, config.dim, config.hidden, config.seed)
        self.model.to(self.device)
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=config.dense_lr)
        self.params = [p for p in self.model.parameters()]
        # async keeps several pulls in flight: the worker sends requests before it reads the
        # replies to earlier ones, so those are read as they arrive
        self.eager = config.mode == "async"

    def read_ids(self, step: int) -> Ids:
        """The step's batch, its ids grouped by server (each once, with ``dedup``)."""
        ids, labels = self.source.train_batch(step)
        keys = group_by_shard(ids, len(self.servers), distinct=self.config.dedup)
        return Ids(keys, labels.to(self.device), (ids.shape[0], ids.shape[1]))

    def pull(self, step: int, ids: Ids, pushed: Pushed | None = None) -> Batch:
        pull = request_rows(
            self.ctx.comm,
            self.servers,
            ids.keys,
            kind=Kind.PULL,
            step=step,
            dim=self.config.dim,
            unique=self.config.dedup,
            eager=self.eager,
            pushed=pushed,
        )
        return Batch(ids, pull)

    def backward(self, batch: Batch) -> tuple[torch.Tensor, torch.Tensor]:
        """Forward and backward; returns the loss and the gradient of every pulled row."""
        # rows arrive from the servers in host memory; the dense tower runs on the rank's device
        leaf = batch.pull.wait().to(self.device).requires_grad_(True)
        data = batch.ids
        inverse = data.keys.inverse.to(self.device)
        # on the CPU, index_select's backward (one index_add, in order) is several times
        # cheaper than indexing's; on a GPU index_add sums with atomics, and indexing keeps a
        # step's gradients the same bits in every run
        emb = leaf.index_select(0, inverse) if leaf.device.type == "cpu" else leaf[inverse]
        logits = forward(
            self.model, emb.view(*data.shape, self.config.dim), self.config.interactions
        )
        loss = F.binary_cross_entropy_with_logits(logits, data.labels)
        self.optimizer.zero_grad(set_to_none=False)
        loss.backward()
        assert leaf.grad is not None
        return loss.detach(), leaf.grad.cpu()

    def step_dense(self, loss: torch.Tensor, stop: bool) -> tuple[float, bool]:
        """All-reduce the dense gradient (with the loss and the stop flag) and step the dense
        tower; returns the mean loss over workers and whether any worker stops."""
        flat = torch.cat(
            [p.grad.flatten() for p in self.params if p.grad is not None]
            + [loss.view(1), torch.tensor([float(stop)], device=self.device)]
        )
        self.ctx.comm.all_reduce(flat, group=self.group)
        offset = 0
        for p in self.params:
            assert p.grad is not None
            n = p.numel()
            p.grad.copy_(flat[offset : offset + n].view_as(p)).div_(self.group.size)
            offset += n
        self.optimizer.step()
        return float(flat[-2]) / self.group.size, bool(flat[-1] > 0)

    def evaluate(self, step: int, inflight: Iterable[Batch] = ()) -> dict[str, float]:
        """AUC and loss over the held-out samples, split among the workers. The rows of the
        pulls ``inflight`` are taken first: a server answers the LOOKUP after them."""
        for batch in inflight:
            batch.pull.wait()
        ids, labels, truth = self.source.test_set()
        keys = group_by_shard(ids, len(self.servers))
        pull = request_rows(
            self.ctx.comm,
            self.servers,
            keys,
            kind=Kind.LOOKUP,
            step=step,
            dim=self.config.dim,
            unique=True,
            eager=False,
        )
        emb = pull.wait().to(self.device).index_select(0, keys.inverse.to(self.device))
        emb = emb.view(*ids.shape, self.config.dim)
        labels = labels.to(self.device)
        truth = None if truth is None else truth.to(self.device)
        with torch.no_grad():
            scores = forward(self.model, emb, self.config.interactions)
        local = torch.stack([scores, labels, scores if truth is None else truth])
        gathered = torch.cat(self.ctx.comm.all_gather(local, group=self.group), dim=1).cpu()
        scores, labels = gathered[0], gathered[1]
        if labels.numel() == 0 or labels.min() == labels.max():
            return {}
        out = {
            "auc": auc(scores, labels),
            "eval_loss": float(F.binary_cross_entropy_with_logits(scores, labels)),
        }
        if truth is not None:
            out["ground_truth_auc"] = auc(gathered[2], labels)
        return out

    def state(self, step: int) -> dict[str, Any]:
        return {
            "step": step,
            "model": {k: v.cpu() for k, v in self.model.state_dict().items()},
            "optimizer": self.optimizer.state_dict(),
        }

    def restore(self, state: dict[str, Any]) -> int:
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        return int(state["step"])


def run_worker(ctx: RankContext, servers: list[int], group: Group) -> dict[str, Any]:
    config = ctx.config
    assert isinstance(config, ParamServerConfig)
    worker = Worker(ctx, servers, group)
    resumed = ctx.load_checkpoint()
    start = worker.restore(resumed) if resumed is not None else 0
    ahead = config.staleness if config.mode == "async" else 0
    inflight: deque[Batch] = deque(
        worker.pull(s, worker.read_ids(s))
        for s in range(start, min(start + ahead + 1, config.steps))
    )
    lead = group.index(ctx.rank) == 0
    step, loss = start, float("nan")
    # a stop is agreed in one step's reduction and ends training after the next step, whose
    # pull is already out by then: no row is made for a step that never trains
    last, stopped = False, False
    samples_per_step = config.batch_size * group.size
    evaluation: dict[str, float] = {}
    started = time.perf_counter()
    while step < config.steps and not stopped:
        t0 = time.perf_counter()
        following = step + ahead + 1
        # read while the servers answer this step's pull
        more = following < config.steps and not last
        upcoming = worker.read_ids(following) if more else None
        batch = inflight.popleft()
        step_loss, grads = worker.backward(batch)
        # the push and the next pull go out together, so the servers apply and answer while
        # the workers reduce the dense gradient
        if upcoming is not None:
            inflight.append(worker.pull(following, upcoming, Pushed(batch.pull, step, grads)))
        else:
            push_grads(ctx.comm, batch.pull, step, grads)
        loss, stopping = worker.step_dense(step_loss, ctx.stop.is_set())
        stopped, last = last, stopping
        step += 1
        elapsed = time.perf_counter() - t0
        stats = ctx.comm.stats
        values = {
            "step_time_s": elapsed,
            "bytes_sent": stats.sent,
            "bytes_received": stats.received,
        }
        if lead:
            values |= {"loss": loss, "throughput": samples_per_step / elapsed}
        if config.eval_every and step % config.eval_every == 0 and step < config.steps:
            evaluation = worker.evaluate(step, inflight)
            if lead:
                values |= evaluation
        ctx.reporter.metrics(step - 1, values)
        ctx.reporter.progress(step, config.steps)
        if config.checkpoint_every and step % config.checkpoint_every == 0:
            ctx.save_checkpoint(step, worker.state(step))
    train_time = time.perf_counter() - started
    for batch in inflight:
        batch.pull.wait()
    if config.eval_samples >= group.size or ctx.slot.dataset is not None:
        evaluation = worker.evaluate(step)
        if lead and evaluation:
            ctx.reporter.metrics(step, evaluation)
    for server in servers:
        send_request(ctx.comm, server, Header(Kind.STOP, step, 0), None)
    ctx.save_checkpoint(step, worker.state(step))
    ctx.reporter.flush()
    trained = step - start
    return {
        "role": "worker",
        "start_step": start,
        "steps": step,
        "loss": loss,
        **evaluation,
        "samples_per_s": trained * samples_per_step / train_time if train_time > 0 else 0.0,
        "bytes_sent": ctx.comm.stats.sent,
        "bytes_received": ctx.comm.stats.received,
    }
