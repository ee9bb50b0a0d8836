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
_MAX_LOAD = 0.5
_MAX_WINDOW = 16
_ID_BLOCK_FACTOR = 16
_INDEX_SALT = 0x1DE


@dataclass
class TableExport:
    """Exactly the rows a table holds: ids [n], params [n, dim], optimizer state [n, slots]."""

    ids: torch.Tensor
    params: torch.Tensor
    state: torch.Tensor


class DynamicTable:
    """The table on torch operations alone (any device).

    Embedding rows of width ``dim + slots`` (parameters, then optimizer state) keyed by id.

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
        self.backend = f"torch ({self.device.type})"
        self.rows = BlockRows(
            dim + slots, block_rows=block_rows, dtype=torch.float32, device=device
        )
        # ids are 8 bytes a row: larger blocks keep the probe loop short at little slack
        self.ids = BlockRows(
            None, block_rows=block_rows * _ID_BLOCK_FACTOR, dtype=torch.int64, device=device
        )
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

    def _window(self, pos: torch.Tensor, width: int) -> torch.Tensor:
        """The ``width`` consecutive slots starting at each position: [n, width]."""
        offsets = torch.arange(width, device=self.device)
        return (pos.unsqueeze(1) + offsets) & (self.index.numel() - 1)

    def _place(
        self, keys: torch.Tensor, rows: torch.Tensor, start: torch.Tensor | None = None
    ) -> None:
        """Enter ids known to be absent (and unique) into the index.

        Each round every pending id writes its row into the first empty slot of its probe
        window (widening as in ``_search``); reading the slots back tells which of the ids
        aiming at one slot won it. Ids whose window is full move on to the next window.
        ``start`` may give, per id, the first empty slot of its probe sequence when a search
        just found it.
        """
        pos = self._home(keys) if start is None else start.clone()
        rows32 = rows.to(torch.int32)
        pending = torch.arange(keys.numel(), device=self.device)
        width = 1
        while pending.numel():
            window = self._window(pos[pending], width)
            empty = self.index[window] < 0
            has_empty = empty.any(dim=1)
            full = pending[~has_empty]
            pos[full] = pos[full] + width
            pending, window, empty = pending[has_empty], window[has_empty], empty[has_empty]
            slot = window.gather(1, empty.to(torch.int8).argmax(dim=1, keepdim=True)).squeeze(1)
            self.index[slot] = rows32[pending]
            won = self.index[slot] == rows32[pending]
            pending = torch.cat([pending[~won], full])
            width = min(width * 4, _MAX_WINDOW)

    def _grow_index(self, num_rows: int) -> bool:
        """Rebuild the index larger if ``num_rows`` would exceed the load limit."""
        capacity = self.index.numel()
        while num_rows > _MAX_LOAD * capacity:
            capacity *= 2
        if capacity == self.index.numel():
            return False
        self.index = torch.full((capacity,), _EMPTY, dtype=torch.int32, device=self.device)
        if self.num_rows:
            rows = torch.arange(self.num_rows, device=self.device)
            self._place(self.ids.head(self.num_rows), rows)
        return True

    def _append(self, keys: torch.Tensor) -> torch.Tensor:
        """Create rows for new ids at the end of the block storage."""
        start, count = self.num_rows, keys.numel()
        self.rows.reserve(start + count)
        self.ids.reserve(start + count)
        self.ids.write_range(start, keys)
        # rows past ``num_rows`` are still zero (blocks start zeroed, rows are never deleted in
        # place), so the optimizer state needs no writing
        self.rows.write_range(start, init_rows(keys, self.dim, self.seed, self.init_scale))
        self.num_rows += count
        return torch.arange(start, start + count, device=self.device)

    # ---- public operations ----------------------------------------------------------------

    def _search(self, keys: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Row of each unique id (-1 where absent) and, for the absent, the empty slot met.

        Each round compares every pending id with the ids of the rows in its probe window (one
        slot first, then wider windows for the few ids still pending); an id is found at its
        first match, and absent when an empty slot comes before any match.
        """
        out = torch.full(keys.shape, _EMPTY, dtype=torch.int64, device=self.device)
        free_slot = torch.full(keys.shape, _EMPTY, dtype=torch.int64, device=self.device)
        pos = self._home(keys)
        pending = self._first_probe(keys, pos, out, free_slot)
        width = 4
        while pending.numel():
            window = self._window(pos[pending], width)
            row = self.index[window].to(torch.int64)
            occupied = row >= 0
            match = torch.zeros_like(occupied)
            wanted = keys[pending].unsqueeze(1).expand_as(row)
            match[occupied] = self.ids.gather(row[occupied]) == wanted[occupied]
            # the first slot that either matches or is empty ends the search
            stop = match | ~occupied
            ended = stop.any(dim=1)
            first = stop.to(torch.int8).argmax(dim=1, keepdim=True)
            hit = ended & match.gather(1, first).squeeze(1)
            out[pending[hit]] = row[hit].gather(1, first[hit]).squeeze(1)
            miss = ended & ~hit
            free_slot[pending[miss]] = window[miss].gather(1, first[miss]).squeeze(1)
            pending = pending[~ended]
            pos[pending] = pos[pending] + width
            width = min(width * 4, _MAX_WINDOW)
        return out, free_slot

    def _first_probe(
        self, keys: torch.Tensor, pos: torch.Tensor, out: torch.Tensor, free_slot: torch.Tensor
    ) -> torch.Tensor:
        """The home slot of every id, the round that settles most of them; returns the rest."""
        row = self.index[pos].to(torch.int64)
        occupied = row >= 0
        seen = occupied.nonzero().squeeze(1)
        hit = self.ids.gather(row[seen]) == keys[seen]
        out[seen[hit]] = row[seen[hit]]
        empty = (~occupied).nonzero().squeeze(1)
        free_slot[empty] = pos[empty]
        pending = seen[~hit]
        pos[pending] = pos[pending] + 1
        return pending

    def find(self, unique_ids: torch.Tensor) -> torch.Tensor:
        """Row of each (unique) id, -1 where absent."""
        return self._search(unique_ids)[0]

    def find_or_insert(self, unique_ids: torch.Tensor) -> torch.Tensor:
        """Row of each (unique) id, creating the absent ones."""
        rows, free_slot = self._search(unique_ids)
        missing = (rows < 0).nonzero().squeeze(1)
        if missing.numel():
            keys = unique_ids[missing]
            rebuilt = self._grow_index(self.num_rows + keys.numel())
            created = self._append(keys)
            self._place(keys, created, None if rebuilt else free_slot[missing])
            rows[missing] = created
        return rows

    def embeddings(self, rows: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        """Embedding part of the given rows; for row -1 the id's initial value, uncreated."""
        present = rows >= 0
        if bool(present.all()):
            return self.rows.gather(rows, columns=self.dim)
        out = init_rows(ids, self.dim, self.seed, self.init_scale)
        if bool(present.any()):
            out[present] = self.rows.gather(rows[present], columns=self.dim)
        return out

    def read(self, rows: torch.Tensor) -> torch.Tensor:
        return self.rows.gather(rows)

    def write(self, rows: torch.Tensor, values: torch.Tensor) -> None:
        self.rows.scatter(rows, values)

    def touch(self, rows: torch.Tensor, step: int) -> None:
        """Eviction bookkeeping of the given (unique) rows: last column pair becomes (step,
        uses + 1)."""
        values = self.read(rows)
        values[:, -2] = float(step)
        values[:, -1] += 1
        self.write(rows, values)

    def count(self, rows: torch.Tensor) -> torch.Tensor:
        """Add one to column 0 of the given (unique) rows; returns the new values."""
        values = self.read(rows)
        values[:, 0] += 1
        self.write(rows, values)
        return values[:, 0]

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
        self.rows.write_range(0, torch.cat([saved.params, saved.state], dim=1))
        self._place(saved.ids, rows)

    def keep(self, mask: torch.Tensor) -> int:
        """Drop the rows where ``mask`` is False (compacting storage); returns rows dropped."""
        saved = self.export()
        kept = TableExport(saved.ids[mask], saved.params[mask], saved.state[mask])
        self.load(kept)
        return saved.ids.numel() - kept.ids.numel()
