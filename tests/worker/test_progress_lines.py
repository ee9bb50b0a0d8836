"""Progress lines: the first step, then at most one line per interval, the last step, and the
step a rank stopped at; speed, time left and headline metrics in each."""

from __future__ import annotations

from tessera_ml.report import MemoryReporter
from tessera_worker.process_sample import ProcessSample
from tessera_worker.progress_lines import ProgressLines


def test_lines_at_the_first_step_each_interval_and_the_last() -> None:
    now = [0.0]
    memory = MemoryReporter()
    progress = ProgressLines(memory, interval_s=10.0, clock=lambda: now[0])
    for step in range(1, 101):
        now[0] = step * 0.5  # two steps a second
        progress.metrics(step, {"loss": 1.0 / step, "bytes_sent": 1e6})
        progress.progress(step, 100)
    lines = [message for _, message in memory.lines]
    assert [line.split(" · ")[0] for line in lines] == [
        "progress: step 1/100 (1%)",
        "progress: step 21/100 (21%)",
        "progress: step 41/100 (41%)",
        "progress: step 61/100 (61%)",
        "progress: step 81/100 (81%)",
        "progress: step 100/100 (100%)",
    ]
    assert lines[1] == "progress: step 21/100 (21%) · 2 steps/s, about 40 s left · loss 0.04762"
    assert "bytes_sent" not in lines[-1]
    progress.close()
    assert len(memory.lines) == 6  # the last step was described already


def test_a_rank_that_stops_between_lines_describes_its_last_step() -> None:
    now = [0.0]
    memory = MemoryReporter()
    progress = ProgressLines(memory, interval_s=10.0, clock=lambda: now[0])
    for step in (1, 2, 3):
        now[0] = float(step)
        progress.progress(step, None)
    progress.describe_last()
    assert [m for _, m in memory.lines] == [
        "progress: step 1 · 1 steps/s",
        "progress: step 3 · 1 steps/s",
    ]


def test_process_sample_reports_cpu_time_its_rate_and_resident_memory() -> None:
    cpu, wall = [10.0], [100.0]
    sample = ProcessSample(cpu=lambda: cpu[0], wall=lambda: wall[0])
    cpu[0], wall[0] = 11.5, 102.0
    values = sample()
    assert values["cpu_seconds"] == 11.5
    assert values["cpu_percent"] == 75.0
    assert values["memory_rss_bytes"] > 1024 * 1024
