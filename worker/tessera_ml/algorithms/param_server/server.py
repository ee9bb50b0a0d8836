"""The server role: one shard of the embedding tables, served to every worker.

A PULL is answered once the updates it must see are applied: in sync mode every update of the
previous steps, in async mode all but the last ``staleness``.

- *sync*: every worker sends the same sequence of requests (one per step, then evaluations and
  STOP at the same steps), so the server reads them in rounds, one request of each worker in
  worker order on one thread, and answers the round's pulls at its end, when the step's pushes
  are all applied.
- *async*: workers run apart, so one thread per worker reads that worker's requests in order;
  the table and the step clocks sit behind one condition variable.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

import torch

from tessera_ml.algorithms.param_server.grouping import distinct
from tessera_ml.algorithms.param_server.optim import make_optimizer
from tessera_ml.algorithms.param_server.spec import ParamServerConfig
from tessera_ml.algorithms.param_server.table import TableExport
from tessera_ml.algorithms.param_server.tables import make_table
from tessera_ml.algorithms.param_server.wire import (
    UNIQUE,
    Header,
    Kind,
    WireError,
    push_pull_bytes,
    recv_header,
    split_push_pull,
)
from tessera_ml.context import RankContext

_META = 2  # eviction bookkeeping columns after the optimizer state: last step used, use count


@dataclass
class _Pull:
    ids: torch.Tensor
    rows: torch.Tensor
    inverse: torch.Tensor | None
    generation: int


@dataclass
class _Clock:
    """Which updates the shard has applied."""

    workers: list[int]
    applied: int = 0
    pushed: dict[int, int] = field(default_factory=dict)

    def reset(self, step: int) -> None:
        self.applied = step
        self.pushed = {w: step for w in self.workers}


class ShardServer:
    def __init__(self, ctx: RankContext, workers: list[int]) -> None:
        config = ctx.config
        assert isinstance(config, ParamServerConfig)
        self.ctx = ctx
        self.config = config
        self.workers = workers
        self.optimizer = make_optimizer(config.sparse_optimizer, config.sparse_lr)
        self.meta = _META if config.eviction != "none" else 0
        self.device = ctx.device
        self.table, chosen = make_table(
            dim=config.dim,
            slots=self.optimizer.slots(config.dim) + self.meta,
            seed=config.seed,
            init_scale=config.init_scale,
            block_rows=config.block_rows,
            device=ctx.device,
            prefer=config.table,
        )
        ctx.reporter.log(chosen)
        self.candidates, _ = make_table(
            dim=1, slots=0, seed=0, init_scale=0.0, device=ctx.device, prefer=config.table
        )
        self.cond = threading.Condition()
        self.clock = _Clock(workers)
        self.clock.reset(0)
        self.pending: dict[int, dict[int, tuple[torch.Tensor, torch.Tensor]]] = {}
        self.pulls: dict[tuple[int, int], _Pull] = {}
        self.created: dict[int, int] = {}
        self.generation = 0
        self.evicted = 0
        self.errors: list[BaseException] = []
        self.finished = 0

    # ---- readiness ------------------------------------------------------------------------

    def _ready(self, step: int) -> bool:
        if self.config.mode == "sync":
            return self.clock.applied >= step
        return min(self.clock.pushed.values()) >= step - self.config.staleness

    # ---- requests -------------------------------------------------------------------------

    def _pull(
        self, worker: int, header: Header, ids: torch.Tensor, *, wait: bool = True
    ) -> torch.Tensor:
        inverse = None
        unique = ids
        if not header.flags & UNIQUE:
            unique, inverse = distinct(ids)
        with self.cond:
            if not wait and not self._ready(header.step):
                raise WireError(
                    f"rank {worker} pulls step {header.step} before every worker pushed the "
                    f"steps before it"
                )
            self.cond.wait_for(lambda: self._ready(header.step))
            if header.kind == Kind.LOOKUP:
                rows = self.table.find(unique)
            else:
                rows = self._find_or_admit(unique, header.step)
                self.pulls[(worker, header.step)] = _Pull(unique, rows, inverse, self.generation)
            emb = self.table.embeddings(rows, unique)
        return emb if inverse is None else emb[inverse]

    def _find_or_admit(self, ids: torch.Tensor, step: int) -> torch.Tensor:
        before = self.table.num_rows
        if self.config.admission_count <= 1:
            rows = self.table.find_or_insert(ids)
        else:
            rows = self.table.find(ids)
            missing = (rows < 0).nonzero().squeeze(1)
            seen = self.candidates.find_or_insert(ids[missing])
            counts = self.candidates.count(seen)
            admitted = missing[counts >= self.config.admission_count]
            rows[admitted] = self.table.find_or_insert(ids[admitted])
        self.created[step] = self.created.get(step, 0) + self.table.num_rows - before
        if self.meta:
            self.table.touch(rows[rows >= 0], step)
        return rows

    def _push(self, worker: int, step: int, grads: torch.Tensor) -> None:
        with self.cond:
            pull = self.pulls.pop((worker, step))
            if pull.inverse is not None:
                summed = grads.new_zeros((pull.ids.numel(), grads.shape[1]))
                grads = summed.index_add_(0, pull.inverse, grads)
            grads = grads / len(self.workers)
            rows = pull.rows
            if pull.generation != self.generation:
                rows = self.table.find(pull.ids)
            if self.config.admission_count > 1 or pull.generation != self.generation:
                # ids not admitted, or evicted since the pull, take no update
                live = rows >= 0
                rows, grads = rows[live], grads[live]
            if self.config.mode == "sync":
                self.pending.setdefault(step, {})[worker] = (rows, grads)
                if len(self.pending[step]) == len(self.workers):
                    self._apply_step(step)
            else:
                self._apply(rows, grads)
                before = min(self.clock.pushed.values())
                self.clock.pushed[worker] = step + 1
                if min(self.clock.pushed.values()) > before:
                    self._step_done(before)
            self.cond.notify_all()

    def _apply_step(self, step: int) -> None:
        parts = self.pending.pop(step)
        rows = torch.cat([parts[w][0] for w in self.workers])
        grads = torch.cat([parts[w][1] for w in self.workers])
        unique, inverse = distinct(rows)
        summed = grads.new_zeros((unique.numel(), grads.shape[1]))
        self._apply(unique, summed.index_add_(0, inverse, grads))
        self._step_done(step)
        self.clock.applied = step + 1

    def _apply(self, rows: torch.Tensor, grads: torch.Tensor) -> None:
        if rows.numel():
            self.table.write(rows, self.optimizer.update(self.table.read(rows), grads))

    # ---- step boundaries ------------------------------------------------------------------

    def _step_done(self, step: int) -> None:
        config = self.config
        if self.meta and (step + 1) % config.evict_every == 0:
            self._evict(step)
        stats = self.ctx.comm.stats
        self.ctx.reporter.metrics(
            step,
            {
                "table_rows": self.table.num_rows,
                "rows_created": self.created.pop(step, 0),
                "resident_bytes": self.table.resident_bytes,
                "bytes_sent": stats.sent,
                "bytes_received": stats.received,
            },
        )
        if config.checkpoint_every and (step + 1) % config.checkpoint_every == 0:
            self.ctx.save_checkpoint(step + 1, self.state(step + 1))

    def _evict(self, step: int) -> None:
        saved = self.table.export()
        last, uses = saved.state[:, -2], saved.state[:, -1]
        if self.config.eviction == "ttl":
            keep = (step - last) <= self.config.ttl_steps
        else:
            keep = torch.ones_like(last, dtype=torch.bool)
            excess = self.table.num_rows - self.config.max_rows
            if excess > 0:
                by_recency = torch.argsort(last, stable=True)
                order = by_recency[torch.argsort(uses[by_recency], stable=True)]
                keep[order[:excess]] = False
        if not bool(keep.all()):
            self.evicted += self.table.keep(keep)
            self.generation += 1

    # ---- state ----------------------------------------------------------------------------

    def state(self, step: int) -> dict[str, Any]:
        saved = self.table.export()
        return {
            "step": step,
            "ids": saved.ids,
            "params": saved.params,
            "state": saved.state,
            "optimizer": self.optimizer.name,
        }

    def restore(self, state: dict[str, Any]) -> int:
        if state["optimizer"] != self.optimizer.name:
            raise ValueError(
                f"checkpoint holds {state['optimizer']} state, the job uses {self.optimizer.name}"
            )
        self.table.load(TableExport(state["ids"], state["params"], state["state"]))
        step = int(state["step"])
        self.clock.reset(step)
        return step

    # ---- the loop -------------------------------------------------------------------------

    def _take(self, worker: int) -> tuple[Header, torch.Tensor] | None:
        """Read one request of ``worker`` and apply its push; returns the PULL or LOOKUP it
        asks to answer (``None`` for a PUSH), and STOP's header with no ids."""
        comm, dim = self.ctx.comm, self.config.dim
        header = recv_header(comm, worker)
        if header.kind == Kind.STOP:
            return header, torch.empty(0, dtype=torch.int64)
        if header.kind == Kind.PUSH_PULL:
            payload = torch.empty(push_pull_bytes(header, dim), dtype=torch.uint8)
            if payload.numel():
                comm.recv(payload, worker)
            ids, grads = split_push_pull(payload, header, dim)
            self._push(worker, header.step, grads.to(self.device))
            # a copy: the step's pull record keeps its ids, not the whole payload
            return header.then(), ids.clone()
        if header.kind == Kind.PUSH:
            grads = torch.empty((header.count, dim), dtype=torch.float32)
            if header.count:
                comm.recv(grads, worker)
            self._push(worker, header.step, grads.to(self.device))
            return None
        ids = torch.empty(header.count, dtype=torch.int64)
        if header.count:
            comm.recv(ids, worker)
        return header, ids

    def _serve_worker(self, worker: int) -> None:
        try:
            while True:
                request = self._take(worker)
                if request is None:
                    continue
                header, ids = request
                if header.kind == Kind.STOP:
                    break
                self._answer(worker, header, ids)
        except BaseException as exc:
            with self.cond:
                self.errors.append(exc)
        with self.cond:
            self.finished += 1
            self.cond.notify_all()

    def _serve_rounds(self) -> None:
        """Sync mode: one request of each worker per round, then the round's answers."""
        while True:
            taken = [(w, self._take(w)) for w in self.workers]
            stops = [w for w, request in taken if request and request[0].kind == Kind.STOP]
            if stops:
                if len(stops) < len(self.workers):
                    raise WireError(f"ranks {stops} stopped while the other workers went on")
                return
            for worker, request in taken:
                if request is not None:
                    self._answer(worker, *request, wait=False)

    def _answer(self, worker: int, header: Header, ids: torch.Tensor, *, wait: bool = True) -> None:
        """A PULL or LOOKUP: reply with the rows (a PULL of no ids is recorded, not answered).
        ``wait``: for the updates the pull must see, else they must be applied already."""
        if header.count:
            rows = self._pull(worker, header, ids.to(self.device), wait=wait)
            self.ctx.comm.send(rows.cpu(), worker)
        elif header.kind == Kind.PULL:
            self._pull(worker, header, ids.to(self.device), wait=wait)

    def serve(self) -> None:
        """Serve every worker until each has sent STOP; re-raise the first failure."""
        if self.config.mode == "sync":
            self._serve_rounds()
            return
        self.finished = 0
        for w in self.workers:
            name = f"param-server-worker-{w}"
            threading.Thread(target=self._serve_worker, args=(w,), name=name, daemon=True).start()
        with self.cond:
            self.cond.wait_for(lambda: self.errors or self.finished == len(self.workers))
            if self.errors:
                raise self.errors[0]


