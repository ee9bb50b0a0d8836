"""The inter-node all-reduce of a device's slice in quantised chunks, with error feedback.

Among the same-number devices of all nodes (``ranks``), a piece of the slice is cut into one
chunk per member; member ``j`` owns chunk ``j``. Each member

1. adds its residual (what quantisation left out of this piece last time) to the piece,
   quantises each chunk and keeps the new residual, ``piece - dequantised``;
2. sends chunk ``j`` to member ``j`` and receives every member's quantised copy of its own
   chunk: it sums the dequantised copies in fp32 (quantised values are never summed);
3. adds its owner residual to that sum, quantises it once more (keeping the owner residual)
   and sends it to every member, which all write the same dequantised sum into the piece.

So what a step applies is the true sum of the gradients plus last step's residuals minus this
step's: summed over steps, the updates equal the summed gradients up to the last residuals.
Each member sends ``2 (n - 1) / n`` of the piece at ``bits`` per element plus a 4-byte scale
per block, against ``2 (n - 1) / n`` at 32 bits for the full-precision ring.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from tessera_ml.algorithms.hier_sync.quantize import Codec
from tessera_ml.algorithms.hier_sync.slicing import even_bounds
from tessera_ml.comm.base import Communicator, Work


class CompressedAllReduce:
    """Quantised all-reduce of pieces of one device's slice; owns the slice's residuals."""

    def __init__(
        self,
        comm: Communicator,
        ranks: Sequence[int],
        codec: Codec,
        slice_numel: int,
        device: torch.device,
    ) -> None:
        self.comm = comm
        self.ranks = list(ranks)
        self.codec = codec
        self.position = self.ranks.index(comm.rank)
        self.residual = torch.zeros(slice_numel, dtype=torch.float32, device=device)
        """What quantising this member's contribution left out, per element of its slice."""
        self.owner_residual = torch.zeros(slice_numel, dtype=torch.float32, device=device)
        """What quantising the sums this member owns left out (zero outside its chunks)."""
        self.sent_bytes = 0

    def state_bytes(self) -> int:
        return 2 * self.residual.numel() * self.residual.element_size()

    def all_reduce(self, piece: torch.Tensor, offset: int) -> None:
        """Sum ``piece`` (elements ``offset …`` of the slice) over the members, in place."""
        n = len(self.ranks)
        if n == 1 or piece.numel() == 0:
            return
        length = piece.numel()
        bounds = even_bounds(length, n, self.codec.block)
        chunks = [(bounds[j], bounds[j + 1]) for j in range(n)]
        residual = self.residual[offset : offset + length]
        piece.add_(residual)
        wires = [self.codec.encode(piece[a:b]) for a, b in chunks]
        for (a, b), wire in zip(chunks, wires, strict=True):
            residual[a:b] = piece[a:b] - self.codec.decode(wire, b - a)

        p = self.position
        a, b = chunks[p]
        copies = self._exchange(
            {j: wires[j] for j in range(n) if j != p},
            {i: self.codec.wire_bytes(b - a) for i in range(n) if i != p},
        )
        mine = piece[a:b]
        self.codec.decode(wires[p], b - a, out=mine)
        for wire in copies.values():
            mine.add_(self.codec.decode(wire, b - a))

        owner = self.owner_residual[offset + a : offset + b]
        mine.add_(owner)
        reduced = self.codec.encode(mine)
        applied = self.codec.decode(reduced, b - a)
        torch.sub(mine, applied, out=owner)
        mine.copy_(applied)
        gathered = self._exchange(
            {j: reduced for j in range(n) if j != p},
            {i: self.codec.wire_bytes(chunks[i][1] - chunks[i][0]) for i in range(n) if i != p},
        )
        for i, wire in gathered.items():
            start, end = chunks[i]
            self.codec.decode(wire, end - start, out=piece[start:end])

    def _exchange(
        self, outgoing: dict[int, torch.Tensor], incoming_bytes: dict[int, int]
    ) -> dict[int, torch.Tensor]:
        """Send ``outgoing[j]`` to member ``j`` while receiving ``incoming_bytes[i]`` from ``i``."""
        device = self.residual.device
        received = {
            i: torch.empty(size, dtype=torch.uint8, device=device)
            for i, size in incoming_bytes.items()
        }
        works: list[Work] = []
        for i, buffer in received.items():
            if buffer.numel():
                works.append(self.comm.irecv(buffer, self.ranks[i]))
        for j, wire in outgoing.items():
            if wire.numel():
                works.append(self.comm.isend(wire, self.ranks[j]))
                self.sent_bytes += wire.numel()
        for work in works:
            work.wait()
        return received
