"""The proportional-slicing part of ``tessera bench hier_sync``: the last device of each of two
nodes is slower and reports less capacity; capacity-proportional slices against equal ones,
alternating on one world."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from tessera_ml.bench.hier_sync.cpu_limit import PERIOD_US, cpu_groups
from tessera_ml.bench.hier_sync.jobs import PARTY, paced, per_step_median, slowest, world
from tessera_ml.bench.hier_sync.torch_baselines import TorchJob
from tessera_ml.worlds import WorldJob

SLOW_MODES = ("cpu_limit", "pace", "threads")


def proportional(
    config: dict[str, Any],
    slowdown: float,
    mode: str,
    warmup: int,
    repeats: int,
    share: float,
    devices: int = 2,
    period_us: int = PERIOD_US,
) -> dict[str, Any]:
    """The last device of each of two nodes of ``devices`` is ``slowdown`` times slower and
    reports proportionally less capacity; ``memory_and_compute`` slices against ``equal``
    slices.

    ``mode`` ``cpu_limit``: each rank gets its own CFS bandwidth limit, ``share`` of a core for
    the fast devices and ``share / slowdown`` for the slow one in each CFS period of
    ``period_us`` (``cpu_limit.py``); ``pace``: the harness paces every device's work, each
    thread to the device's share of a core (``BenchHarness.speed``, ``tessera_ml.pace``; the
    threads of gloo and torch are not paced), so that the fast devices are faster only while
    the shares together fit in the machine's cores; ``threads``: the fast devices get
    ``slowdown`` threads (needs a core per thread to mean anything). Every rank has one thread
    otherwise. Equal and proportional runs alternate ``repeats`` times on one world, so a change
    of the machine's load during the measurement falls on both.
    """
    compute = ([slowdown] * (devices - 1) + [1.0]) * 2
    speeds = tuple(c / slowdown for c in compute)
    slow_ranks = (devices - 1, 2 * devices - 1)
    fast_ranks = tuple(r for r in range(2 * devices) if r not in slow_ranks)
    threads = [int(c) for c in compute] if mode == "threads" else [1] * (2 * devices)
    shares = [share * speed for speed in speeds]
    harnesses = paced(tuple(shares)) if mode == "pace" else None
    nodes = [
        {
            "party": PARTY,
            "role": "node",
            "processes": 2 * devices,
            "capacity": compute,
            "options": {"devices_per_node": devices, "compute": compute},
        }
    ]
    sized_config = {**config, "slicing": "memory_and_compute"}
    jobs: list[WorldJob | TorchJob] = []
    for i in range(repeats):
        jobs += [
            WorldJob("hier_sync", nodes, config, f"equal-{i}", harnesses=harnesses),
            WorldJob("hier_sync", nodes, sized_config, f"sized-{i}", harnesses=harnesses),
        ]
    with cpu_groups(shares if mode == "cpu_limit" else [], period_us) as groups:
        if mode == "cpu_limit" and groups is None:
            raise RuntimeError("slow_mode cpu_limit: this machine lets no CPU limit be set")
        outcomes = world(jobs, 2 * devices, threads=threads, cpu_groups=groups or None)
    equal = [f"equal-{i}" for i in range(repeats)]
    sized = [f"sized-{i}" for i in range(repeats)]
    everyone = range(2 * devices)
    equal_time = slowest(outcomes, equal, "step_time_s", warmup, everyone)
    sized_time = slowest(outcomes, sized, "step_time_s", warmup, everyone)
    wall, cpu = "sharded_phase_s", "sharded_phase_cpu_s"
    phases = {
        (name, kind, metric): slowest(outcomes, jobs_, metric, warmup, ranks)
        for name, jobs_ in (("equal", equal), ("sized", sized))
        for kind, ranks in (("slow", slow_ranks), ("fast", fast_ranks))
        for metric in (wall, cpu)
    }
    # the two slow devices swap their pieces across nodes: the one whose backward pass ends
    # first waits there for the other, so per step the longer phase holds the drift between
    # two backward passes, which no slice shrinks, and the shorter hardly any wait for the peer
    shorter = {
        name: per_step_median(outcomes, jobs_, wall, warmup, slow_ranks, min)
        for name, jobs_ in (("equal", equal), ("sized", sized))
    }
    results = [o["sized-0"].result for o in outcomes]

    def alternations(
        metric: str, ranks: Sequence[int], pick: Callable[[Iterable[float]], float] = max
    ) -> list[float]:
        """The ratio per alternation: how far one run's alternations already disagree."""
        return [
            per_step_median(outcomes, [f"sized-{i}"], metric, warmup, ranks, pick)
            / per_step_median(outcomes, [f"equal-{i}"], metric, warmup, ranks, pick)
            for i in range(repeats)
        ]

    return {
        "equal_slices_step_time_s": equal_time,
        "proportional_slices_step_time_s": sized_time,
        "proportional_vs_equal_step_time_ratio": sized_time / equal_time,
        "slow_device_sharded_phase_s_equal": phases[("equal", "slow", wall)],
        "slow_device_sharded_phase_s_proportional": phases[("sized", "slow", wall)],
        "slow_device_sharded_phase_ratio": (
            phases[("sized", "slow", wall)] / phases[("equal", "slow", wall)]
        ),
        "slow_device_sharded_phase_ratio_per_alternation": alternations(wall, slow_ranks),
        "slow_device_sharded_phase_s_equal_shorter": shorter["equal"],
        "slow_device_sharded_phase_s_proportional_shorter": shorter["sized"],
        "slow_device_sharded_phase_ratio_shorter": shorter["sized"] / shorter["equal"],
        "slow_device_sharded_phase_ratio_shorter_per_alternation": alternations(
            wall, slow_ranks, min
        ),
        "proportional_vs_equal_step_time_ratio_per_alternation": alternations(
            "step_time_s", everyone
        ),
        "fast_device_sharded_phase_ratio": (
            phases[("sized", "fast", wall)] / phases[("equal", "fast", wall)]
        ),
        "slow_device_sharded_phase_cpu_s_equal": phases[("equal", "slow", cpu)],
        "slow_device_sharded_phase_cpu_s_proportional": phases[("sized", "slow", cpu)],
        "slow_device_sharded_phase_cpu_ratio": (
            phases[("sized", "slow", cpu)] / phases[("equal", "slow", cpu)]
        ),
        "slow_device_slice_ratio": devices * results[slow_ranks[0]]["slice_fractions"][-1],
        "capacity_fractions": [r["capacity_fractions"][r["device_number"]] for r in results],
        "slice_fractions": [r["slice_fractions"][r["device_number"]] for r in results],
        "intra_node_transport": sorted({str(r["intra_node_transport"]) for r in results}),
        "proportional_optimizer_state_bytes_per_device": [
            int(r["optimizer_state_bytes"]) for r in results
        ],
        "threads_per_device": threads,
        "cpu_share_per_device": shares if mode == "cpu_limit" else None,
        "pace_per_device": shares if mode == "pace" else [1.0] * (2 * devices),
    }
