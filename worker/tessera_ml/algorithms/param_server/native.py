"""The dynamic table on the compiled core (``native_table.c``): same rows, same semantics as
``DynamicTable``, with hashing, row copies and bookkeeping in C over the tensors' memory.

The hash index holds each id beside its row (12 bytes a slot, linear probing, load kept in
(0.5, 0.75] by growing 1.5x), so a lookup touches one slot run and no separate id storage
exists: the ids of the rows are read back from the index on export. Batches of more than
16,384 ids are split over ``threads`` threads (default: torch's intra-op thread count).
"""

from __future__ import annotations

from types import ModuleType

import torch

from tessera_ml.algorithms.param_server.blocks import BlockRows
from tessera_ml.algorithms.param_server.table import TableExport

try:
    from tessera_ml.algorithms.param_server import _native_table as _core

    UNAVAILABLE = ""
except ImportError as exc:  # built without a compiler: the torch table serves instead
    _core = None  # type: ignore[assignment]
    UNAVAILABLE = str(exc)

MAX_DIM = 4096  # MAX_INIT_COLUMNS in native_table.c
_MAX_LOAD = 0.75
_GROWTH = 1.5
_PARALLEL_BATCH = 32768
_WRITE, _TOUCH, _COUNT = 0, 1, 2


def available() -> bool:
    return _core is not None


def native_core() -> ModuleType | None:
    """The compiled core, if it was built."""
    return _core


def _int64(ids: torch.Tensor) -> torch.Tensor:
    return ids.to(torch.int64).contiguous()


