"""``tessera bench split_nn``: the TLS between parties it reports, and its options."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tessera_ml.bench.api import BenchArgs
from tessera_ml.bench.cli import main
from tessera_ml.bench.split_nn import bench, microbatch
from tests.ml.conftest import MakeTestbed


def test_tls_runs_alternate_and_time_the_pipelined_configuration() -> None:
    assert bench.tls_order(3) == [("mesh", "gloo"), ("gloo", "mesh"), ("mesh", "gloo")]
    plan = bench.plan_jobs(BenchArgs(quick=True, netns=True, extra={"tls_pairs": "2"}))
    assert plan.params["tls"]["order"] == ["mesh", "gloo", "gloo", "mesh"]
    timed, pipelined = plan.tls_job, plan.jobs[bench.TLS_JOB]
    assert timed.assignments == pipelined.assignments
    different = {
        k
        for k in timed.config.keys() | pipelined.config.keys()
        if timed.config.get(k) != pipelined.config.get(k)
    }
    assert different <= {"steps", "report_every"}
    assert timed.config["micro_batches"] > 1 and timed.config["pipelined"] is True
    # the world is wired once, so every job it runs plans the same party for each rank
    assert bench.planned_parties([*plan.jobs.values(), timed]) == ["alice", "bob", "carol"]


def test_tls_options_are_checked() -> None:
    with pytest.raises(ValueError, match="tls_pairs must be at least 1"):
        bench.plan_jobs(BenchArgs(extra={"tls_pairs": "0"}))
    with pytest.raises(ValueError, match="tls_steps above"):
        bench.plan_jobs(BenchArgs(extra={"tls_steps": "2"}))


def test_links_are_shaped_with_a_bucket_of_a_few_frames_unless_set() -> None:
    shaped = bench.plan_jobs(BenchArgs(quick=True, netns=True)).params
    assert shaped["burst_bytes"] == bench.BURST_FRAMES * bench.FRAME_BYTES
    assert shaped["burst_bytes"] < 8 * 1514
    chosen = bench.plan_jobs(BenchArgs(netns=True, extra={"burst_bytes": "65536"})).params
    assert chosen["burst_bytes"] == 65536
    assert "burst_bytes" not in bench.plan_jobs(BenchArgs(quick=True)).params
    with pytest.raises(ValueError, match="takes no --set burst"):
        bench.plan_jobs(BenchArgs(extra={"burst": "1"}))


def test_a_micro_batch_transfer_is_its_widest_cut_at_the_link_rate() -> None:
    config = {"bottom": {"hidden": [8], "out": 96}, "middle": {"hidden": [8], "out": 32}}
    assert microbatch.transfer_s(config, rows=100, rate_mbit=10) == pytest.approx(
        100 * 96 * 4 * 8 / 10e6
    )
    wide = microbatch.transfer_s({**config, "dtype": "float64"}, rows=100, rate_mbit=10)
    assert wide == pytest.approx(2 * 100 * 96 * 4 * 8 / 10e6)
    assert microbatch.compute_s(config, features=5, classes=3, rows=16, repeats=3) > 0


@pytest.mark.netns
@pytest.mark.slow
@pytest.mark.timeout(900)
def test_quick_netns_report_has_tls_between_parties_and_no_plaintext_on_the_link(
    make_testbed: MakeTestbed, tmp_path: Path
) -> None:
    del make_testbed  # only its skip where namespaces are not permitted: the bench builds its own
    out = tmp_path / "split_nn.json"
    # the smallest run that still has every part: few training steps, one pair of TLS runs
    quick = ["--quick", "--netns", "--set", "steps=30", "--set", "tls_pairs=1"]
    assert main(["split_nn", *quick, "--json", str(out)]) == 0
    document = json.loads(out.read_text())
    results = document["results"]

    assert results["cross_party_tls"] is True
    assert results["tls_baseline"] == "gloo"
    assert results["plaintext_matches_on_link"] == 0
    assert results["plaintext_samples"] > 0
    assert results["captured_tcp_bytes"] > 0
    # the same windows are found on the link of the plaintext gloo run: the search works
    assert results["gloo_plaintext_matches_on_link"] > 0
    for key in ("tls_step_time_ratio", "tls_step_time_s", "gloo_step_time_s"):
        assert results[key] > 0
    # what the benchmark reported before is still there
    for key in (
        "max_abs_param_diff_vs_centralized",
        "bytes_ratio",
        "link_bytes_per_step",
        "pipelined_vs_sequential_steps_per_s",
        "pipelined_vs_sequential_microbatched_steps_per_s",
        "microbatch_compute_s",
        "microbatch_transfer_s",
        "microbatch_transfer_over_compute",
        "int8_bytes_ratio",
        "int8_accuracy_drop",
        "fp16_accuracy_drop",
    ):
        assert key in results
    assert document["params"]["tls"]["baseline"] == "gloo"
    assert document["params"]["burst_bytes"] == bench.BURST_FRAMES * bench.FRAME_BYTES
    # overlap changes when messages move, never what is computed
    assert results["pipelined_max_abs_param_diff_vs_sequential_microbatched"] == 0
