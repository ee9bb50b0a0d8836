"""The ``tessera`` command. Each subcommand lives with the part of the system it drives."""

from __future__ import annotations

import importlib
import sys

# subcommand -> (module with ``main(argv) -> int``, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "api": ("tessera_api.serve", "serve the control plane (migrates the database first)"),
    "up": ("tessera_worker.up", "start the control plane, a local worker and the dashboard"),
    "worker": ("tessera_worker.cli", "run one party's worker"),
    "bench": ("tessera_ml.bench.cli", "benchmark an algorithm against its baseline"),
}


def usage() -> str:
    lines = ["usage: tessera COMMAND [ARGS]", "", "commands:"]
    lines += [f"  {name:<8} {text}" for name, (_, text) in COMMANDS.items()]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] in {"-h", "--help"}:
        print(usage())
        return 0
    name, rest = args[0], args[1:]
    if name not in COMMANDS:
        print(f"tessera: unknown command {name!r}\n\n{usage()}", file=sys.stderr)
        return 2
    module = importlib.import_module(COMMANDS[name][0])
    code: int = module.main(rest)
    return code


if __name__ == "__main__":
    raise SystemExit(main())
