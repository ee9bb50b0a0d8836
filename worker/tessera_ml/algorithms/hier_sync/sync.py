"""One device's side of the hierarchical synchronisation, bucket by bucket.

Per step (``begin_step`` .. backward .. ``finish_gradients`` .. ``apply``):

1. as each bucket's gradients are ready, an *intra* thread reduce-scatters the bucket among
   the node's devices (piece ``d`` of the bucket ends summed at device ``d``; over shared
   memory where the devices can share it, ``node_ops.py``), and hands it to
2. an *inter* thread, which all-reduces that piece with the devices of the same number in the
   other nodes (in full precision, or quantised with error feedback: ``compressed``) and
   divides by the world size: the device now holds the global mean gradient of its slice only;
3. the optimizer, built over the device's pieces only, updates the slice's parameters (its
   state exists only for the slice);
4. the node's devices all-gather the updated pieces, rebuilding the full parameters (over
   shared memory the node's devices update one parameter buffer, and wait for each other).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Sequence
from typing import Any, Literal

import torch

from tessera_ml.algorithms.hier_sync import ring
from tessera_ml.algorithms.hier_sync.compressed import CompressedAllReduce
from tessera_ml.algorithms.hier_sync.flat import FlatParams
from tessera_ml.algorithms.hier_sync.node_ops import NodeOps
from tessera_ml.algorithms.hier_sync.quantize import Codec
from tessera_ml.algorithms.hier_sync.slicing import piece_bounds
from tessera_ml.algorithms.hier_sync.topology import Topology
from tessera_ml.comm.base import Communicator
from tessera_ml.harness import NO_HARNESS, Harness

OptimizerFactory = Callable[[list[torch.Tensor]], torch.optim.Optimizer]


class HierSync:
    def __init__(
        self,
        comm: Communicator,
        topology: Topology,
        flat: FlatParams,
        fractions: Sequence[float],
        make_optimizer: OptimizerFactory,
        *,
        align: int = 16,
        overlap: bool = True,
        compression: Codec | None = None,
        intra_node_transport: Literal["auto", "ring"] = "auto",
        harness: Harness = NO_HARNESS,
    ) -> None:
        self.comm = comm
        self.flat = flat
        self.node = topology.node_ranks(comm.rank)
        self.peers = topology.peer_ranks(comm.rank)
        self.number = topology.locate(comm.rank)[1]
        self.world_size = topology.world_size
        self.align = align
        self.bounds = [piece_bounds(s, e, fractions, align) for s, e in flat.buckets]
        self.pieces = [(b[self.number], b[self.number + 1]) for b in self.bounds]
        self.node_ops = NodeOps(comm, topology)
        if intra_node_transport == "auto":
            self.node_ops.share(flat, self.pieces)
        self.views: list[torch.Tensor] = []
        for start, end in self.pieces:
            view = flat.param.detach()[start:end]
            view.grad = flat.grad[start:end]
            self.views.append(view)
        self.optimizer = make_optimizer([v for v in self.views if v.numel()])
        sizes = [end - start for start, end in self.pieces]
        self.offsets = [sum(sizes[:b]) for b in range(len(sizes))]
        """Where each bucket's piece starts within this device's slice."""
        self.compressed = (
            CompressedAllReduce(comm, self.peers, compression, self.slice_numel, flat.grad.device)
            if compression is not None and len(self.peers) > 1
            else None
        )
        self.overlap = overlap
        self.harness = harness
        """Its ``work`` around the helper threads' reductions, ``catch_up`` as a bucket is
        ready: where a benchmark paces an emulated slower device (``Harness``)."""
        self._ready = [threading.Event() for _ in flat.buckets]
        self._done = [threading.Event() for _ in flat.buckets]
        self._errors: list[BaseException] = []
        self._watch = flat.watch(self._ready_bucket)
        self._threads: list[threading.Thread] = []
        self._intra: queue.Queue[int | None] = queue.Queue()
        self._inter: queue.Queue[int | None] = queue.Queue()
        if overlap:
            self._threads = [
                threading.Thread(target=self._guard, args=(self._intra_loop,), daemon=True),
                threading.Thread(target=self._guard, args=(self._inter_loop,), daemon=True),
            ]
            for thread in self._threads:
                thread.start()

    # sizes -------------------------------------------------------------------------------

    @property
    def slice_numel(self) -> int:
        return sum(end - start for start, end in self.pieces)

    def slice_fractions(self) -> list[float]:
        """Achieved share of the model held by each device number (after alignment)."""
        sizes = [0] * len(self.node)
        for bounds in self.bounds:
            for d in range(len(self.node)):
                sizes[d] += bounds[d + 1] - bounds[d]
        return [s / self.flat.numel for s in sizes]

    def state_bytes(self) -> int:
        """Gradient and optimizer-state memory this device holds: the reduced slice lives in
        the full-size gradient buffer, so that buffer counts whole."""
        residuals = (
            [self.compressed.residual, self.compressed.owner_residual] if self.compressed else []
        )
        return held_bytes([self.flat.grad, *optimizer_tensors(self.optimizer), *residuals])

    # one step ----------------------------------------------------------------------------

    def begin_step(self) -> None:
        self.flat.grad.zero_()
        self._watch.reset()
        for event in (*self._ready, *self._done):
            event.clear()
        if self.overlap:
            self._intra.put(0)

    def finish_gradients(self) -> None:
        """After backward: wait until this device holds its slice of the mean gradient."""
        for event in self._ready:
            event.set()
        if not self.overlap:
            for b in range(len(self.bounds)):
                self._reduce_in_node(b)
                self._reduce_across_nodes(b)
            return
        for event in self._done:
            event.wait()
        if self._errors:
            raise RuntimeError("gradient synchronisation failed") from self._errors[0]

    def apply(self) -> None:
        """Update this device's parameter slice, then rebuild the full parameters."""
        self.optimizer.step()
        self.assemble()

    def start_fresh(self) -> None:
        """Node 0's devices hand their initial slices to their peers; then each node assembles.

        Every device then starts from node 0's initial weights, even for models whose
        initialisation ignores the seed.
        """
        if len(self.peers) > 1:
            source = self.peers[0]
            pieces = [v for v in self.views if v.numel()]
            for view in pieces:
                if self.comm.rank == source:
                    works = [self.comm.isend(view, peer) for peer in self.peers[1:]]
                    for work in works:
                        work.wait()
                else:
                    self.comm.recv(view, source)
        self.assemble()

    def assemble(self) -> None:
        """All-gather every device's parameter pieces within the node."""
        self.node_ops.all_gather(self.flat.param, self.bounds)

    # checkpoints -------------------------------------------------------------------------

    def slice_state(self) -> dict[str, Any]:
        state = {
            "bounds": self.bounds,
            "number": self.number,
            "pieces": [v.detach().clone() for v in self.views],
            "optimizer": self.optimizer.state_dict(),
        }
        if self.compressed is not None:
            state["residual"] = self.compressed.residual.clone()
            state["owner_residual"] = self.compressed.owner_residual.clone()
        return state

    def load_slice_state(self, state: dict[str, Any]) -> None:
        if state["bounds"] != self.bounds or state["number"] != self.number:
            raise ValueError(
                "the checkpoint's slices do not match this job's slicing "
                f"(device {state['number']} then, {self.number} now)"
            )
        with torch.no_grad():
            for view, saved in zip(self.views, state["pieces"], strict=True):
                view.copy_(saved)
        self.optimizer.load_state_dict(state["optimizer"])
        if self.compressed is not None and "residual" in state:
            self.compressed.residual.copy_(state["residual"])
            self.compressed.owner_residual.copy_(state["owner_residual"])
        self.assemble()

    def close(self) -> None:
        self._watch.remove()
        if self._threads:
            self._intra.put(None)
            for thread in self._threads:
                thread.join(timeout=10)

    # internals ---------------------------------------------------------------------------

    def _ready_bucket(self, bucket: int) -> None:
        self.harness.catch_up()
        self._ready[bucket].set()

    def _reduce_in_node(self, bucket: int) -> None:
        self.node_ops.reduce_scatter(self.flat.grad, self.bounds[bucket])

    def _reduce_across_nodes(self, bucket: int) -> None:
        start, end = self.pieces[bucket]
        piece = self.flat.grad[start:end]
        if piece.numel():
            if self.compressed is not None:
                self.compressed.all_reduce(piece, self.offsets[bucket])
            else:
                ring.all_reduce(self.comm, self.peers, piece, self.align)
            piece.div_(self.world_size)

    def _intra_loop(self) -> None:
        while self._intra.get() is not None:
            for b in range(len(self.bounds)):
                self._ready[b].wait()
                with self.harness.work():
                    self._reduce_in_node(b)
                self._inter.put(b)
        self._inter.put(None)

    def _inter_loop(self) -> None:
        while (bucket := self._inter.get()) is not None:
            with self.harness.work():
                self._reduce_across_nodes(bucket)
            self._done[bucket].set()

    def _guard(self, loop: Callable[[], None]) -> None:
        try:
            loop()
        except BaseException as exc:
            self._errors.append(exc)
            for event in self._done:
                event.set()


def optimizer_tensors(optimizer: torch.optim.Optimizer) -> list[torch.Tensor]:
    return [v for state in optimizer.state.values() for v in state.values() if torch.is_tensor(v)]


def optimizer_state_bytes(optimizer: torch.optim.Optimizer) -> int:
    return held_bytes(optimizer_tensors(optimizer))


def held_bytes(tensors: Sequence[torch.Tensor]) -> int:
    """Bytes of the distinct storages behind ``tensors`` (a view costs its whole storage;
    a distributed tensor counts its local part)."""
    storages: dict[tuple[torch.device, int], int] = {}
    for tensor in tensors:
        local = tensor.to_local() if hasattr(tensor, "to_local") else tensor
        storage = local.untyped_storage()
        storages[(local.device, storage.data_ptr())] = storage.nbytes()
    return sum(storages.values())
