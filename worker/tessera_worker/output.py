"""Ship what a rank prints to the control plane as log lines, while still writing it locally."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TextIO

from tessera_ml.report import Reporter

MAX_LINE = 16_000
_reporting = threading.local()  # shared by stdout and stderr: a reporter that prints never loops


class LineForwarder:
    """A text stream that writes through to ``stream`` and reports each complete line."""

    def __init__(self, stream: TextIO, reporter: Reporter, level: str) -> None:
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
                    self._reporter.log(line[:MAX_LINE], level=self._level)
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


@contextmanager
def forward_output(reporter: Reporter) -> Iterator[None]:
    """While inside, stdout lines are reported at ``info`` and stderr lines at ``error``."""
    out = LineForwarder(sys.stdout, reporter, "info")
    err = LineForwarder(sys.stderr, reporter, "error")
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = out, err
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved
        out.close_line()
        err.close_line()
