"""A tiny rank entry point for launcher tests: all-reduces a counter once per step.

Options come from the configuration: ``steps``, ``step_s`` (sleep per step), ``crash_rank`` and
``crash_step`` (that rank raises there, from a cause that quotes private data), ``hang_rank``
and ``hang_step`` (that rank sleeps for an hour there), ``checkpoint_every``, ``chatty`` (print
each step and log a warning through ``logging`` once).
"""

from __future__ import annotations

import logging
import time
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
