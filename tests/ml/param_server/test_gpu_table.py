"""The table a param_server server keeps on a GPU (``device: cuda``): the torch table in GPU
memory, which must keep the rows the same table on the CPU keeps, with the same values up to
the last bits of the GPU's float arithmetic (sin and the optimizer's square root)."""

from __future__ import annotations

import pytest
import torch

from tessera_ml.algorithms.param_server.table import DynamicTable
from tessera_ml.algorithms.param_server.tables import make_table
from tests.ml.param_server.test_native_table import DIM, SLOTS, _evict_idle, _serve

pytestmark = pytest.mark.gpu


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_the_gpu_table_serves_and_exports_what_the_cpu_table_does() -> None:
    """1M ids in 20 batches with admission on the second sighting and idle rows evicted every
    5 batches, as the compiled-table test runs them: every PULL and the export agree."""
    cuda = torch.device("cuda")
    table, line = make_table(dim=DIM, slots=SLOTS, seed=9, device=cuda)
    assert isinstance(table, DynamicTable) and "cuda" in line
    candidates, _ = make_table(dim=1, slots=0, seed=0, device=cuda)
    cpu = (DynamicTable(dim=DIM, slots=SLOTS, seed=9), DynamicTable(dim=1, slots=0, seed=0))
    generator = torch.Generator().manual_seed(5)
    for step in range(20):
        ranks = (torch.rand(50_000, generator=generator) ** 3 * 400_000).long()
        ids = (ranks * -7046029254386353131 + step % 3).unique()
        on_gpu = _serve(table, candidates, ids.to(cuda), step, admit=2)
        on_cpu = _serve(*cpu, ids, step, admit=2)
        torch.testing.assert_close(on_gpu.cpu(), on_cpu, rtol=0, atol=1e-6)
        if step % 5 == 4:
            assert _evict_idle(table, step, 3) == _evict_idle(cpu[0], step, 3)
    exported, reference = table.export(), cpu[0].export()
    assert exported.ids.device.type == "cuda"
    assert torch.equal(exported.ids.cpu(), reference.ids)
    torch.testing.assert_close(exported.params.cpu(), reference.params, rtol=0, atol=1e-6)
    torch.testing.assert_close(exported.state.cpu(), reference.state, rtol=0, atol=1e-5)
