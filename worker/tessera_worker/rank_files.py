"""Files a rank writes and its worker then opens, opened without trusting what the rank left.

A rank may put anything in its task's log folder and its job's checkpoint folder: a link to a
file only the worker sees (its key, the party token's file), a folder that is a link, a FIFO.
The worker opens such files only through ``open_under``: each part of the path below the
folder the worker named is opened without following a link, and only a regular file is read
or written, without blocking on it.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO


def remove_tree(path: Path | str) -> bool:
    """Remove ``path`` and whatever a rank left in it, following no link, however deep (with
    ``rm``: ``shutil.rmtree`` recurses once per level on Python 3.11, so a deep enough tree
    raises ``RecursionError``); whether it is gone."""
    if not os.path.lexists(path):
        return True
    try:
        subprocess.run(["rm", "-rf", "--", os.fspath(path)], capture_output=True, check=False)
    except OSError:
        return False
    return not os.path.lexists(path)


_WALK = os.O_RDONLY | os.O_NOFOLLOW | os.O_DIRECTORY | os.O_CLOEXEC


def open_under(root: Path, path: Path, flags: int = os.O_RDONLY, mode: int = 0o600) -> int:
    """A descriptor of the regular file ``path``, which must lie in ``root``: no part of it
    below ``root`` may be a link, and it may not be a FIFO, a device or a folder."""
    parts = path.relative_to(root).parts if path.is_relative_to(root) else ()
    if not parts or ".." in parts:
        raise OSError(errno.EINVAL, "not a file inside its folder", str(path))
    folder = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for part in parts[:-1]:
            inner = os.open(part, _WALK, dir_fd=folder)
            os.close(folder)
            folder = inner
        flags |= os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
        fd = os.open(parts[-1], flags, mode, dir_fd=folder)
    finally:
        os.close(folder)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(errno.EINVAL, "not a regular file", str(path))
    os.set_blocking(fd, True)
    return fd


@contextlib.contextmanager
def reading(root: Path, path: Path) -> Iterator[BinaryIO]:
    with os.fdopen(open_under(root, path), "rb") as file:
        yield file


def read_text(root: Path, path: Path, limit: int = 1 << 20) -> str:
    """The file's first ``limit`` bytes, as text."""
    with reading(root, path) as file:
        return file.read(limit).decode("utf-8", "replace")


def write_text(root: Path, path: Path, text: str) -> None:
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
    with os.fdopen(open_under(root, path, flags), "wb") as file:
        file.write(text.encode())


def tail(root: Path, path: Path, lines: int = 20, max_bytes: int = 64 * 1024) -> list[str]:
    """The last ``lines`` non-empty lines of a rank's file ([] if it cannot be read)."""
    try:
        with reading(root, path) as file:
            file.seek(0, os.SEEK_END)
            file.seek(max(0, file.tell() - max_bytes))
            text = file.read().decode("utf-8", "replace")
    except OSError:
        return []
    return [line for line in text.splitlines() if line.strip()][-lines:]