class NativeTable:
    """Embedding rows of width ``dim + slots`` keyed by int64 id, on the CPU."""

    backend = "compiled"

    def __init__(
        self,
        *,
        dim: int,
        slots: int,
        seed: int,
        init_scale: float = 0.05,
        block_rows: int = 16384,
        min_capacity: int = 1024,
        threads: int | None = None,
    ) -> None:
        if _core is None:
            raise RuntimeError(f"the compiled table is not built: {UNAVAILABLE}")
        if not 0 < dim <= MAX_DIM:
            raise ValueError(f"dim must be in 1..{MAX_DIM}, got {dim}")
        self.dim = dim
        self.slots = slots
        self.seed = seed
        self.init_scale = init_scale
        self.threads = threads
        self.device = torch.device("cpu")
        self.rows = BlockRows(dim + slots, block_rows=block_rows, dtype=torch.float32, zeroed=False)
        self._pointers = torch.empty(0, dtype=torch.int64)
        self.num_rows = 0
        self.index = self._empty_index(max(min_capacity, 4))
        self._seed_hash = _core.mix64(seed & (2**64 - 1))
        self._step = 2.0 * init_scale / (1 << 24)

    # ---- sizes ---------------------------------------------------------------------------

    @property
    def width(self) -> int:
        return self.dim + self.slots

    @property
    def capacity(self) -> int:
        return self.index.shape[0]

    @property
    def resident_bytes(self) -> int:
        """Every byte the table holds: row blocks, the hash index and the block addresses."""
        index = self.index.numel() * self.index.element_size()
        return self.rows.nbytes + index + self._pointers.numel() * 8

    @property
    def row_payload_bytes(self) -> int:
        return self.width * 4

    def _threads(self) -> int:
        return self.threads or torch.get_num_threads()

    # ---- storage -------------------------------------------------------------------------

    @staticmethod
    def _empty_index(capacity: int) -> torch.Tensor:
        return torch.full((capacity, 3), -1, dtype=torch.int32)

    def _reserve(self, num_rows: int) -> None:
        """Blocks for ``num_rows`` rows, their addresses appended to ``_pointers`` (which keeps
        room for more, so a block costs no copy of all the addresses)."""
        had = len(self.rows.blocks)
        self.rows.reserve(num_rows)
        blocks = self.rows.blocks
        if len(blocks) == had:
            return
        if len(blocks) > self._pointers.numel():
            grown = torch.zeros(max(2 * self._pointers.numel(), len(blocks), 8), dtype=torch.int64)
            grown[:had] = self._pointers[:had]
            self._pointers = grown
        self._pointers[had : len(blocks)] = torch.tensor([b.data_ptr() for b in blocks[had:]])

    def _grow_index(self, num_rows: int) -> None:
        capacity = self.capacity
        while num_rows > _MAX_LOAD * capacity:
            capacity = int(capacity * _GROWTH)
        if capacity == self.capacity:
            return
        grown = self._empty_index(capacity)
        assert _core is not None
        _core.rehash(
            self.index.data_ptr(), self.capacity, grown.data_ptr(), capacity, self._threads()
        )
        self.index = grown

    def _check_rows(self, rows: torch.Tensor) -> torch.Tensor:
        rows = _int64(rows)
        if rows.numel() and (int(rows.min()) < 0 or int(rows.max()) >= self.num_rows):
            raise IndexError(f"rows out of range 0..{self.num_rows - 1}")
        return rows

    # ---- public operations ----------------------------------------------------------------

    def _find(self, keys: torch.Tensor) -> tuple[torch.Tensor, int]:
        assert _core is not None
        rows = torch.empty(keys.numel(), dtype=torch.int64)
        missing = _core.find(
            self.index.data_ptr(),
            self.capacity,
            keys.data_ptr(),
            rows.data_ptr(),
            keys.numel(),
            self._threads(),
        )
        return rows, missing

    def find(self, unique_ids: torch.Tensor) -> torch.Tensor:
        """Row of each (unique) id, -1 where absent."""
        return self._find(_int64(unique_ids))[0]

    def find_or_insert(self, unique_ids: torch.Tensor) -> torch.Tensor:
        """Row of each (unique) id, creating the absent ones (in batch order).

        On one thread a single pass finds, creates and initialises; on several, a parallel
        search, then the absent ids numbered in order, entered and initialised in parallel.
        """
        keys = _int64(unique_ids)
        if self._threads() > 1 and keys.numel() >= _PARALLEL_BATCH:
            rows, missing = self._find(keys)
            if missing:
                self._create(keys, rows, missing)
            return rows
        return self._find_insert(keys)

    def _find_insert(self, keys: torch.Tensor) -> torch.Tensor:
        assert _core is not None
        n = keys.numel()
        rows = torch.empty(n, dtype=torch.int64)
        if self.num_rows == 0:  # every id is new: size the index once, not by steps
            self._grow_index(n)
        done = 0
        while done < n:
            limit = int(_MAX_LOAD * self.capacity)
            if self.num_rows >= limit:
                self._grow_index(self.num_rows + 1)
                continue
            if self.num_rows >= self.rows.capacity:  # blocks as rows need them, one at a time
                self._reserve(self.num_rows + 1)
            limit = min(limit, self.rows.capacity)
            processed, created = _core.find_insert(
                self.index.data_ptr(),
                self.capacity,
                keys.data_ptr() + 8 * done,
                rows.data_ptr() + 8 * done,
                n - done,
                self.num_rows,
                limit,
                self._pointers.data_ptr(),
                self.rows.shift,
                self.width,
                self.dim,
                self._seed_hash,
                self._step,
                self.init_scale,
            )
            done += processed
            self.num_rows += created
        return rows

    def _create(self, keys: torch.Tensor, rows: torch.Tensor, missing: int) -> None:
        """Give the ids whose row is -1 the next rows, with their initial values."""
        assert _core is not None
        first = self.num_rows
        self._grow_index(first + missing)
        self._reserve(first + missing)
        threads = self._threads()
        _core.insert(
            self.index.data_ptr(),
            self.capacity,
            keys.data_ptr(),
            rows.data_ptr(),
            keys.numel(),
            first,
            threads,
        )
        _core.init(
            self._pointers.data_ptr(),
            self.rows.shift,
            self.width,
            self.dim,
            rows.data_ptr(),
            keys.data_ptr(),
            keys.numel(),
            first,
            self._seed_hash,
            self._step,
            self.init_scale,
            threads,
        )
        self.num_rows = first + missing

    def _gather(self, rows: torch.Tensor, keys: torch.Tensor, columns: int) -> torch.Tensor:
        assert _core is not None
        out = torch.empty((rows.numel(), columns), dtype=torch.float32)
        _core.gather(
            self._pointers.data_ptr(),
            self.rows.shift,
            self.width,
            columns,
            rows.data_ptr(),
            keys.data_ptr(),
            rows.numel(),
            out.data_ptr(),
            self._seed_hash,
            self._step,
            self.init_scale,
            self._threads(),
        )
        return out

    def embeddings(self, rows: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        """Embedding part of the given rows; for row -1 the id's initial value, uncreated."""
        rows = _int64(rows)
        if rows.numel() and int(rows.max()) >= self.num_rows:
            raise IndexError(f"rows out of range 0..{self.num_rows - 1}")
        return self._gather(rows, _int64(ids), self.dim)

    def read(self, rows: torch.Tensor) -> torch.Tensor:
        rows = self._check_rows(rows)
        return self._gather(rows, rows, self.width)

    def _update(self, kind: int, rows: torch.Tensor, values: torch.Tensor, value: float) -> None:
        assert _core is not None
        _core.update(
            kind,
            self._pointers.data_ptr(),
            self.rows.shift,
            self.width,
            rows.data_ptr(),
            rows.numel(),
            values.data_ptr(),
            0,
            value,
            self._threads(),
        )

    def write(self, rows: torch.Tensor, values: torch.Tensor) -> None:
        """Overwrite the given (unique) rows with full-width ``values``."""
        rows = self._check_rows(rows)
        values = values.to(torch.float32).contiguous()
        if values.shape != (rows.numel(), self.width):
            raise ValueError(f"values are {tuple(values.shape)}, rows are {self.width} wide")
        self._update(_WRITE, rows, values, 0.0)

    def touch(self, rows: torch.Tensor, step: int) -> None:
        """Eviction bookkeeping of the given (unique) rows: last column pair becomes (step,
        uses + 1)."""
        rows = self._check_rows(rows)
        self._update(_TOUCH, rows, rows, float(step))

    def count(self, rows: torch.Tensor) -> torch.Tensor:
        """Add one to column 0 of the given (unique) rows; returns the new values."""
        rows = self._check_rows(rows)
        counts = torch.empty(rows.numel(), dtype=torch.float32)
        self._update(_COUNT, rows, counts, 0.0)
        return counts

    def export(self) -> TableExport:
        """The ids and rows actually held, as tensors of exactly that size."""
        assert _core is not None
        ids = torch.empty(self.num_rows, dtype=torch.int64)
        _core.ids(self.index.data_ptr(), self.capacity, ids.data_ptr(), self._threads())
        full = self.rows.head(self.num_rows)
        return TableExport(
            ids=ids, params=full[:, : self.dim].clone(), state=full[:, self.dim :].clone()
        )

    def load(self, saved: TableExport) -> None:
        """Replace the contents with exported rows, in their exported order."""
        if saved.params.shape[1:] != (self.dim,) or saved.state.shape[1:] != (self.slots,):
            raise ValueError(
                f"saved rows are {tuple(saved.params.shape)}/{tuple(saved.state.shape)}, "
                f"the table holds dim {self.dim} with {self.slots} optimizer slots"
            )
        assert _core is not None
        count = saved.ids.numel()
        self.rows.blocks.clear()
        self._pointers = torch.empty(0, dtype=torch.int64)
        self.num_rows = 0
        self.index = self._empty_index(self.capacity)
        self._grow_index(count)
        self._reserve(count)
        self.rows.write_range(0, torch.cat([saved.params, saved.state], dim=1).float().cpu())
        keys = _int64(saved.ids.cpu())
        rows = torch.full((count,), -1, dtype=torch.int64)
        _core.insert(
            self.index.data_ptr(),
            self.capacity,
            keys.data_ptr(),
            rows.data_ptr(),
            count,
            0,
            self._threads(),
        )
        self.num_rows = count

    def keep(self, mask: torch.Tensor) -> int:
        """Drop the rows where ``mask`` is False (compacting storage); returns rows dropped."""
        saved = self.export()
        kept = TableExport(saved.ids[mask], saved.params[mask], saved.state[mask])
        self.load(kept)
        return saved.ids.numel() - kept.ids.numel()
