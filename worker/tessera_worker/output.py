"""Ship what a rank prints and logs to the control plane as log lines, still writing it locally.

Lines on stdout are reported at ``info``; lines on stderr at the level they announce (a
``Warning:`` or a native ``[W…]`` line is a warning, a ``[I…]`` line is information) and otherwise
at ``error``. Records of Python's ``logging`` are reported at their own level.
"""

from __future__ import annotations

import logging
import re
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TextIO

from tessera_ml.report import Reporter

MAX_LINE = 16_000
_reporting = threading.local()  # shared by stdout and stderr: a reporter that prints never loops

_NATIVE = re.compile(r"^\[([DIWEF])\d{0,4}[ \d:.]")
_NATIVE_LEVELS = {"D": "debug", "I": "info", "W": "warning", "E": "error", "F": "critical"}
_WARNING = re.compile(r"\bwarn(ing)?\b", re.IGNORECASE)


def stderr_level(line: str) -> str:
    """The level a line on standard error announces; ``error`` when it announces none."""
    native = _NATIVE.match(line)
    if native:
        return _NATIVE_LEVELS[native.group(1)]
    return "warning" if _WARNING.search(line[:200]) else "error"


class LineForwarder:
    """A text stream that writes through to ``stream`` and reports each complete line."""

    def __init__(self, stream: TextIO, reporter: Reporter, level: str | None) -> None:
        """``level`` None: each line at the level it announces (``stderr_level``)."""
        self._stream = stream
        self._reporter = reporter
        self._level = level
        self._partial = ""
        self._lock = threading.Lock()

    def write(self, text: str) -> int:
        self._stream.write(text)
        if getattr(_reporting, "active", False):
            return len(text)
        with self._lock:
            lines = (self._partial + text).split("\n")
            self._partial = lines.pop()
        self._report(lines)
        return len(text)

    def _report(self, lines: list[str]) -> None:
        _reporting.active = True
        try:
            for line in lines:
                if line.strip():
                    level = self._level or stderr_level(line)
                    self._reporter.log(line[:MAX_LINE], level=level)
        finally:
            _reporting.active = False

    def flush(self) -> None:
        self._stream.flush()

    def close_line(self) -> None:
        """Report a last line that never got its newline."""
        with self._lock:
            rest, self._partial = self._partial, ""
        self._report([rest])

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


class ReportingHandler(logging.Handler):
    """Reports each ``logging`` record at its level and writes it to ``stream``."""

    def __init__(self, reporter: Reporter, stream: TextIO) -> None:
        super().__init__()
        self._reporter = reporter
        self._stream = stream
        self.setFormatter(logging.Formatter("%(name)s: %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        if getattr(_reporting, "active", False):
            return
        _reporting.active = True
        try:
            text = self.format(record)
            self._stream.write(f"{record.levelname} {text}\n")
            level = record.levelname.lower()
            if level not in ("debug", "info", "warning", "error", "critical"):
                level = "info"
            self._reporter.log(text[:MAX_LINE], level=level)
        except Exception:
            self.handleError(record)
        finally:
            _reporting.active = False


@contextmanager
def forward_output(reporter: Reporter) -> Iterator[None]:
    """While inside, stdout, stderr and ``logging`` records are reported (see the module)."""
    out = LineForwarder(sys.stdout, reporter, "info")
    err = LineForwarder(sys.stderr, reporter, None)
    saved = sys.stdout, sys.stderr
    handler = ReportingHandler(reporter, saved[1])
    root = logging.getLogger()
    sys.stdout, sys.stderr = out, err
    root.addHandler(handler)
    try:
        yield
    finally:
        root.removeHandler(handler)
        sys.stdout, sys.stderr = saved
        out.close_line()
        err.close_line()
