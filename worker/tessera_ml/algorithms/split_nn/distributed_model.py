"""The distributed model: three ordinary models and, per role, one training and evaluation step.

Every rank builds a ``DistributedModel`` the same way; its role decides what ``train_step``,
``evaluate`` and ``predict`` compute and communicate:

- ``feature``: bottom forward on its columns, activation to the consumer (middle, or label when
  there is no middle); later the gradient of that activation comes back, bottom backward, step.
- ``middle``: activations from every feature party, combine, middle forward, activation to the
  label party; the gradient comes back, middle backward, step, one gradient to each feature party.
- ``label``: activations in, (combine and middle forward when there is no middle party), top
  forward, loss on its labels, backward, step, gradient of its input back to the producer(s).

With several micro-batches the gradients of all micro-batches accumulate before the single
optimizer step; the pipelined schedule only changes when messages are posted and waited for,
not the order of any computation, so its parameters equal the sequential schedule's exactly.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from tessera_ml.algorithms.split_nn.codecs import codec
from tessera_ml.algorithms.split_nn.cut import Arrivals, CutShape, Link, recv_shape, send_shape
from tessera_ml.algorithms.split_nn.models import (
    DTYPES,
    combine,
    combined_width,
    loss_sum,
    output_width,
)
from tessera_ml.algorithms.split_nn.spec import SplitNNConfig
from tessera_ml.comm.base import Communicator
from tessera_ml.data.tabular import Task
from tessera_ml.training.pieces import make_optimizer

ModelFactory = Callable[[int], nn.Module]
"""Builds a model from its input width (known once the cut shapes are agreed)."""


@dataclass(frozen=True)
class Topology:
    rank: int
    role: str
    feature_ranks: tuple[int, ...]
    middle_rank: int | None
    label_rank: int

    @property
    def consumer_of_features(self) -> int:
        return self.middle_rank if self.middle_rank is not None else self.label_rank

    @property
    def feature_index(self) -> int:
        return self.feature_ranks.index(self.rank)


class DistributedModel:
    def __init__(
        self,
        topology: Topology,
        cfg: SplitNNConfig,
        *,
        modules: dict[str, nn.Module],
        inputs: list[Link],
        output: Link | None,
        task: Task = "classification",
    ) -> None:
        self.topology = topology
        self.task: Task = task
        self.cfg = cfg
        self.modules = modules
        self.inputs = inputs
        self.output = output
        params = [p for m in modules.values() for p in m.parameters()]
        self.optimizer = make_optimizer(cfg, params) if params else None

    @classmethod
    def connect(
        cls,
        comm: Communicator,
        topology: Topology,
        cfg: SplitNNConfig,
        *,
        bottom: nn.Module | None = None,
        bottom_width: int | None = None,
        middle: ModelFactory | None = None,
        top: ModelFactory | None = None,
        task: Task = "classification",
        device: torch.device | None = None,
    ) -> DistributedModel:
        """Agree the shapes of every cut touching this rank, then build its local models.

        ``bottom`` (with its output width) is given at a feature party; ``middle`` and ``top``
        are factories of the input width at the ranks that run them; ``task`` (the label
        party's) chooses the loss.
        """
        dtype = DTYPES[cfg.dtype]
        dev = device or torch.device("cpu")
        wire_dev = dev if getattr(comm, "backend", "gloo") == "nccl" else torch.device("cpu")

        def link(peer: int, dim: int) -> Link:
            return Link(comm, peer, dim, codec(cfg.compression), dtype, dev, wire_dev)

        def inbound(peers: tuple[int, ...]) -> list[Link]:
            shapes = [recv_shape(comm, p, dtype=cfg.dtype, codec=cfg.compression) for p in peers]
            return [link(p, s.dim) for p, s in zip(peers, shapes, strict=True)]

        t = topology
        if t.role == "feature":
            assert bottom is not None and bottom_width is not None
            consumer = t.consumer_of_features
            send_shape(comm, consumer, CutShape(bottom_width, cfg.dtype, cfg.compression))
            return cls(
                t,
                cfg,
                modules={"bottom": bottom.to(dev)},
                inputs=[],
                output=link(consumer, bottom_width),
            )
        if t.role == "middle":
            assert middle is not None
            inputs = inbound(t.feature_ranks)
            width = combined_width([lk.dim for lk in inputs], cfg.combine)
            model = middle(width).to(dev)
            out_width = output_width(model, width, dtype, dev)
            send_shape(comm, t.label_rank, CutShape(out_width, cfg.dtype, cfg.compression))
            return cls(
                t,
                cfg,
                modules={"middle": model},
                inputs=inputs,
                output=link(t.label_rank, out_width),
            )
        assert t.role == "label" and top is not None
        modules: dict[str, nn.Module] = {}
        if t.middle_rank is not None:
            inputs = inbound((t.middle_rank,))
            width = inputs[0].dim
        else:
            assert middle is not None
            inputs = inbound(t.feature_ranks)
            in_width = combined_width([lk.dim for lk in inputs], cfg.combine)
            modules["middle"] = middle(in_width).to(dev)
            width = output_width(modules["middle"], in_width, dtype, dev)
        modules["top"] = top(width).to(dev)
        return cls(t, cfg, modules=modules, inputs=inputs, output=None, task=task)

    # --- training ---------------------------------------------------------------------------

    def train_step(
        self, sizes: list[int], *, x: torch.Tensor | None = None, y: torch.Tensor | None = None
    ) -> float | None:
        """One optimizer step over a batch split into micro-batches of ``sizes`` rows.

        ``x`` is the feature party's batch, ``y`` the label party's; the middle passes neither.
        Returns the batch's mean loss at the label party, None elsewhere.
        """
        assert self.optimizer is not None or self.topology.role == "label"
        if self.optimizer is not None:
            self.optimizer.zero_grad(set_to_none=True)
        role = self.topology.role
        if role == "feature":
            assert x is not None
            self._train_feature(list(torch.split(x, sizes)))
            loss = None
        elif role == "middle":
            self._train_middle(sizes)
            loss = None
        else:
            assert y is not None
            loss = self._train_label(list(torch.split(y, sizes)), sum(sizes))
        if self.optimizer is not None:
            self.optimizer.step()
        return loss

    @property
    def pipelined(self) -> bool:
        return self.cfg.pipelined and self.cfg.micro_batches > 1

    def _train_feature(self, xs: list[torch.Tensor]) -> None:
        out, bottom = self.output, self.modules["bottom"]
        assert out is not None
        if not self.pipelined:
            for x in xs:
                h = bottom(x)
                out.send(h, blocking=True)
                h.backward(out.recv(x.shape[0]))
            return
        grads = [out.post_recv(x.shape[0]) for x in xs]
        hs = []
        for x in xs:
            h = bottom(x)
            out.send(h, blocking=False)
            hs.append(h)
        for h, g in zip(hs, grads, strict=True):
            h.backward(g.wait())
        out.flush()

    def _train_middle(self, sizes: list[int]) -> None:
        out, middle = self.output, self.modules["middle"]
        assert out is not None
        if not self.pipelined:
            for n in sizes:
                leaves = [lk.recv(n).requires_grad_() for lk in self.inputs]
                z = middle(combine(leaves, self.cfg.combine))
                out.send(z, blocking=True)
                z.backward(out.recv(n))
                self._send_input_grads(leaves, blocking=True)
            return
        self._train_middle_interleaved(sizes)

    def _train_middle_interleaved(self, sizes: list[int]) -> None:
        """Forward each micro-batch as soon as its activations are in, backward each as soon as
        its gradient is in (forwards and backwards each stay in micro-batch order, so the
        gradient sums are those of the sequential schedule)."""
        out, middle = self.output, self.modules["middle"]
        assert out is not None
        acts = [[lk.post_recv(n) for lk in self.inputs] for n in sizes]
        grads = [out.post_recv(n) for n in sizes]
        arrivals = Arrivals({"act": acts, "grad": [[g] for g in grads]})
        arrived: dict[str, set[int]] = {"act": set(), "grad": set()}
        forward: list[tuple[list[torch.Tensor], torch.Tensor]] = []
        done = 0
        while done < len(sizes):
            if done < len(forward) and done in arrived["grad"]:
                leaves, z = forward[done]
                z.backward(grads[done].wait())
                self._send_input_grads(leaves, blocking=False)
                forward[done] = ([], z.new_empty(0))
                done += 1
            elif len(forward) < len(sizes) and len(forward) in arrived["act"]:
                leaves = [p.wait().requires_grad_() for p in acts[len(forward)]]
                z = middle(combine(leaves, self.cfg.combine))
                out.send(z, blocking=False)
                forward.append((leaves, z))
            else:
                kind, index = arrivals.next()
                arrived[kind].add(index)
        arrivals.join()
        out.flush()
        for lk in self.inputs:
            lk.flush()

    def _train_label(self, ys: list[torch.Tensor], batch: int) -> float:
        pending = (
            [[lk.post_recv(y.shape[0]) for lk in self.inputs] for y in ys]
            if self.pipelined
            else None
        )
        total = 0.0
        for i, y in enumerate(ys):
            if pending is None:
                leaves = [lk.recv(y.shape[0]).requires_grad_() for lk in self.inputs]
            else:
                leaves = [p.wait().requires_grad_() for p in pending[i]]
            logits = self._label_forward(leaves)
            loss = loss_sum(logits, y, self.task) / batch
            loss.backward()
            self._send_input_grads(leaves, blocking=pending is None)
            total += float(loss.detach())
        for lk in self.inputs:
            lk.flush()
        return total

    def _label_forward(self, leaves: list[torch.Tensor]) -> torch.Tensor:
        z = combine(leaves, self.cfg.combine)
        if "middle" in self.modules:
            z = self.modules["middle"](z)
        out: torch.Tensor = self.modules["top"](z)
        return out

    def _send_input_grads(self, leaves: list[torch.Tensor], *, blocking: bool) -> None:
        for lk, leaf in zip(self.inputs, leaves, strict=True):
            assert leaf.grad is not None
            lk.send(leaf.grad, blocking=blocking)

    # --- evaluation and prediction ----------------------------------------------------------

    @torch.no_grad()
    def predict(self, sizes: list[int], *, x: torch.Tensor | None = None) -> torch.Tensor | None:
        """Forward only, in chunks of ``sizes`` rows; the logits at the label party, else None."""
        for m in self.modules.values():
            m.eval()
        try:
            return self._forward_only(sizes, x)
        finally:
            for m in self.modules.values():
                m.train()

    def _forward_only(self, sizes: list[int], x: torch.Tensor | None) -> torch.Tensor | None:
        role = self.topology.role
        if role == "feature":
            assert x is not None and self.output is not None
            for chunk in torch.split(x, sizes):
                self.output.send(self.modules["bottom"](chunk), blocking=False)
            self.output.flush()
            return None
        pending = [[lk.post_recv(n) for lk in self.inputs] for n in sizes]
        if role == "middle":
            assert self.output is not None
            for parts in pending:
                z = self.modules["middle"](combine([p.wait() for p in parts], self.cfg.combine))
                self.output.send(z, blocking=False)
            self.output.flush()
            return None
        return torch.cat([self._label_forward([p.wait() for p in parts]) for parts in pending])

    # --- state ------------------------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        return {
            "modules": {k: m.state_dict() for k, m in self.modules.items()},
            "optimizer": None if self.optimizer is None else self.optimizer.state_dict(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        modules = state["modules"]
        assert isinstance(modules, dict)
        for k, m in self.modules.items():
            m.load_state_dict(modules[k])
        if self.optimizer is not None and state["optimizer"] is not None:
            self.optimizer.load_state_dict(state["optimizer"])

    def analytic_bytes_per_step(self, batch: int) -> int:
        """Bytes this rank must send per step: its activation and input gradients, uncompressed."""
        links = self.inputs + ([self.output] if self.output is not None else [])
        elem = torch.empty(0, dtype=DTYPES[self.cfg.dtype]).element_size()
        return sum(lk.dim for lk in links) * batch * elem

    def parameters(self) -> dict[str, torch.Tensor]:
        """This rank's parameters, named ``<model>.<parameter>``."""
        return {
            f"{k}.{n}": p.detach().clone()
            for k, m in self.modules.items()
            for n, p in m.named_parameters()
        }
