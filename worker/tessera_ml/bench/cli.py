"""``tessera bench NAME [--quick] [--json PATH] [--netns] [--model M] [--set key=value …]``.

Imports ``tessera_ml.bench.NAME.bench``, runs ``bench(BenchArgs)`` (the algorithm and its
baseline in one invocation), prints a table and optionally writes
``{"algorithm": NAME, "params": {…}, "results": {…}}`` as JSON.
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import pkgutil
import signal
import sys
import time
from pathlib import Path
from typing import Any

from tessera_ml import algorithms
from tessera_ml import bench as benches
from tessera_ml.bench.api import BenchArgs, BenchReport, Sets
from tessera_ml.output_file import unwritable, write_results

EXIT_USAGE = 2
EXIT_UNAVAILABLE = 3


def available() -> list[str]:
    """Algorithms with a benchmark: a package ``tessera_ml.bench.NAME`` holding ``bench.py``
    for an algorithm ``tessera_ml.algorithms.NAME``."""
    names = []
    for info in pkgutil.iter_modules(benches.__path__):
        folder = Path(benches.__path__[0]) / info.name
        shipped = (Path(algorithms.__path__[0]) / info.name).is_dir()
        if info.ispkg and shipped and (folder / "bench.py").is_file():
            names.append(info.name)
    return sorted(names)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="tessera bench",
        description="Run an algorithm and its baseline side by side; print and save the numbers.",
    )
    p.add_argument("name", help="algorithm name (one with a bench.py)")
    p.add_argument("--quick", action="store_true", help="small run, under a minute on 2 CPUs")
    p.add_argument("--json", type=Path, metavar="PATH", help="write the results as JSON")
    p.add_argument(
        "--netns", action="store_true", help="run ranks on simulated hosts with limited links"
    )
    p.add_argument("--model", help="algorithm-specific model choice")
    p.add_argument(
        "--set",
        dest="sets",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="algorithm-specific option (repeatable)",
    )
    return p


def parse_sets(items: list[str]) -> Sets:
    extra = Sets()
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--set takes KEY=VALUE, got {item!r}")
        extra[key.strip()] = value.strip()
    return extra


def main(argv: list[str] | None = None) -> int:
    try:
        args = parser().parse_args(argv)
    except SystemExit as exit_:
        return int(exit_.code or 0)
    known = available()
    if args.name not in known:
        _error(f"no benchmark for {args.name!r}; known: {', '.join(known) or 'none'}")
        return EXIT_USAGE
    try:
        extra = parse_sets(args.sets)
    except ValueError as exc:
        _error(str(exc))
        return EXIT_USAGE
    problem = unwritable(args.json, "--json") if args.json is not None else None
    if problem is not None:
        _error(problem)
        return EXIT_USAGE
    if args.netns:
        from tessera_ml.netns import unavailable_reason

        reason = unavailable_reason()
        if reason is not None:
            _error(f"--netns is not possible here: {reason}")
            return EXIT_UNAVAILABLE
    bench_args = BenchArgs(quick=args.quick, netns=args.netns, model=args.model, extra=extra)
    if args.netns:
        signal.signal(signal.SIGTERM, _exit_on_sigterm)  # unwind, so the testbed is removed
    module = importlib.import_module(f"{benches.__name__}.{args.name}.bench")
    if args.model is not None and not getattr(module, "TAKES_MODEL", True):
        _error(f"the {args.name} bench takes no --model; its model is set with --set")
        return EXIT_USAGE
    started = time.perf_counter()
    try:
        report: BenchReport = module.bench(bench_args)
    except ValueError as exc:
        _error(str(exc))
        return EXIT_USAGE
    elapsed = time.perf_counter() - started
    document = {"algorithm": args.name, "params": report.params, "results": report.results}
    print(render(args.name, report, elapsed))
    if args.json is not None:
        text = json.dumps(_plain(document), indent=2, sort_keys=True) + "\n"
        if not write_results(args.json, text, "--json"):
            return 1
        print(f"wrote {args.json}")
    return 0


def render(name: str, report: BenchReport, elapsed: float) -> str:
    rows = [(k, _show(v)) for k, v in report.params.items()]
    width = max([len(k) for k, _ in rows] + [len(k) for k in report.results] + [10])
    lines = [f"tessera bench {name} ({elapsed:.1f} s)", "", "params"]
    lines += [f"  {k:<{width}}  {v}" for k, v in rows]
    lines += ["", "results"]
    lines += [f"  {k:<{width}}  {_show(v)}" for k, v in sorted(report.results.items())]
    return "\n".join(lines)


def _show(value: Any) -> str:
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        return f"{value:.4g}" if abs(value) < 1e4 else f"{value:,.0f}"
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10_000:
        return f"{value:,}"
    return json.dumps(value) if isinstance(value, dict | list) else str(value)


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if hasattr(value, "item") and callable(value.item):
        return value.item()
    return value


def _exit_on_sigterm(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def _error(message: str) -> None:
    print(f"tessera bench: error: {message}", file=sys.stderr)
