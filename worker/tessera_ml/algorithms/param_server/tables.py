"""Which table a server builds: the compiled one on CPU where it is built, else torch's."""

from __future__ import annotations

import torch

from tessera_ml.algorithms.param_server import native
from tessera_ml.algorithms.param_server.native import NativeTable
from tessera_ml.algorithms.param_server.table import DynamicTable

EmbeddingTable = DynamicTable | NativeTable


def make_table(
    *,
    dim: int,
    slots: int,
    seed: int,
    init_scale: float = 0.05,
    block_rows: int = 16384,
    device: torch.device | None = None,
    prefer: str = "auto",
) -> tuple[EmbeddingTable, str]:
    """A table and a line naming the choice (for the job's log).

    ``prefer="torch"`` always gives the torch table; on a CUDA device the torch table lives on
    the GPU; otherwise the compiled table when the extension was built.
    """
    device = device or torch.device("cpu")
    if prefer == "torch" or device.type != "cpu":
        reason = "as configured" if prefer == "torch" else f"rows on {device}"
        table = DynamicTable(
            dim=dim,
            slots=slots,
            seed=seed,
            init_scale=init_scale,
            block_rows=block_rows,
            device=device,
        )
        return table, f"embedding table: torch operations ({reason})"
    if not native.available() or dim > native.MAX_DIM:
        why = native.UNAVAILABLE or f"dim {dim} exceeds {native.MAX_DIM}"
        table = DynamicTable(
            dim=dim, slots=slots, seed=seed, init_scale=init_scale, block_rows=block_rows
        )
        return table, f"embedding table: torch operations (compiled table unavailable: {why})"
    compiled = NativeTable(
        dim=dim, slots=slots, seed=seed, init_scale=init_scale, block_rows=block_rows
    )
    return compiled, (
        f"embedding table: compiled hash table, up to {torch.get_num_threads()} threads a batch"
    )
