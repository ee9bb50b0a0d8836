"""The ``tessera`` command. Each subcommand lives with the part of the system it drives."""

from __future__ import annotations

import importlib
import sys

# subcommand -> (module with ``main(argv) -> int``, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "api": ("tessera_api.serve", "serve the control plane (migrates the database first)"),
    "up": ("tessera_api.up", "start the control plane, a local worker and the dashboard"),
    "worker": ("tessera_worker.cli", "run one party's worker"),
    "bench": (
        "tessera_ml.bench.cli",
        "benchmark an algorithm against its baseline (`bench api`: the API under load)",
    ),
}

# ``tessera bench api`` measures the control plane itself: it lives here, away from the
# algorithm benchmarks (which need torch, which the control plane never imports)
SUBCOMMANDS: dict[tuple[str, str], str] = {("bench", "api"): "tessera_api.load_bench"}


def usage() -> str:
    lines = ["usage: tessera COMMAND [ARGS]", "", "commands:"]
    lines += [f"  {name:<8} {text}" for name, (_, text) in COMMANDS.items()]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args and args[0] in {"-h", "--help"}:
        print(usage())
        return 0
    if not args:
        print(f"tessera: a command is required\n\n{usage()}", file=sys.stderr)
        return 2
    name, rest = args[0], args[1:]
    if name not in COMMANDS:
        print(f"tessera: unknown command {name!r}\n\n{usage()}", file=sys.stderr)
        return 2
    target = SUBCOMMANDS.get((name, rest[0])) if rest else None
    if target is not None:
        module_name, rest = target, rest[1:]
    else:
        module_name = COMMANDS[name][0]
    module = importlib.import_module(module_name)
    code: int = module.main(rest)
    return code


if __name__ == "__main__":
    raise SystemExit(main())
