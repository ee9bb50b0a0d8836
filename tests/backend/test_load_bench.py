"""`tessera bench api` starts the API, offers its load and reports in the documented shape.

Briefly and on SQLite only: what is checked is the report, never the speed (the benchmark
itself says whether the targets are met)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tessera_api.load_bench import parse_args
from tessera_api.load_traffic import DASHBOARD_MIX, INGEST, percentile

RUN = """
import sys
from tessera_api.cli import main
code = main(sys.argv[1:])
print("torch imported:", any(m == "torch" or m.startswith("torch.") for m in sys.modules))
raise SystemExit(code)
"""


def test_bench_api_reports_every_route_with_plausible_numbers(tmp_path: Path) -> None:
    out = tmp_path / "load.json"
    argv = ["bench", "api", "--database", "sqlite", "--replicas", "1", "2"]
    argv += ["--rate", "20", "--duration", "1.5", "--warmup", "0.5", "--ingest-rate", "4"]
    argv += ["--ingest-ranks", "2", "--ingest-duration", "1", "--batch-points", "100"]
    argv += ["--jobs", "12", "--view-jobs", "2", "--steps", "300", "--connections", "4"]
    argv += ["--json-out", str(out)]
    result = subprocess.run(
        [sys.executable, "-c", RUN, *argv], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "torch imported: False" in result.stdout
    report = json.loads(out.read_text())
    assert report["command"].startswith("tessera bench api ")
    assert report["load"]["rate"] == 20
    assert report["load"]["open_loop"] is True

    # SQLite: one replica, whatever was asked
    [run] = report["runs"]
    assert (run["database"], run["replicas"]) == ("sqlite", 1)
    assert run["seeded"]["jobs"] == 12
    assert run["seeded"]["points"] == 2 * 2 * 4 * 300  # view jobs x ranks x metrics x steps

    mix = run["mix"]
    assert mix["offered_rps"] == 24
    assert mix["dashboard"]["requests"] == 30  # 20 per second for 1.5 s
    assert mix["dashboard"]["errors"] == 0
    assert 0 < mix["achieved_rps"] <= 1.5 * mix["offered_rps"]
    assert set(mix["routes"]) == {name for name, _ in DASHBOARD_MIX} | {INGEST}
    for name, route in mix["routes"].items():
        assert route["errors"] == {}, name
        assert route["requests"] > 0, name
        assert 0 < route["p50_ms"] <= route["p90_ms"] <= route["p99_ms"] <= route["max_ms"]
    assert mix["routes"][INGEST]["requests"] == 6  # 4 batches per second for 1.5 s
    assert mix["ingest_points_per_s"] > 0

    ingest = run["ingest"]
    assert ingest["ranks"] == 2
    assert ingest["batch_points"] == 100
    assert ingest["batches"] > 0
    assert ingest["errors"] == {}
    assert ingest["points_per_s"] > 0
    assert ingest["p50_ms"] <= ingest["p99_ms"]

    # below the target rate the latency target is not judged
    assert run["targets_met"]["dashboard_p99_le_50ms_at_200rps_one_replica"] is None
    assert isinstance(run["targets_met"]["ingest_ge_20000_points_per_s"], bool)


def test_percentile_by_nearest_rank() -> None:
    values = [float(v) for v in range(1, 101)]
    assert percentile(values, 0.5) == 50
    assert percentile(values, 0.99) == 99
    assert percentile(values, 1.0) == 100
    assert percentile([3.0], 0.99) == 3
    assert percentile([], 0.5) == 0


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--database", "postgres", "--postgres-url", "nonsense"], "--postgres-url: Could not"),
        (
            ["--postgres-url", "postgresql+psycopg://nobody@127.0.0.1:9/none"],
            "--database sqlite runs without PostgreSQL",
        ),
        (["--database", "sqlite", "--json-out", "/proc/none/x.json"], "cannot be written"),
        (["--database", "sqlite", "--replicas", "0"], "--replicas and --jobs must be"),
    ],
)
def test_bench_api_refuses_what_it_could_not_finish_before_it_starts(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as stopped:
        parse_args(argv)
    assert stopped.value.code == 2
    assert message in capsys.readouterr().err
