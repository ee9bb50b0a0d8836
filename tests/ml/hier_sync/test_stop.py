"""The stop signal of one rank stops every rank at the same step, with a checkpoint."""

from __future__ import annotations

from typing import Any


def test_a_stop_asked_of_one_rank_stops_every_rank_at_the_same_step(world: dict[str, Any]) -> None:
    root, outcomes = world["root"], world["jobs"]
    for rank in range(4):
        result = outcomes[f"stopped@{rank}"].result
        assert result["stopped"] is True
        assert result["step"] == 10
        assert (root / "stopped" / "step-000000010" / f"rank-{rank}.pt").is_file()
