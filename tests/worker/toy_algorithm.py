"""A tiny rank entry point for launcher tests: all-reduces a counter once per step.

``plant`` replaces files of its task's folder with links (``links``: path -> target) and
FIFOs (``fifos``), then exits with code 1, as a rank trying to make its worker read for it would.
``peek`` instead prints, as one JSON line, what the rank finds at each of the ``paths`` its
configuration names ("missing", "unreadable" or the file's text), whether it could write
each of ``try_write`` and signal each process of ``signal``, then writes ``write_to``; with
``daemon`` set, it first starts a process in a session of its own that sleeps for ten minutes
(``daemon_s``) with that word on its command line, as a rank leaving something behind would,
keeping the rank's open files with ``daemon_keeps_fds``.

Options of ``run`` come from the configuration: ``steps``, ``step_s`` (sleep per step),
``crash_rank`` and ``crash_step`` (that rank raises there, from a cause that quotes private
data), ``hang_rank`` and ``hang_step`` (that rank sleeps for an hour there),
``checkpoint_every``, ``chatty`` (print each step and log a warning through ``logging`` once).
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from tessera_ml.context import RankContext

ENTRY_POINT = "tests.worker.toy_algorithm:run"
PRIVATE_CAUSE = "could not convert 'Jane Roe (MRN 884213)' in row 7"


def run(ctx: RankContext) -> dict[str, Any]:
    options: dict[str, Any] = dict(ctx.config.model_extra or {})
    steps = int(options.get("steps", 3))
    state = ctx.load_checkpoint() or {"step": 0, "total": 0.0}
    start = int(state["step"])
    ctx.reporter.log(f"starting at step {start}")
    total = float(state["total"])
    if options.get("chatty"):
        logging.getLogger("toy").warning("a warning through logging")
    for step in range(start + 1, steps + 1):
        if ctx.stop.is_set():
            break
        if ctx.rank == options.get("crash_rank") and step == options.get("crash_step", 1):
            raise RuntimeError(f"boom at step {step}") from ValueError(PRIVATE_CAUSE)
        if ctx.rank == options.get("hang_rank") and step == options.get("hang_step", 1):
            time.sleep(3600)
        value = torch.tensor([float(ctx.rank + 1)], device=ctx.device)
        ctx.comm.all_reduce(value)
        total += float(value.item())
        ctx.reporter.metrics(step, {"loss": 1.0 / step, "total": total})
        ctx.reporter.progress(step, steps)
        if options.get("chatty"):
            print(f"toy step {step} done")
        every = int(options.get("checkpoint_every", 0))
        if every and step % every == 0:
            ctx.save_checkpoint(step, {"step": step, "total": total})
        time.sleep(float(options.get("step_s", 0.0)))
    return {"total": total, "start": start}


def peek(ctx: RankContext) -> dict[str, Any]:
    options: dict[str, Any] = dict(ctx.config.model_extra or {})
    seen: dict[str, str] = {}
    for path in options["paths"]:
        try:
            seen[path] = Path(path).read_text()
        except FileNotFoundError:
            seen[path] = "missing"
        except OSError as exc:
            seen[path] = f"unreadable: {exc.strerror}"
    for path in options.get("try_write", []):
        try:
            Path(path).write_text("written by the rank")
            seen[f"write {path}"] = "written"
        except OSError as exc:
            seen[f"write {path}"] = f"refused: {exc.strerror}"
    seen["tmpdir"] = tempfile.gettempdir()
    for pid in options.get("signal", []):
        try:
            os.kill(pid, 0)
            seen[f"signal {pid}"] = "sent"
        except OSError as exc:
            seen[f"signal {pid}"] = type(exc).__name__
    if options.get("daemon"):
        wait = f"import time; time.sleep({float(options.get('daemon_s', 600))})"
        sleep = [sys.executable, "-c", wait, options["daemon"]]
        keep = bool(options.get("daemon_keeps_fds"))
        subprocess.Popen(
            sleep, start_new_session=True, stdout=subprocess.DEVNULL, close_fds=not keep
        )
    print("peek " + json.dumps(seen), flush=True)
    Path(options["write_to"]).write_text("written by the rank")
    return {}


def plant(ctx: RankContext) -> dict[str, Any]:
    options: dict[str, Any] = dict(ctx.config.model_extra or {})
    for path, target in options.get("links", {}).items():
        Path(path).unlink(missing_ok=True)
        os.symlink(target, path)
    for path in options.get("fifos", []):
        Path(path).unlink(missing_ok=True)
        os.mkfifo(path)
    os._exit(1)
