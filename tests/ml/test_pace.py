"""Emulated device speed: paced work takes 1/speed of its thread's CPU time, waiting is not
stretched, and each thread paces its own work."""

from __future__ import annotations

import pickle
import threading
import time

import pytest

from tessera_ml.bench.harness import BenchHarness
from tessera_ml.pace import Pace


def _spin(cpu_s: float) -> None:
    began = time.thread_time()
    while time.thread_time() - began < cpu_s:
        pass


def test_paced_work_sleeps_for_the_missing_share_of_its_cpu_time() -> None:
    pace = Pace(0.25)
    began_cpu = time.thread_time()
    began = time.perf_counter()
    with pace.work():
        _spin(0.05)
    cpu = time.thread_time() - began_cpu
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


def test_another_threads_work_does_not_stretch_this_threads_block() -> None:
    pace = Pace(0.1)
    helper = threading.Thread(target=_spin, args=(0.05,))
    with pace.work():
        helper.start()
        helper.join()
    # 0.05 s of CPU in the process while the block waited: a process-wide clock would sleep
    # 0.45 s for it
    assert pace.slept_s < 0.05


def test_threads_pace_their_own_blocks() -> None:
    pace = Pace(0.5)

    def paced() -> None:
        with pace.work():
            _spin(0.03)

    helpers = [threading.Thread(target=paced) for _ in range(2)]
    for helper in helpers:
        helper.start()
    for helper in helpers:
        helper.join()
    # each sleeps for its own 0.03 s of CPU
    assert pace.slept_s == pytest.approx(0.06, rel=0.3)


def test_catch_up_sleeps_for_the_work_so_far_and_the_block_only_for_what_follows() -> None:
    pace = Pace(0.25)
    pace.catch_up()  # outside a block: nothing
    assert pace.slept_s == 0.0
    with pace.work():
        _spin(0.02)
        pace.catch_up()
        caught_up = pace.slept_s
        _spin(0.01)
    assert caught_up == pytest.approx(3 * 0.02, rel=0.3)
    assert pace.slept_s - caught_up == pytest.approx(3 * 0.01, rel=0.4)


def test_a_block_inside_another_is_paced_with_the_outer_one() -> None:
    pace = Pace(0.5)
    with pace.work():
        with pace.work():
            _spin(0.02)
        inner_done = pace.slept_s
        _spin(0.02)
    # nothing slept when the inner block ended; the outer one sleeps for both
    assert inner_done == 0.0
    assert pace.slept_s == pytest.approx(0.04, rel=0.3)


def test_a_pace_in_use_travels_to_another_process_with_its_speed() -> None:
    pace = Pace(0.5)
    with pace.work():
        _spin(0.01)
    harness = BenchHarness(speed=0.5)
    with harness.work():
        pass
    copy, harness_copy = pickle.loads(pickle.dumps((pace, harness)))
    assert (copy.speed, copy.slept_s) == (0.5, pace.slept_s)
    with copy.work():
        _spin(0.01)
    assert copy.slept_s > pace.slept_s
    with harness_copy.work():
        _spin(0.01)
        harness_copy.catch_up()
    # the harness's pace came along and paced the block
    assert harness_copy._pace is not None
    assert harness_copy._pace.speed == 0.5
    assert harness_copy._pace.slept_s > 0.0


def test_full_speed_never_sleeps_and_bad_speeds_are_refused() -> None:
    pace = Pace(1.0)
    with pace.work():
        _spin(0.01)
        pace.catch_up()
    assert pace.slept_s == 0.0
    for speed in (0.0, -1.0, 1.5):
        with pytest.raises(ValueError, match="pace"):
            Pace(speed)
