"""Run a registered algorithm as the platform would, on a real local world
(``run_algorithm``), and the pieces it is made of: the plan and ``RankContext`` a rank gets,
and what each rank returned and reported (``RankOutcome``).
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from tessera_ml.bench.harness import BenchHarness
from tessera_ml.comm.base import Communicator
from tessera_ml.context import RankContext, StopSignal
from tessera_ml.harness import Harness
from tessera_ml.report import MemoryReporter, MetricPoint, Reporter
from tessera_ml.worlds.processes import run_world

if TYPE_CHECKING:
    from tessera_ml.netns import Testbed
    from tessera_ml.spec import AlgorithmConfig, AlgorithmSpec, RankSlot


def hosts_by_party(plan: Sequence[Any]) -> list[int]:
    """One simulated host per party, in order of first appearance in the rank plan."""
    order: dict[str, int] = {}
    return [order.setdefault(slot.party, len(order)) for slot in plan]


@dataclass
class RankOutcome:
    """What one rank of ``run_algorithm`` returned and reported."""

    rank: int
    role: str
    party: str
    result: Any
    points: list[MetricPoint]
    lines: list[tuple[str, str]]
    checkpoints: list[tuple[int, str, int, str]]
    artifacts: list[tuple[str, int, str, int, str]] = field(default_factory=list)
    """Exports and revealed models it kept: (kind, step, folder, size, SHA-256)."""
    sent_samples: list[bytes] = field(default_factory=list)
    """With ``sample_sent``: windows of what this rank sent to other parties, in clear."""
    sent_to: dict[int, int] = field(default_factory=dict)
    """The bytes its communicator accounted as sent, by peer rank, over the job."""
    group_sent: int = 0
    """The bytes its communicator accounted as sent in collectives, over the job."""

    def series(self, name: str) -> list[tuple[int, float]]:
        return [(p.step, p.value) for p in self.points if p.name == name]


def _registered(name: str) -> AlgorithmSpec:
    from tessera_ml.registry import get_spec

    spec = get_spec(name)
    if spec is None:
        raise KeyError(f"no algorithm named {name!r}")
    return spec


def plan_job(
    name: str, assignments: Sequence[dict[str, Any]], config: dict[str, Any]
) -> tuple[AlgorithmSpec, AlgorithmConfig, list[RankSlot]]:
    """The registered algorithm ``name``, its parsed config and its rank plan, as the control
    plane makes them from ``assignments`` and ``config``."""
    from tessera_ml.spec import Assignment

    spec = _registered(name)
    cfg = spec.parse_config(config)
    plan = spec.make_plan([Assignment.model_validate(a) for a in assignments], cfg)
    return spec, cfg, plan


def rank_context(
    comm: Communicator,
    name: str,
    assignments: Sequence[dict[str, Any]],
    config: dict[str, Any],
    *,
    reporter: Reporter | None = None,
    stop: StopSignal | None = None,
    checkpoint_dir: str | Path | None = None,
    resume_from: str | Path | None = None,
    data_root: str | Path | None = None,
    harness: Harness | None = None,
) -> RankContext:
    """The ``RankContext`` this rank of ``comm`` gets for a job planned by ``plan_job``.

    Without a ``reporter`` the context records into a fresh ``MemoryReporter``; without a
    ``stop`` signal it is never asked to stop. Several jobs can run one after another in one
    world, each with its own context.
    """
    _, cfg, plan = plan_job(name, assignments, config)
    return RankContext(
        rank=comm.rank,
        world_size=comm.world_size,
        slot=plan[comm.rank],
        plan=plan,
        config=cfg,
        comm=comm,
        device=comm.device,
        reporter=reporter if reporter is not None else MemoryReporter(),
        stop=stop if stop is not None else threading.Event(),
        checkpoint_dir=Path(checkpoint_dir) if checkpoint_dir else None,
        resume_from=Path(resume_from) if resume_from else None,
        data_root=Path(data_root) if data_root else None,
        harness=harness if harness is not None else BenchHarness(),
    )


def entry_point(name: str) -> Callable[[RankContext], Any]:
    """The function the platform calls on every rank of a job of algorithm ``name``."""
    module_name, func_name = _registered(name).entry_point.split(":")
    entry: Callable[[RankContext], Any] = getattr(importlib.import_module(module_name), func_name)
    return entry


SAMPLE_BYTES = 32
MIN_SAMPLE_BYTES = 16
MAX_SAMPLES = 4000


def sample_plaintext(samples: list[bytes]) -> Callable[[int, memoryview], None]:
    """A communicator ``tap`` that keeps a distinctive window of each message it sees: 16 to
    32 bytes, too many for ciphertext to contain by chance."""

    def tap(peer: int, payload: memoryview) -> None:
        if len(samples) >= MAX_SAMPLES or len(payload) < MIN_SAMPLE_BYTES:
            return
        size = min(SAMPLE_BYTES, len(payload))
        start = (len(payload) - size) // 2 // 8 * 8
        window = payload[start : start + size].tobytes()
        if len(set(window)) >= size // 3:
            samples.append(window)

    return tap


def _algorithm_rank(
    comm: Communicator,
    name: str,
    assignments: list[dict[str, Any]],
    config: dict[str, Any],
    checkpoint_dir: str | None,
    resume_from: str | None,
    data_root: str | None = None,
    sample_sent: bool = False,
    harnesses: Sequence[Harness] | None = None,
) -> RankOutcome:
    from tessera_ml.worlds.several import WorldJob, run_job

    samples: list[bytes] = []
    if sample_sent:
        if not hasattr(comm, "tap"):
            raise ValueError("sample_sent needs the platform's wiring (transport='mesh')")
        comm.tap = sample_plaintext(samples)
    job = WorldJob(
        name,
        assignments,
        config,
        checkpoint_dir=checkpoint_dir,
        resume_from=resume_from,
        data_root=data_root,
        harnesses=tuple(harnesses) if harnesses is not None else None,
    )
    outcome = run_job(comm, job)
    outcome.sent_samples = samples
    return outcome


def run_algorithm(
    name: str,
    assignments: list[dict[str, Any]],
    config: dict[str, Any] | None = None,
    *,
    checkpoint_dir: str | None = None,
    resume_from: str | None = None,
    data_root: str | None = None,
    timeout_s: float = 240.0,
    threads: int | Sequence[int] = 1,
    hosts: Sequence[int] | Literal["party"] | None = None,
    testbed: Testbed | None = None,
    in_process: bool = False,
    env: dict[str, str] | None = None,
    transport: Literal["mesh", "gloo"] = "mesh",
    sample_sent: bool = False,
    harness: Harness | Sequence[Harness] | None = None,
) -> list[RankOutcome]:
    """Run a registered algorithm as the platform would, on a real local world.

    Plans the ranks from ``assignments`` exactly like the control plane, gives each rank a
    ``RankContext`` with a ``MemoryReporter``, and returns every rank's outcome in rank order.
    The ranks are wired as a platform job (``transport="mesh"``: each party's ranks on gloo,
    TLS between parties); ``transport="gloo"`` puts them all in one plaintext gloo world, the
    baseline the TLS cost is measured against.
    On a ``testbed``, ``hosts`` places ranks (``"party"``: one host per party).
    ``in_process=True`` runs the ranks as threads over a ``LocalCommunicator`` instead: fast,
    for protocol tests, but not a substitute for a real world. ``env`` is added to every rank
    process's environment. ``sample_sent`` keeps, per rank, windows of the plaintext it sent
    to other parties (``RankOutcome.sent_samples``), to look for on a captured link.
    ``harness`` (one for every rank, or one per rank) is what the ranks' contexts lend them to
    be measured with; by default a ``BenchHarness`` that reads testbed link counters.
    """
    _, _, plan = plan_job(name, assignments, config or {})
    harnesses = None
    if harness is not None:
        harnesses = [harness] * len(plan) if isinstance(harness, Harness) else list(harness)
        if len(harnesses) != len(plan):
            raise ValueError(f"{len(harnesses)} harnesses for {len(plan)} ranks")
    rank_args = (
        name,
        assignments,
        config or {},
        checkpoint_dir,
        resume_from,
        data_root,
        sample_sent,
        harnesses,
    )
    if in_process:
        if testbed is not None or env:
            raise ValueError("a testbed or an environment needs processes, not in_process")
        from tessera_ml.comm.local import run_local

        local: list[RankOutcome] = run_local(
            _algorithm_rank, len(plan), *rank_args, timeout_s=timeout_s
        )
        return local
    outcomes: list[RankOutcome] = run_world(
        _algorithm_rank,
        len(plan),
        *rank_args,
        timeout_s=timeout_s,
        threads=threads,
        hosts=hosts_by_party(plan) if hosts == "party" else hosts,
        testbed=testbed,
        env=env,
        parties=[slot.party for slot in plan] if transport == "mesh" else None,
    )
    return outcomes
