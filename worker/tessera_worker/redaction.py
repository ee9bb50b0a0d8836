"""Where this host keeps things, hidden from text that leaves it.

A rank's log lines and a failed rank's last lines go to the control plane, where every party of
the job reads them. Tracebacks and warnings name files by their full path; these become names
another party learns nothing from: a file of an installed package or of the worker's code by its
module path (``torch/distributed/distributed_c10d.py``), the worker's home as ``$TESSERA_HOME``,
the interpreter's folder as ``<python>`` and the user's home as ``~``.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

PYTHON = "<python>"


class HostPaths:
    def __init__(self, tessera_home: Path | None = None) -> None:
        names: dict[str, str] = {}
        for folder in sys.path:
            _name(names, folder or os.getcwd(), "")
        for folder in (sys.prefix, sys.base_prefix, sys.exec_prefix):
            _name(names, folder, PYTHON)
        if tessera_home is not None:
            _name(names, str(tessera_home), "$TESSERA_HOME")
        _name(names, str(Path.home()), "~")
        self._names = names
        longest_first = sorted(names, key=len, reverse=True)
        # a folder where a path starts (not inside a longer one: ``/data`` in ``/mnt/data``),
        # followed by "/" or ending where its name ends (a full stop may end the sentence)
        self._pattern = re.compile(
            "|".join(rf"(?<![\w.\-/~$]){re.escape(f)}(?:/|(?![\w-]|\.\w))" for f in longest_first)
            or r"(?!)"
        )

    def hide(self, text: str) -> str:
        return self._pattern.sub(self._swap, text)

    def _swap(self, found: re.Match[str]) -> str:
        text = found.group(0)
        if text.endswith("/"):
            name = self._names[text[:-1]]
            return f"{name}/" if name else ""
        return self._names[text] or PYTHON


def _name(names: dict[str, str], folder: str, name: str) -> None:
    """Name ``folder`` (and where it really lies, if a link leads there) unless already named."""
    if not os.path.isabs(folder):
        return
    for form in {os.path.normpath(folder), os.path.realpath(folder)}:
        if len(form) > 1:
            names.setdefault(form, name)
