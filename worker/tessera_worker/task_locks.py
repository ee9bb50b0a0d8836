"""A lock each task holds in the worker's home while it runs (``locks/<task>``), so that a worker
starting up can remove what a killed worker's tasks left behind (their credentials, their
shared memory) without touching the tasks another worker of the same home is running.

A task takes its lock before it makes any of its folders and gives it up after it removed
them; the lock file goes while it is still held. Whoever takes a lock checks that the file is
still the one its path names, so that a lock taken on a file just removed counts for nothing.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tessera_worker.launcher import LaunchSettings, shared_memory
from tessera_worker.rank_files import remove_tree


def _folder(home: Path) -> Path:
    folder = home / "locks"
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    return folder


def _open(path: Path) -> int:
    return os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)


def _still_named(fd: int, path: Path) -> bool:
    try:
        named = os.stat(path, follow_symlinks=False)
    except FileNotFoundError:
        return False
    held = os.fstat(fd)
    return (named.st_dev, named.st_ino) == (held.st_dev, held.st_ino)


@contextmanager
def running(home: Path, task_id: str) -> Iterator[None]:
    """Hold ``task_id``'s lock for as long as the block runs (waiting while a starting worker
    sweeps it)."""
    path = _folder(home) / task_id
    while True:
        fd = _open(path)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            named = _still_named(fd, path)
        except BaseException:
            os.close(fd)
            raise
        if named:
            break
        os.close(fd)
    try:
        yield
    finally:
        with contextlib.suppress(OSError):
            path.unlink()
        os.close(fd)


def _remove(settings: LaunchSettings, task_id: str) -> bool:
    """Remove what ``task_id`` left; whether there was anything."""
    left = [settings.task_dir(task_id), Path(shared_memory(task_id))]
    found = [path for path in left if os.path.lexists(path)]
    for path in found:
        if not remove_tree(path):
            raise OSError(errno.ENOTEMPTY, "could not be removed", str(path))
    return bool(found)


def sweep(settings: LaunchSettings) -> tuple[list[str], list[str]]:
    """Remove the credentials and shared memory of every task of ``settings.home`` that no
    process runs; returns the ids of those it removed something of, and a line for each task
    it could not look at. Their logs stay: they hold what a rank left to deliver."""
    swept: list[str] = []
    problems: list[str] = []
    try:
        locks = _folder(settings.home)
        names = {p.name for p in locks.iterdir()}
        tasks = settings.home / "tasks"
        if tasks.is_dir():
            names |= {p.name for p in tasks.iterdir()}
    except OSError as exc:
        return swept, [f"{settings.home}: {exc}"]
    for task_id in sorted(names):
        try:
            if _sweep_one(settings, locks / task_id, task_id):
                swept.append(task_id)
        except OSError as exc:
            problems.append(f"task {task_id}: {exc}")
    return swept, problems


def _sweep_one(settings: LaunchSettings, path: Path, task_id: str) -> bool:
    fd = _open(path)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False  # running
        if not _still_named(fd, path):
            return False  # it ended just now, and removed its folders itself
        removed = _remove(settings, task_id)
        path.unlink()
        return removed
    finally:
        os.close(fd)
