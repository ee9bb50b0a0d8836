"""``tessera bench``: argument errors, and a tiny real ``ddp`` run written as JSON."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tessera_ml.bench.cli import available, main
from tessera_ml.bench.hier_sync import bench as hier_sync_bench

pytestmark = pytest.mark.usefixtures("one_thread")


def test_unknown_algorithm_lists_the_known_ones(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["nope"]) == 2
    err = capsys.readouterr().err
    assert "no benchmark for 'nope'" in err and "ddp" in err
    assert "ddp" in available()


def test_the_tessera_command_dispatches_to_the_harness(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from tessera_api.cli import main as tessera

    assert tessera(["bench", "nope"]) == 2
    assert "known: " in capsys.readouterr().err


def test_bad_options_are_usage_errors(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ddp", "--set", "steps"]) == 2
    assert "KEY=VALUE" in capsys.readouterr().err
    assert main(["ddp", "--set", "colour=red"]) == 2
    assert "no --set colour" in capsys.readouterr().err
    assert main(["ddp", "--model", "resnet"]) == 2
    assert main(["--help"]) == 0


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["ddp", "--set", "ranks=abc"], "--set ranks=abc: not an integer"),
        (["hier_sync", "--set", "slowdown=fast"], "--set slowdown=fast: not a number"),
        (["zo_pair", "--set", "hidden=16,,8"], "--set hidden=16,,8: not a comma-separated"),
        (["mpc_mixed", "--set", "colour=red"], "mpc_mixed bench takes no --set colour"),
        (["param_server", "--set", "repeats=x"], "--set repeats=x: not an integer"),
        (["split_nn", "--model", "cnn"], "the split_nn bench takes no --model"),
    ],
)
def test_a_bad_set_value_names_its_key_before_anything_runs(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    assert message in capsys.readouterr().err


def test_a_results_file_that_cannot_be_written_fails_before_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    for target, message in [
        (tmp_path, "is a folder"),
        (blocker / "out.json", "cannot be written"),
    ]:
        assert main(["ddp", "--quick", "--json", str(target)]) == 2
        said = capsys.readouterr()
        assert message in said.err and "tessera bench ddp (" not in said.out  # nothing ran
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file"]


def test_ddp_bench_runs_both_sides_and_writes_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "ddp.json"
    code = main(["ddp", "--quick", "--set", "steps=8", "--set", "ranks=2", "--json", str(out)])
    assert code == 0
    document = json.loads(out.read_text())
    assert document["algorithm"] == "ddp"
    assert document["params"]["steps"] == 8 and document["params"]["ranks"] == 2
    results = document["results"]
    # ten digit classes: both sides learn far past chance (0.1) in eight steps
    assert results["accuracy"] > 0.3 and results["single_accuracy"] > 0.3
    params = 64 * 64 + 64 + 64 * 10 + 10
    assert results["bytes_sent_per_step"] == params * 4  # 2(n-1)/n of the gradient, n = 2
    assert results["step_time_s"] > 0 and results["single_step_time_s"] > 0
    assert "bytes_sent_per_step" in capsys.readouterr().out


def test_hier_sync_bench_runs_only_the_parts_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert main(["hier_sync", "--set", "parts=speedy"]) == 2
    assert "parts must name some of agreement, speed, proportional" in capsys.readouterr().err
    # a CPU share the kernel cannot give in the period asked for: refused before any part runs
    ran: list[Path] = []
    monkeypatch.setattr(hier_sync_bench, "agreement", lambda root: ran.append(root) or {})
    short = ["parts=agreement,proportional", "slow_mode=cpu_limit", "cfs_period_us=2000"]
    assert main(["hier_sync", *[a for s in short for a in ("--set", s)]]) == 2
    assert "0.25 core in a 2000 us period" in capsys.readouterr().err
    paced = ["parts=agreement,proportional", "slow_mode=pace", "core_share=1.5"]
    assert main(["hier_sync", *[a for s in paced for a in ("--set", s)]]) == 2
    assert "a share of 1.5 core is not in (0, 1]" in capsys.readouterr().err
    assert ran == []
    out = tmp_path / "hier_sync.json"
    settings = [
        "parts=proportional",
        "hidden=64,64",
        "steps=4",
        "repeats=1",
        "slow_mode=pace",
        "proportional_devices=3",
    ]
    sets = [a for s in settings for a in ("--set", s)]
    code = main(["hier_sync", "--quick", *sets, "--json", str(out)])
    assert code == 0
    document = json.loads(out.read_text())
    assert document["params"]["parts"] == ["proportional"]
    results = document["results"]
    # capacities 2:2:1 give each node's slow device a fifth of the parameters (a third equally)
    assert results["capacity_fractions"] == pytest.approx([0.4, 0.4, 0.2] * 2)
    assert results["slice_fractions"] == pytest.approx([0.4, 0.4, 0.2] * 2, abs=0.01)
    assert results["slow_device_slice_ratio"] == pytest.approx(0.6, abs=0.03)
    # paced to the default 0.5 of a core, the slow devices to half that
    assert results["pace_per_device"] == [0.5, 0.5, 0.25] * 2
    assert results["intra_node_transport"] == ["shared_memory"]
    # one alternation: its ratios are the run's
    assert results["slow_device_sharded_phase_ratio_per_alternation"] == [
        pytest.approx(results["slow_device_sharded_phase_ratio"])
    ]
    assert results["proportional_vs_equal_step_time_ratio_per_alternation"] == [
        pytest.approx(results["proportional_vs_equal_step_time_ratio"])
    ]
    # per step the shorter of the two slow devices' phases, below the longer one
    for slices in ("equal", "proportional"):
        longer = results[f"slow_device_sharded_phase_s_{slices}"]
        assert 0 < results[f"slow_device_sharded_phase_s_{slices}_shorter"] < longer
    assert results["slow_device_sharded_phase_ratio_shorter"] == pytest.approx(
        results["slow_device_sharded_phase_s_proportional_shorter"]
        / results["slow_device_sharded_phase_s_equal_shorter"]
    )
    assert results["slow_device_sharded_phase_ratio_shorter_per_alternation"] == [
        pytest.approx(results["slow_device_sharded_phase_ratio_shorter"])
    ]
    assert results["slow_device_sharded_phase_s_equal"] > 0
    cpu = results["slow_device_sharded_phase_cpu_s_equal"]
    assert cpu > 0
    assert results["slow_device_sharded_phase_cpu_ratio"] == pytest.approx(
        results["slow_device_sharded_phase_cpu_s_proportional"] / cpu
    )
    # neither the agreement nor the speed part ran
    assert "torch_ddp_step_time_s" not in results
    assert not any(key.startswith("max_abs_param_diff") for key in results)
