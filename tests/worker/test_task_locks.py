"""What a killed worker's tasks leave behind is removed by the next worker of the home, and
nothing of a task another process is running (real processes, real ``flock``)."""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tessera_worker import task_locks
from tessera_worker.launcher import LaunchSettings, shared_memory
from tessera_worker.rank_files import remove_tree

# a task as the runtime runs one: its lock first, then its folders; it stops at a line on stdin
TASK = """
import os, sys
from pathlib import Path
from tessera_worker import task_locks
home, task = Path(sys.argv[1]), sys.argv[2]
with task_locks.running(home, task):
    (home / "tasks" / task / "tls").mkdir(parents=True)
    (home / "tasks" / task / "tls" / "task.key").write_text("secret")
    (home / "logs" / task).mkdir(parents=True)
    (home / "logs" / task / "rank-0.log").write_text("trained")
    os.mkdir(f"/dev/shm/tessera-{task}", 0o700)
    print("running", flush=True)
    sys.stdin.readline()
"""


@pytest.fixture
def settings(tmp_path: Path) -> Iterator[LaunchSettings]:
    settings = LaunchSettings(home=tmp_path / "home")
    yield settings
    for task in (settings.home / "tasks").glob("*"):
        remove_tree(shared_memory(task.name))
    remove_tree(settings.home)  # a tree too deep for pytest's own clean-up, if a test failed


def start_task(settings: LaunchSettings) -> tuple[str, subprocess.Popen[str]]:
    task = str(uuid.uuid4())
    proc = subprocess.Popen(
        [sys.executable, "-c", TASK, str(settings.home), task],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stdout.readline() == "running\n"
    return task, proc


def killed_task(settings: LaunchSettings) -> str:
    """A task whose worker was killed with SIGKILL while it ran."""
    task, proc = start_task(settings)
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    return task


def left_by(settings: LaunchSettings, task: str) -> dict[str, bool]:
    return {
        "credentials": settings.task_dir(task).exists(),
        "shared memory": os.path.exists(shared_memory(task)),
        "logs": settings.log_dir(task).exists(),
        "lock": (settings.home / "locks" / task).exists(),
    }


def test_a_killed_tasks_credentials_and_shared_memory_go_and_its_logs_stay(
    settings: LaunchSettings,
) -> None:
    task = killed_task(settings)
    assert all(left_by(settings, task).values())

    assert task_locks.sweep(settings) == ([task], [])

    gone = {"credentials": False, "shared memory": False, "logs": True, "lock": False}
    assert left_by(settings, task) == gone
    assert (settings.log_dir(task) / "rank-0.log").read_text() == "trained"


def test_a_running_tasks_folders_stay_until_it_ends(settings: LaunchSettings) -> None:
    killed = killed_task(settings)
    running, proc = start_task(settings)
    try:
        assert task_locks.sweep(settings) == ([killed], [])
        assert all(left_by(settings, running).values())
    finally:
        assert proc.stdin is not None
        proc.stdin.write("\n")
        proc.stdin.close()
        assert proc.wait(10) == 0
    # ended without removing its folders (the runtime does that): they are a killed task's now
    assert not left_by(settings, running)["lock"]
    assert task_locks.sweep(settings) == ([running], [])


def test_a_task_starting_during_a_sweep_holds_a_lock_the_next_sweep_sees(
    settings: LaunchSettings,
) -> None:
    task = str(uuid.uuid4())
    path = settings.home / "locks" / task
    path.parent.mkdir(parents=True)
    # a sweep of a stale lock, caught between taking it and removing the file
    stale = os.open(path, os.O_RDWR | os.O_CREAT)
    fcntl.flock(stale, fcntl.LOCK_EX)
    held, release = threading.Event(), threading.Event()

    def run() -> None:
        with task_locks.running(settings.home, task):
            settings.task_dir(task).mkdir(parents=True)
            held.set()
            release.wait(10)

    thread = threading.Thread(target=run)
    thread.start()
    try:
        assert not held.wait(0.3)  # it waits for the sweep
        path.unlink()
        os.close(stale)
        assert held.wait(10)
        # another process sweeping now finds the task running
        sweep = "from tessera_worker import task_locks, launcher; import sys, pathlib; "
        sweep += "print(task_locks.sweep(launcher.LaunchSettings(home=pathlib.Path(sys.argv[1]))))"
        out = subprocess.run(
            [sys.executable, "-c", sweep, str(settings.home)], capture_output=True, text=True
        )
        assert out.stdout.strip() == "([], [])", out.stderr
        assert settings.task_dir(task).exists()
    finally:
        release.set()
        thread.join(10)
    assert not path.exists()


def _nest(folder: Path, depth: int) -> None:
    """``depth`` folders one in another under ``folder``, as a rank may leave them."""
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    for _ in range(depth):
        os.mkdir("d", dir_fd=fd)
        inner = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = inner
    os.close(fd)


def test_folders_nested_deeper_than_pythons_recursion_are_removed(
    settings: LaunchSettings,
) -> None:
    task = killed_task(settings)
    _nest(settings.task_dir(task), sys.getrecursionlimit() + 500)
    _nest(Path(shared_memory(task)), sys.getrecursionlimit() + 500)

    assert task_locks.sweep(settings) == ([task], [])
    assert not any(left_by(settings, task)[k] for k in ("credentials", "shared memory"))


def test_a_task_it_cannot_look_at_is_named_and_the_others_are_swept(
    settings: LaunchSettings,
) -> None:
    task = killed_task(settings)
    (settings.home / "locks" / "odd").mkdir()  # not a file: it cannot be locked

    swept, problems = task_locks.sweep(settings)

    assert swept == [task]
    assert len(problems) == 1 and problems[0].startswith("task odd: ")
