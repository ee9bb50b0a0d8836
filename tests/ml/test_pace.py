"""Emulated device speed: paced work takes 1/speed of its CPU time, waiting is not stretched."""

from __future__ import annotations

import time

import pytest

from tessera_ml.pace import Pace, pace_option


def _spin(cpu_s: float) -> None:
    began = time.process_time()
    while time.process_time() - began < cpu_s:
        pass


def test_paced_work_sleeps_for_the_missing_share_of_its_cpu_time() -> None:
    pace = Pace(0.25)
    began_cpu = time.process_time()
    began = time.perf_counter()
    with pace.work():
        _spin(0.05)
    cpu = time.process_time() - began_cpu
    wall = time.perf_counter() - began
    # three times the CPU time on top of the work itself, and the sleep costs no CPU
    assert pace.slept_s == pytest.approx(3 * cpu, rel=0.2)
    assert wall >= 4 * 0.05 * 0.95
    assert cpu < 0.05 * 1.5


def test_waiting_is_not_stretched() -> None:
    pace = Pace(0.1)
    with pace.work():
        time.sleep(0.05)
    assert pace.slept_s < 0.05


def test_full_speed_never_sleeps_and_bad_speeds_are_refused() -> None:
    pace = Pace(1.0)
    with pace.work():
        _spin(0.01)
    assert pace.slept_s == 0.0
    for speed in (0.0, -1.0, 1.5):
        with pytest.raises(ValueError, match="pace"):
            Pace(speed)


def test_pace_option_reads_this_process_entry() -> None:
    assert pace_option({}, 0) == 1.0
    assert pace_option({"pace": [1.0, 0.5]}, 1) == 0.5
    with pytest.raises(ValueError, match="one speed"):
        pace_option({"pace": [1.0]}, 1)
