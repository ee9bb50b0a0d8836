"""A dynamic embedding table: int64 id -> embedding row plus optimizer state, grown on demand.

Rows live in ``BlockRows`` (never pre-sized to the id space). An open-addressing hash index with
linear probing maps ids to rows; lookups and inserts run a whole batch of ids at once with tensor
operations, one probe round per loop iteration rather than one Python step per id.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from tessera_ml.algorithms.param_server.blocks import BlockRows
from tessera_ml.algorithms.param_server.hashing import init_rows, salted

_EMPTY = -1
_MAX_LOAD = 0.7
_INDEX_SALT = 0x1DE


@dataclass
class TableExport:
    """Exactly the rows a table holds: ids [n], params [n, dim], optimizer state [n, slots]."""

    ids: torch.Tensor
    params: torch.Tensor
    state: torch.Tensor


class DynamicTable:
    """Embedding rows of width ``dim + slots`` (parameters, then optimizer state) keyed by id.

    A new id gets ``init_rows(id, dim, seed, init_scale)`` and zero state, so its first value
    does not depend on when or where it was created.
    """

    def __init__(
        self,
        *,
        dim: int,
        slots: int,
        seed: int,
        init_scale: float = 0.05,
        block_rows: int = 16384,
        min_capacity: int = 1024,
        device: torch.device | None = None,
    ) -> None:
        if dim <= 0:
            raise ValueError(f"dim must be positive, got {dim}")
        self.dim = dim
        self.slots = slots
        self.seed = seed
        self.init_scale = init_scale
        self.device = device or torch.device("cpu")
        self.rows = BlockRows(
            dim + slots, block_rows=block_rows, dtype=torch.float32, device=device
        )
        self.ids = BlockRows(None, block_rows=block_rows, dtype=torch.int64, device=device)
        self.num_rows = 0
        capacity = 1 << max(min_capacity - 1, 1).bit_length()
        self.index = torch.full((capacity,), _EMPTY, dtype=torch.int32, device=self.device)

    # ---- sizes ---------------------------------------------------------------------------

    @property
    def width(self) -> int:
        return self.dim + self.slots

    @property
    def resident_bytes(self) -> int:
        """Every byte the table holds: row blocks, id blocks and the hash index."""
        return self.rows.nbytes + self.ids.nbytes + self.index.numel() * self.index.element_size()

    @property
    def row_payload_bytes(self) -> int:
        return self.width * 4

    # ---- the hash index -------------------------------------------------------------------

    def _home(self, keys: torch.Tensor) -> torch.Tensor:
        return salted(keys, _INDEX_SALT) & (self.index.numel() - 1)

    def _place(self, keys: torch.Tensor, rows: torch.Tensor) -> None:
        """Enter ids known to be absent (and unique) into the index."""
        mask = self.index.numel() - 1
        pos = self._home(keys)
        pending = torch.arange(keys.numel(), device=self.device)
        while pending.numel():
            p = pos[pending]
            empty = self.index[p] < 0
            candidates, at = pending[empty], p[empty]
            slot, inverse = torch.unique(at, return_inverse=True)
            first = torch.full_like(slot, keys.numel()).scatter_reduce_(
                0, inverse, candidates, "amin"
            )
            self.index[slot] = rows[first].to(torch.int32)
            placed = torch.zeros(keys.numel(), dtype=torch.bool, device=self.device)
            placed[first] = True
            pending = pending[~placed[pending]]
            pos[pending] = (pos[pending] + 1) & mask

    def _grow_index(self, num_rows: int) -> None:
        capacity = self.index.numel()
        while num_rows > _MAX_LOAD * capacity:
            capacity *= 2
        if capacity == self.index.numel():
            return
        self.index = torch.full((capacity,), _EMPTY, dtype=torch.int32, device=self.device)
        if self.num_rows:
            self._place(self.ids.head(self.num_rows), torch.arange(self.num_rows))

    def _probe(self, keys: torch.Tensor, *, insert: bool) -> torch.Tensor:
        """Row of each unique id; absent ids are created when ``insert``, else -1."""
        n = keys.numel()
        out = torch.full((n,), _EMPTY, dtype=torch.int64, device=self.device)
        if insert:
            self._grow_index(self.num_rows + n)
        mask = self.index.numel() - 1
        pos = self._home(keys)
        pending = torch.arange(n, device=self.device)
        while pending.numel():
            p = pos[pending]
            row = self.index[p].to(torch.int64)
            occupied = row >= 0
            seen, seen_rows = pending[occupied], row[occupied]
            hit = self.ids.gather(seen_rows) == keys[seen]
            out[seen[hit]] = seen_rows[hit]
            retry = seen[~hit]
            pos[retry] = (pos[retry] + 1) & mask
            if insert:
                free, at = pending[~occupied], p[~occupied]
                slot, inverse = torch.unique(at, return_inverse=True)
                first = torch.full_like(slot, n).scatter_reduce_(0, inverse, free, "amin")
                new_rows = self._append(keys[first])
                self.index[slot] = new_rows.to(torch.int32)
                out[first] = new_rows
                retry = torch.cat([retry, free[out[free] < 0]])
            pending = retry
        return out

    def _append(self, keys: torch.Tensor) -> torch.Tensor:
        """Create rows for new ids at the end of the block storage."""
        start, count = self.num_rows, keys.numel()
        rows = torch.arange(start, start + count, device=self.device)
        if count == 0:
            return rows
        self.rows.reserve(start + count)
        self.ids.reserve(start + count)
        self.ids.scatter(rows, keys)
        values = torch.zeros((count, self.width), dtype=torch.float32, device=self.device)
        values[:, : self.dim] = init_rows(keys, self.dim, self.seed, self.init_scale)
        self.rows.scatter(rows, values)
        self.num_rows += count
        return rows

    # ---- public operations ----------------------------------------------------------------

    def find(self, unique_ids: torch.Tensor) -> torch.Tensor:
        """Row of each (unique) id, -1 where absent."""
        return self._probe(unique_ids, insert=False)

    def find_or_insert(self, unique_ids: torch.Tensor) -> torch.Tensor:
        """Row of each (unique) id, creating the absent ones."""
        return self._probe(unique_ids, insert=True)

    def embeddings(self, rows: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        """Embedding part of the given rows; for row -1 the id's initial value, uncreated."""
        present = rows >= 0
        if bool(present.all()):
            return self.rows.gather(rows)[:, : self.dim]
        out = init_rows(ids, self.dim, self.seed, self.init_scale)
        if bool(present.any()):
            out[present] = self.rows.gather(rows[present])[:, : self.dim]
        return out

    def read(self, rows: torch.Tensor) -> torch.Tensor:
        return self.rows.gather(rows)

    def write(self, rows: torch.Tensor, values: torch.Tensor) -> None:
        self.rows.scatter(rows, values)

    def export(self) -> TableExport:
        """The ids and rows actually held, as tensors of exactly that size."""
        full = self.rows.head(self.num_rows)
        return TableExport(
            ids=self.ids.head(self.num_rows),
            params=full[:, : self.dim].clone(),
            state=full[:, self.dim :].clone(),
        )

    def load(self, saved: TableExport) -> None:
        """Replace the contents with exported rows, in their exported order."""
        if saved.params.shape[1:] != (self.dim,) or saved.state.shape[1:] != (self.slots,):
            raise ValueError(
                f"saved rows are {tuple(saved.params.shape)}/{tuple(saved.state.shape)}, "
                f"the table holds dim {self.dim} with {self.slots} optimizer slots"
            )
        self.rows.blocks.clear()
        self.ids.blocks.clear()
        self.num_rows = 0
        self.index = torch.full_like(self.index, _EMPTY)
        self._grow_index(saved.ids.numel())
        rows = self._append(saved.ids)
        self.rows.scatter(rows, torch.cat([saved.params, saved.state], dim=1))
        self._place(saved.ids, rows)

    def keep(self, mask: torch.Tensor) -> int:
        """Drop the rows where ``mask`` is False (compacting storage); returns rows dropped."""
        saved = self.export()
        kept = TableExport(saved.ids[mask], saved.params[mask], saved.state[mask])
        self.load(kept)
        return saved.ids.numel() - kept.ids.numel()
