"""The dealer rank (trusted third party), and the wire it shares with party 1's provider.

The dealer sends each compute party a 32-byte seed once, then answers party 1's commands
(``Command``) in order: it records a phase's request sequence item by item the first time, and
afterwards sends each run of the phase as one bundle, party 1's shares of every item's slots but
the masks, end to end (``bundle_bytes``). It makes a phase's next bundle as soon as it has sent
the current one, while the parties compute online. The parties' side is ``providers.py``.

Each party's seeded shares of the n-th run of phase ``key`` come from a cryptographic stream
keyed by a hash of (its 32-byte seed, key, n) (``bundle_generator``, ``prg.Prg``): the dealer can
make a bundle before it is asked for, whatever other phases come between, and both sides still
draw the same shares; neither compute party can rebuild the other's.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections import Counter
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from enum import IntEnum

import torch

from tessera_ml.algorithms.mpc_mixed.material import (
    SlotBuffer,
    deal,
    deal_drawn,
    free,
    grouped,
    layout,
    sent,
    slot_bytes,
)
from tessera_ml.algorithms.mpc_mixed.material_kind import Slot
from tessera_ml.algorithms.mpc_mixed.prg import KEY_BYTES, Prg
from tessera_ml.algorithms.mpc_mixed.request import WIRE_WORDS, Request
from tessera_ml.comm.base import Communicator


class Command(IntEnum):
    """What party 1 asks of the dealer rank (the first of two int64 words; the second is a
    phase key or a step)."""

    STOP = 0
    RECORD = 1
    BUNDLE = 2
    CHECKPOINT = 3


def bundle_generator(seed: bytes, key: int, run: int) -> Prg:
    """A party's stream for the ``run``-th time phase ``key`` is served (counted from 0)."""
    return Prg.derived(seed, key, run)


def bundle_bytes(reqs: list[Request]) -> int:
    """What the dealer sends party 1 for ``reqs``: its shares of every slot but the masks."""
    return sum(slot_bytes(layout(req)[i]) for req in reqs for i in sent(req))


def join_bundle(items: list[list[torch.Tensor]]) -> torch.Tensor:
    parts = [t.contiguous().reshape(-1).view(torch.uint8) for item in items for t in item]
    return torch.cat(parts) if parts else torch.empty(0, dtype=torch.uint8)


def mask_and_sent_slots(reqs: list[Request]) -> tuple[list[Slot], list[Slot]]:
    """Party 1's slots of ``reqs``: the masks (each item's in ``free`` order), the others."""
    masks: list[Slot] = []
    others: list[Slot] = []
    for req in reqs:
        frees = free(req)
        masks += [layout(req)[i] for i in frees]
        others += [slot for i, slot in enumerate(layout(req)) if i not in frees]
    return masks, others


