"""The GPU watcher of a rank: samples reported at the rank's latest step, stopped cleanly."""

from __future__ import annotations

import threading

import pytest
import torch

from tessera_ml.report import MemoryReporter
from tessera_worker.gpu_watch import GpuWatch, StepTracking, sample


def test_samples_are_reported_at_the_latest_step_and_once_more_at_the_end() -> None:
    memory = MemoryReporter()
    reporter = StepTracking(memory)
    calls = 0
    sampled = threading.Event()

    def read() -> dict[str, float]:
        nonlocal calls
        calls += 1
        if calls >= 2:
            sampled.set()
        return {"gpu_memory_allocated_bytes": float(calls)}

    with GpuWatch(reporter, read, interval_s=0.01):
        reporter.metrics(3, {"loss": 1.0})
        reporter.progress(7, 10)
        assert sampled.wait(5.0)
    points = [p for p in memory.points if p.name == "gpu_memory_allocated_bytes"]
    assert len(points) == calls >= 3  # at least two while running, one on leaving
    assert points[-1].step == 7 and points[-1].value == float(calls)
    assert memory.last_progress == (7, 10)


def test_a_failing_device_read_stops_the_watch_with_a_warning_not_the_rank() -> None:
    memory = MemoryReporter()

    def read() -> dict[str, float]:
        raise RuntimeError("device lost")

    with GpuWatch(StepTracking(memory), read, interval_s=0.01):
        pass
    assert memory.lines == [("warning", "GPU facts unavailable: device lost")]
    assert memory.points == []


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_sample_reads_the_memory_torch_holds_on_the_device() -> None:
    device = torch.device("cuda:0")
    block = torch.empty(1 << 20, dtype=torch.uint8, device=device)
    values = sample(device)
    assert values["gpu_memory_allocated_bytes"] >= block.numel()
    assert values["gpu_memory_peak_bytes"] >= values["gpu_memory_allocated_bytes"]