def run_server(ctx: RankContext, workers: list[int]) -> dict[str, Any]:
    config = ctx.config
    assert isinstance(config, ParamServerConfig)
    server = ShardServer(ctx, workers)
    resumed = ctx.load_checkpoint()
    start = server.restore(resumed) if resumed is not None else 0
    server.serve()
    done = server.clock.applied if config.mode == "sync" else min(server.clock.pushed.values())
    final = server.state(done)
    ctx.save_checkpoint(done, final)
    # the shard's table at its actual size, without optimizer state: what a party serves from
    ctx.save_result("export", done, {"ids": final["ids"], "embeddings": final["params"]})
    live = server.table.num_rows
    exported = int(final["ids"].numel())
    ctx.reporter.metrics(done, {"table_rows": live, "exported_rows": exported})
    if exported != config.preset_rows:
        ctx.reporter.log(
            f"exported {exported} rows x {config.dim} (preset range: {config.preset_rows} rows)"
        )
    ctx.reporter.flush()
    return {
        "role": "server",
        "start_step": start,
        "steps": done,
        "live_rows": live,
        "exported_rows": exported,
        "exported_shape": [exported, int(final["params"].shape[1])],
        "preset_rows": config.preset_rows,
        "range_changed": exported != config.preset_rows,
        "resident_bytes": server.table.resident_bytes,
        "row_payload_bytes": (config.dim + server.optimizer.slots(config.dim)) * 4,
        "evicted_rows": server.evicted,
        "bytes_sent": ctx.comm.stats.sent,
        "bytes_received": ctx.comm.stats.received,
    }