@torch.inference_mode()
def serve(
    comm: Communicator,
    party0: int,
    party1: int,
    on_checkpoint: Callable[[int], object] | None = None,
) -> dict[str, int]:
    """The dealer rank's loop: seed both parties, then serve party 1 until it says stop."""
    seed0, seed1 = os.urandom(KEY_BYTES), os.urandom(KEY_BYTES)
    comm.send(torch.frombuffer(bytearray(seed0), dtype=torch.uint8), party0)
    comm.send(torch.frombuffer(bytearray(seed1), dtype=torch.uint8), party1)
    schedules: dict[int, list[Request]] = {}
    draws: dict[int, _PhaseDraws] = {}
    runs: Counter[int] = Counter()
    ahead: dict[int, torch.Tensor] = {}  # phase -> the bundle of its next run, made early
    items = 0
    # one thread makes bundles ahead, at a lower priority: where the dealer shares a host with
    # the compute parties, their online phase comes first
    early_maker = ThreadPoolExecutor(1, "dealer-ahead", initializer=_lower_priority)
    making: Future[None] | None = None

    def make(req: Request, prg0: Prg, prg1: Prg) -> list[torch.Tensor]:
        share1 = deal(req, prg0, prg1)[1]
        return [share1[i] for i in sent(req)]

    def bundle(key: int, run: int) -> torch.Tensor:
        prg0, prg1 = bundle_generator(seed0, key, run), bundle_generator(seed1, key, run)
        if key not in draws:
            draws[key] = _PhaseDraws(schedules[key])
        return draws[key].bundle(prg0, prg1)

    def make_ahead(key: int, run: int) -> None:
        with torch.inference_mode():  # the buffers are inference tensors, as in this thread
            ahead[key] = bundle(key, run)

    try:
        while True:
            cmd = torch.empty(2, dtype=torch.int64)
            comm.recv(cmd, party1)
            op, key = int(cmd[0]), int(cmd[1])
            if making is not None:  # the bundle made ahead is in `ahead` before it is used
                making.result()
                making = None
            if op == Command.STOP:
                return {"items": items}
            if op == Command.RECORD:
                prg0, prg1 = (
                    bundle_generator(seed0, key, runs[key]),
                    bundle_generator(seed1, key, runs[key]),
                )
                runs[key] += 1
                recorded: list[Request] = []
                while True:
                    wire = torch.empty(WIRE_WORDS, dtype=torch.int64)
                    comm.recv(wire, party1)
                    req = Request.decode(wire)
                    if req is None:
                        break
                    recorded.append(req)
                    comm.send(join_bundle([make(req, prg0, prg1)]), party1)
                    items += 1
                schedules[key] = recorded
                draws.pop(key, None)  # buffers laid out for the schedule this one replaces
            elif op == Command.CHECKPOINT:
                if on_checkpoint is not None:
                    on_checkpoint(key)
            elif op == Command.BUNDLE:
                run = runs[key]
                runs[key] += 1
                early = ahead.pop(key, None)
                comm.send(bundle(key, run) if early is None else early, party1)
                items += len(schedules[key])
                # the next run of this phase, made while the parties compute this one
                making = early_maker.submit(make_ahead, key, run + 1)
            else:
                raise RuntimeError(f"dealer got unknown command {op}")
    finally:
        early_maker.shutdown()


class _PhaseDraws:
    """The dealer's buffers for a replayed phase: both parties' seeded shares of its run, party
    0's of every slot and party 1's of the masks, each drawn into one buffer (as each party
    draws its own), refilled every run, and the bundle, into which each item's sent shares
    are computed where party 1 will find them. Only one bundle is made at a time, and the
    dealer sends it (a send returns once its buffer may be reused) before it makes the next."""

    def __init__(self, schedule: list[Request]) -> None:
        layouts = [layout(req) for req in schedule]
        masks, sends = mask_and_sent_slots(schedule)
        self._share0 = SlotBuffer([slot for slots in layouts for slot in slots])
        self._masks1 = SlotBuffer(masks)
        self._bundle = SlotBuffer(sends)
        # each item's tensors in the buffers, the same every run
        share0 = grouped(self._share0.tensors, [len(slots) for slots in layouts])
        masks1 = grouped(self._masks1.tensors, [len(free(req)) for req in schedule])
        into = grouped(self._bundle.tensors, [len(sent(req)) for req in schedule])
        self._items = list(zip(schedule, share0, masks1, into, strict=True))

    def bundle(self, prg0: Prg, prg1: Prg) -> torch.Tensor:
        self._share0.draw(prg0)
        self._masks1.draw(prg1)
        for req, share0, masks1, into in self._items:
            deal_drawn(req, share0, masks1, into)
        return self._bundle.flush()


def _lower_priority() -> None:
    """Lower the calling thread's scheduling priority (Linux threads have their own)."""
    with contextlib.suppress(AttributeError, OSError):  # elsewhere it keeps the process's
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 10)


def receive_seed(comm: Communicator, dealer: int) -> bytes:
    """The seed the dealer gives this compute party (32 bytes)."""
    seed = torch.empty(KEY_BYTES, dtype=torch.uint8)
    comm.recv(seed, dealer)
    return bytes(seed.numpy())
