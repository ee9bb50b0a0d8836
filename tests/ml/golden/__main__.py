"""Rerun the golden jobs and rewrite their files: ``python -m tests.ml.golden [ALGORITHM ...]``.

Only for a deliberate change of a method (see README.md). For each job it prints the number of
points and, when a file was there before, how far the new curve is from it in units of the
tolerance (below 1: within it).
"""

from __future__ import annotations

import argparse
import sys
import time

from tests.ml.golden.curves import (
    JOBS,
    document,
    load,
    problems,
    render,
    run_curve,
    stored_curve,
    worst_ratio,
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.ml.golden", description=__doc__)
    parser.add_argument(
        "algorithms",
        nargs="*",
        metavar="ALGORITHM",
        help=f"any of {', '.join(JOBS)} (default: all)",
    )
    args = parser.parse_args(argv)
    names: list[str] = args.algorithms or list(JOBS)
    unknown = [name for name in names if name not in JOBS]
    if unknown:
        parser.error(f"no golden job for {', '.join(unknown)}; choose from {', '.join(JOBS)}")
    for name in names:
        job = JOBS[name]
        previous = stored_curve(load(job)) if job.path.exists() else None
        began = time.perf_counter()
        curve = run_curve(job)
        elapsed = time.perf_counter() - began
        if not curve:
            print(f"{name}: the run reported no loss; {job.path.name} left as it was")
            return 1
        job.path.write_text(render(document(job, curve)))
        note = "new file"
        if previous is not None:
            changed = len(problems(previous, curve, job.tolerance))
            ratio = worst_ratio(previous, curve, job.tolerance)
            note = f"{ratio:.3g} of the tolerance from the old curve, {changed} points beyond it"
        print(f"{name}: {len(curve)} points in {elapsed:.1f} s; {note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
