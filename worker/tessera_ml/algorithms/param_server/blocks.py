"""Rows stored in fixed-size blocks allocated on demand: storage that grows without copying."""

from __future__ import annotations

import torch


class BlockRows:
    """A growable array of rows kept as a list of equally sized blocks.

    Row ``i`` lives in block ``i >> shift`` at offset ``i & (block_rows - 1)``. Blocks are
    allocated only when a row beyond the current ones is needed, so memory follows the number of
    rows actually created, never a preset id range, and existing rows are never moved.
    ``width=None`` stores one scalar per row. ``zeroed=False`` leaves new blocks unwritten,
    for owners that write every row they create.
    """

    def __init__(
        self,
        width: int | None,
        *,
        block_rows: int,
        dtype: torch.dtype,
        device: torch.device | None = None,
        zeroed: bool = True,
    ) -> None:
        if block_rows <= 0 or block_rows & (block_rows - 1):
            raise ValueError(f"block_rows must be a power of two, got {block_rows}")
        self.width = width
        self.block_rows = block_rows
        self.shift = block_rows.bit_length() - 1
        self.dtype = dtype
        self.device = device or torch.device("cpu")
        self.zeroed = zeroed
        self.blocks: list[torch.Tensor] = []

    @property
    def capacity(self) -> int:
        return len(self.blocks) * self.block_rows

    @property
    def nbytes(self) -> int:
        return sum(b.numel() * b.element_size() for b in self.blocks)

    def _row_shape(self) -> tuple[int, ...]:
        return () if self.width is None else (self.width,)

    def reserve(self, num_rows: int) -> None:
        """Allocate blocks until ``num_rows`` rows fit."""
        while self.capacity < num_rows:
            shape = (self.block_rows, *self._row_shape())
            make = torch.zeros if self.zeroed else torch.empty
            self.blocks.append(make(shape, dtype=self.dtype, device=self.device))

    def trim(self, num_rows: int) -> None:
        """Release the blocks past those that ``num_rows`` rows need."""
        del self.blocks[-(-num_rows // self.block_rows) :]

    def _by_block(self, rows: torch.Tensor) -> list[tuple[int, torch.Tensor]]:
        """Positions into ``rows`` grouped by block, as (block, positions) pairs."""
        if len(self.blocks) == 1:
            return [(0, torch.arange(rows.numel(), device=rows.device))]
        block = rows >> self.shift
        order = torch.argsort(block)
        counts = torch.bincount(block, minlength=len(self.blocks)).tolist()
        groups: list[tuple[int, torch.Tensor]] = []
        start = 0
        for b, count in enumerate(counts):
            if count:
                groups.append((b, order[start : start + count]))
                start += count
        return groups

    def gather(self, rows: torch.Tensor, columns: int | None = None) -> torch.Tensor:
        """Copies of the given rows (int64 indices below ``capacity``), or their first columns."""
        shape = self._row_shape() if columns is None else (columns,)
        out = torch.empty((rows.numel(), *shape), dtype=self.dtype, device=self.device)
        offsets = rows & (self.block_rows - 1)
        for b, pos in self._by_block(rows):
            block = self.blocks[b] if columns is None else self.blocks[b][:, :columns]
            out[pos] = block[offsets[pos]]
        return out

    def scatter(self, rows: torch.Tensor, values: torch.Tensor) -> None:
        """Overwrite the given rows (unique indices) with ``values``."""
        offsets = rows & (self.block_rows - 1)
        for b, pos in self._by_block(rows):
            self.blocks[b][offsets[pos]] = values[pos]

    def write_range(self, start: int, values: torch.Tensor) -> None:
        """Overwrite rows ``start .. start + len(values) - 1`` (already reserved); values of
        fewer columns than ``width`` overwrite the first columns only."""
        done = 0
        while done < values.shape[0]:
            row = start + done
            block, offset = row >> self.shift, row & (self.block_rows - 1)
            take = min(self.block_rows - offset, values.shape[0] - done)
            target = self.blocks[block][offset : offset + take]
            if values.dim() == 2:
                target = target[:, : values.shape[1]]
            target.copy_(values[done : done + take])
            done += take

    def head(self, num_rows: int) -> torch.Tensor:
        """Rows ``0 .. num_rows-1`` as one new contiguous tensor (for export)."""
        if num_rows == 0:
            return torch.empty((0, *self._row_shape()), dtype=self.dtype, device=self.device)
        needed = -(-num_rows // self.block_rows)
        return torch.cat(self.blocks[:needed])[:num_rows].clone()
