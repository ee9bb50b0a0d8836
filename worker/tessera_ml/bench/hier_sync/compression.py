"""Training with the inter-node all-reduce quantised, against the same job in full precision.

The benchmark's task (``sklearn:digits``, an MLP, Adam, 2 nodes of 2 devices) trained long
enough to converge, three times on one world over loopback: uncompressed, int8 and int4 with
error feedback. Reports each run's held-out accuracy and loss, the accuracy drop against the
uncompressed run and the ratio of final held-out losses.
"""

from __future__ import annotations

from typing import Any

from tessera_ml.worlds import RankOutcome, WorldJob

MODES = ("none", "int8", "int4")


def convergence_jobs(
    nodes: list[dict[str, Any]], config: dict[str, Any], block: int
) -> list[WorldJob]:
    return [
        WorldJob(
            "hier_sync",
            nodes,
            {**config, "inter_node_compression": mode, "compression_block": block},
            f"converge-{mode}",
        )
        for mode in MODES
    ]


def convergence_results(rank0: dict[str, RankOutcome]) -> dict[str, Any]:
    """From rank 0's outcomes (it evaluates the final model on the held-out split)."""
    runs = {mode: rank0[f"converge-{mode}"].result for mode in MODES}
    base = runs["none"]
    out: dict[str, Any] = {}
    for mode, result in runs.items():
        prefix = "uncompressed" if mode == "none" else mode
        out[f"{prefix}_accuracy"] = float(result["accuracy"])
        out[f"{prefix}_eval_loss"] = float(result["eval_loss"])
        if mode != "none":
            out[f"{mode}_accuracy_drop_vs_uncompressed"] = float(
                base["accuracy"] - result["accuracy"]
            )
            out[f"{mode}_final_loss_ratio_vs_uncompressed"] = float(
                result["eval_loss"] / base["eval_loss"]
            )
    return out
