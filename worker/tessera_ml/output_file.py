"""A results file named on a command line: checked before a long run, so a path that cannot
be written fails at once and not after the numbers exist; written after it, and where writing
still fails, the numbers go to standard output rather than being lost. Torch-free: the
control plane's ``tessera bench api`` uses it too."""

from __future__ import annotations

import sys
from pathlib import Path


def unwritable(path: Path, flag: str) -> str | None:
    """Why ``path`` cannot take the results (``flag`` names the option), or None."""
    if path.is_dir():
        return f"{flag} {path} is a folder; give a file name"
    existed = path.exists()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a"):
            pass
    except OSError as exc:
        return f"{flag} {path} cannot be written: {exc.strerror or exc}"
    if not existed:
        path.unlink(missing_ok=True)
    return None


def write_results(path: Path, text: str, flag: str) -> bool:
    """Write ``text`` to ``path``; where that fails, say so and print it instead."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    except OSError as exc:
        print(
            f"{flag} {path} cannot be written ({exc.strerror or exc}); the results:",
            file=sys.stderr,
        )
        print(text)
        return False
    return True
