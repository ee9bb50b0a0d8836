"""A lock each task holds in the worker's home while it runs (``locks/<task>``), so that a worker
starting up can remove what a killed worker's tasks left behind (their credentials, their
shared memory) without touching the tasks another worker of the same home is running.

A task takes its lock before it makes any of its folders and gives it up after it removed
them; the lock file goes while it is still held. Whoever takes a lock checks that the file is
still the one its path names, so that a lock taken on a file just removed counts for nothing.
"""

from __future__ import annotations

import fcntl
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tessera_worker.launcher import LaunchSettings, shared_memory


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
        fcntl.flock(fd, fcntl.LOCK_EX)
        if _still_named(fd, path):
            break
        os.close(fd)
    try:
        yield
    finally:
        try:
            path.unlink()
        finally:
            os.close(fd)


def _remove(settings: LaunchSettings, task_id: str) -> None:
    shutil.rmtree(settings.task_dir(task_id), ignore_errors=True)
    # no link is followed: rmtree refuses a link in place of the folder
    shutil.rmtree(shared_memory(task_id), ignore_errors=True)


def sweep(settings: LaunchSettings) -> list[str]:
    """Remove the credentials and shared memory of every task of ``settings.home`` that no
    process runs; returns their ids. Their logs stay: they hold what a rank left to deliver."""
    locks = _folder(settings.home)
    tasks = settings.home / "tasks"
    names = {p.name for p in locks.iterdir()}
    if tasks.is_dir():
        names |= {p.name for p in tasks.iterdir()}
    swept = []
    for task_id in sorted(names):
        path = locks / task_id
        fd = _open(path)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue  # running
            if not _still_named(fd, path):
                continue  # it ended just now, and removed its folders itself
            _remove(settings, task_id)
            path.unlink()
            swept.append(task_id)
        finally:
            os.close(fd)
    return swept
