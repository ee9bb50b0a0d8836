"""What a rank prints reaches the reporter line by line and still reaches its own stream."""

from __future__ import annotations

import io
import sys

from tessera_ml.report import MemoryReporter
from tessera_worker.output import LineForwarder, forward_output


def test_complete_lines_are_reported_and_written_through() -> None:
    reporter = MemoryReporter()
    stream = io.StringIO()
    out = LineForwarder(stream, reporter, "info")
    out.write("step 1 loss")
    assert reporter.lines == []
    out.write(" 0.5\nstep 2\n\npartial")
    out.close_line()
    assert reporter.lines == [("info", "step 1 loss 0.5"), ("info", "step 2"), ("info", "partial")]
    assert stream.getvalue() == "step 1 loss 0.5\nstep 2\n\npartial"


class PrintingReporter(MemoryReporter):
    """A reporter that prints while reporting, as an HTTP client's warnings might."""

    def log(self, message: str, *, level: str = "info") -> None:
        print(f"reporting {message}", file=sys.stderr)
        super().log(message, level=level)


def test_stdout_and_stderr_are_forwarded_without_feedback_loops() -> None:
    reporter = PrintingReporter()
    with forward_output(reporter):
        print("hello")
        print("oops", file=sys.stderr)
    assert reporter.lines == [("info", "hello"), ("error", "oops")]
    assert not isinstance(sys.stdout, LineForwarder)
