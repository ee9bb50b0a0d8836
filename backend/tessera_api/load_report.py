"""The results of ``tessera bench api``: a phase's figures, the targets met, a progress line."""

from __future__ import annotations

from typing import Any

from tessera_api.load_traffic import DASHBOARD_MIX, INGEST, Outcome, summary

TARGET_P99_MS = 50.0
TARGET_RATE = 200.0
TARGET_INGEST_POINTS_PER_S = 20_000.0


def mix_report(outcome: Outcome, *, rate: float, ingest_rate: float) -> dict[str, Any]:
    elapsed = max(outcome.ended - outcome.started, 1e-9)
    dashboard = [name for name, _ in DASHBOARD_MIX]
    everything = [*dashboard, INGEST]
    return {
        "offered_rps": round(rate + ingest_rate, 1),
        "achieved_rps": round(outcome.ok() / elapsed, 1),
        "dashboard": {
            "offered_rps": round(rate, 1),
            "achieved_rps": round(outcome.ok(dashboard) / elapsed, 1),
            "requests": outcome.ok(dashboard) + outcome.failed(dashboard),
            "errors": outcome.failed(dashboard),
            **summary([v for name in dashboard for v in outcome.latencies.get(name, [])]),
        },
        "routes": {
            name: {
                "requests": len(outcome.latencies.get(name, [])) + outcome.failed([name]),
                "errors": dict(outcome.errors.get(name, {})),
                **summary(outcome.latencies.get(name, [])),
            }
            for name in everything
        },
        "ingest_offered_batches_per_s": round(ingest_rate, 1),
        "ingest_points_per_s": round(outcome.points / elapsed),
        "seconds": round(elapsed, 2),
    }


def ingest_report(outcome: Outcome, *, ranks: int, batch_points: int) -> dict[str, Any]:
    elapsed = max(outcome.ended - outcome.started, 1e-9)
    latencies = outcome.latencies.get(INGEST, [])
    return {
        "ranks": ranks,
        "batch_points": batch_points,
        "batches": len(latencies),
        "errors": dict(outcome.errors.get(INGEST, {})),
        "points_per_s": round(outcome.points / elapsed),
        "batches_per_s": round(len(latencies) / elapsed, 1),
        **summary(latencies),
        "seconds": round(elapsed, 2),
    }


def progress(run: dict[str, Any]) -> str:
    """One line per run, as it finishes."""
    dashboard, ingest = run["mix"]["dashboard"], run["ingest"]
    return (
        f"tessera bench api: {run['database']} x{run['replicas']}: "
        f"{dashboard['achieved_rps']}/{dashboard['offered_rps']} requests/s, "
        f"p50 {dashboard['p50_ms']} ms, p99 {dashboard['p99_ms']} ms, "
        f"{dashboard['errors']} errors; ingest {ingest['points_per_s']} points/s"
    )


def targets(run: dict[str, Any], rate: float) -> dict[str, bool | None]:
    """Whether a run meets the targets; None where the run does not measure that target."""
    one_at_target = run["replicas"] == 1 and run["workers_per_replica"] == 1 and rate >= TARGET_RATE
    p99 = run["mix"]["dashboard"]["p99_ms"]
    errors = run["mix"]["dashboard"]["errors"]
    return {
        "dashboard_p99_le_50ms_at_200rps_one_replica": (
            p99 <= TARGET_P99_MS and errors == 0 if one_at_target else None
        ),
        "ingest_ge_20000_points_per_s": (
            run["ingest"]["points_per_s"] >= TARGET_INGEST_POINTS_PER_S
        ),
    }
