"""Providers of correlated randomness: what a compute party asks for its material.

A compute party asks its ``Provider`` for items in protocol order; both parties ask for the same
items in the same order. Party 0's shares are pseudo-random from a seed it shares with the dealer,
and so are party 1's shares of the items' masks, from a seed of its own (``material.deal``): only
party 1's shares of what is computed from the masks cross the network (dealer -> party 1: the
offline traffic; the dealer's side is ``dealer.py``).

Training repeats the same sequence of requests every step. A remote provider therefore records
the sequence of a phase (``begin(key)``) the first time, fetching item by item, and afterwards
receives the whole phase's material in one bundle before the phase starts (the offline phase),
so online rounds never wait for the dealer. When the caller says another run of the phase
follows (``begin(key, ahead=True)``), party 1 asks for that run's bundle as soon as it holds this
one, and receives it in the background while this run computes online, so the next ``begin``
finds it arrived. A replayed run makes no tensors: each party refills the same buffers every run
(party 1 keeps two for the dealer's bundles, the next run's arriving in one while this run uses
the other).
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections import Counter, deque
from dataclasses import dataclass, field

import torch

from tessera_ml.algorithms.mpc_mixed.dealer import (
    Command,
    bundle_bytes,
    bundle_generator,
    mask_and_sent_slots,
)
from tessera_ml.algorithms.mpc_mixed.material import (
    SlotBuffer,
    deal,
    draw_share0,
    free,
    grouped,
    layout,
    random_shares,
)
from tessera_ml.algorithms.mpc_mixed.prg import KEY_BYTES, Prg
from tessera_ml.algorithms.mpc_mixed.request import END, Request
from tessera_ml.comm.base import Communicator, Work


@dataclass
class OfflineStats:
    bytes_received: int = 0
    bytes_sent: int = 0
    messages: int = 0


class Provider(ABC):
    stats: OfflineStats

    @abstractmethod
    def get(self, req: Request) -> list[torch.Tensor]:
        """This party's shares of the next item. A replayed run's shares are refilled by the
        next run of its phase (``SlotBuffer``): whatever outlives the run is computed from
        them, never the tensors themselves."""

    def begin(self, key: int, ahead: bool = False) -> None:  # noqa: B027 - optional hook
        """A phase with a repeating request sequence starts (offline work happens here);
        ``ahead``: another run of it will follow, so its material may be fetched early."""

    def end(self) -> None:  # noqa: B027 - optional hook
        """The phase ends."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """No more phases."""

    def checkpoint(self, step: int) -> None:  # noqa: B027 - optional hook
        """The compute parties checkpointed at ``step``."""


class LocalDealer:
    """A dealer inside the process, serving two in-process parties (tests, benchmarks)."""

    def __init__(self, seed: int = 0) -> None:
        local = b"in-process dealer".ljust(KEY_BYTES, b".")
        self._prg0, self._prg1 = Prg.derived(local, seed, 0), Prg.derived(local, seed, 1)
        self._pending: tuple[deque[tuple[Request, list[torch.Tensor]]], ...] = (deque(), deque())
        self._lock = threading.Lock()

    def provider(self, party: int) -> Provider:
        return _LocalProvider(self, party)

    def take(self, party: int, req: Request) -> list[torch.Tensor]:
        with self._lock:
            if self._pending[party]:
                expected, shares = self._pending[party].popleft()
                if expected != req:
                    raise RuntimeError(f"parties asked for different material: {expected} {req}")
                return shares
            share0, share1 = deal(req, self._prg0, self._prg1)
            self._pending[1 - party].append((req, share1 if party == 0 else share0))
            return share0 if party == 0 else share1


@dataclass
class _LocalProvider(Provider):
    dealer: LocalDealer
    party: int
    stats: OfflineStats = field(default_factory=OfflineStats)

    def get(self, req: Request) -> list[torch.Tensor]:
        shares = self.dealer.take(self.party, req)
        if self.party == 1:  # what a dealer rank would send it
            self.stats.bytes_received += bundle_bytes([req])
        return shares


class RecordingProvider(Provider):
    """Records each phase's request sequence; replays prepared items on later runs of it."""

    def __init__(self) -> None:
        self.stats = OfflineStats()
        self._schedules: dict[int, list[Request]] = {}
        self._recording: list[Request] | None = None
        self._ready: deque[tuple[Request, list[torch.Tensor]]] = deque()
        self._key: int | None = None
        self._ahead = False

    def begin(self, key: int, ahead: bool = False) -> None:
        assert self._key is None, "phase already open"
        self._key, self._ahead = key, ahead
        schedule = self._schedules.get(key)
        if schedule is None:
            self._recording = []
            self._start_recording(key)
        else:
            self._ready = deque(zip(schedule, self._prepare(key, schedule), strict=True))
            if ahead:
                self._ask_ahead(key, schedule)

    def end(self) -> None:
        assert self._key is not None, "no phase open"
        if self._recording is not None:
            self._schedules[self._key] = self._recording
            self._stop_recording()
            if self._ahead:
                self._ask_ahead(self._key, self._recording)
        elif self._ready:
            raise RuntimeError("phase ended with unused material")
        self._recording = None
        self._key = None

    def get(self, req: Request) -> list[torch.Tensor]:
        if self._recording is not None:
            self._recording.append(req)
            return self._fetch(req)
        if not self._ready:
            if self._key is None:
                return self._fetch_unscheduled(req)
            raise RuntimeError("phase asked for more material than when it was recorded")
        expected, shares = self._ready.popleft()
        if expected != req:
            raise RuntimeError(f"phase deviates from its recorded schedule: {expected} {req}")
        return shares

    def _fetch_unscheduled(self, req: Request) -> list[torch.Tensor]:
        """A request outside any phase: a one-item phase that is never replayed."""
        self.begin(-1)
        shares = self.get(req)
        self.end()
        self._schedules.pop(-1, None)
        return shares

    def _start_recording(self, key: int) -> None:
        return None

    def _stop_recording(self) -> None:
        return None

    def _ask_ahead(self, key: int, schedule: list[Request]) -> None:
        """Start fetching the next run of ``key`` (its material arrives while this run goes on)."""
        return None

    @abstractmethod
    def _fetch(self, req: Request) -> list[torch.Tensor]: ...

    @abstractmethod
    def _prepare(self, key: int, schedule: list[Request]) -> list[list[torch.Tensor]]: ...


class _SeededRuns(RecordingProvider):
    """A provider that draws from the stream of each phase's run under the seed it shares with
    the dealer, counting runs as the dealer does."""

    def __init__(self, seed: bytes) -> None:
        super().__init__()
        self._seed = seed
        self._runs: Counter[int] = Counter()
        self._prg = bundle_generator(seed, 0, -1)

    def begin(self, key: int, ahead: bool = False) -> None:
        self._prg = bundle_generator(self._seed, key, self._runs[key])
        self._runs[key] += 1
        super().begin(key, ahead)


class SeededProvider(_SeededRuns):
    """Party 0: generates its shares from the seed shared with the dealer; sends nothing."""

    def __init__(self, seed: bytes) -> None:
        super().__init__(seed)
        self._buffers: dict[int, tuple[SlotBuffer, list[list[torch.Tensor]]]] = {}

    def _fetch(self, req: Request) -> list[torch.Tensor]:
        return draw_share0(req, self._prg)

    def _prepare(self, key: int, schedule: list[Request]) -> list[list[torch.Tensor]]:
        # every item's shares from one draw, into the tensors of the phase's last run: the
        # stream is consumed in the order draw_share0 takes it, item after item
        if key not in self._buffers:
            layouts = [layout(r) for r in schedule]
            buffer = SlotBuffer([slot for slots in layouts for slot in slots])
            self._buffers[key] = buffer, grouped(buffer.tensors, [len(s) for s in layouts])
        buffer, items = self._buffers[key]
        buffer.draw(self._prg)
        return [list(item) for item in items]


class FetchingProvider(_SeededRuns):
    """Party 1: draws its shares of the masks from the seed it shares with the dealer, and
    receives its other shares from the dealer rank."""

    def __init__(self, comm: Communicator, dealer: int, seed: bytes) -> None:
        super().__init__(seed)
        self._comm = comm
        self._dealer = dealer
        self._buffers: dict[int, _Bundles] = {}
        self._coming: dict[int, tuple[int, Work | None]] = {}
        """Per phase, the bundle of its next run asked for by ``_ask_ahead``: which of the
        phase's two buffers it goes to, and the receive to wait for (None once waited for: a
        gloo receive must not be waited for twice)."""

    def _send(self, t: torch.Tensor) -> None:
        self._comm.send(t, self._dealer)
        self.stats.bytes_sent += t.numel() * t.element_size()
        self.stats.messages += 1

    def _recv(self, t: torch.Tensor) -> torch.Tensor:
        # bundles asked for ahead come first: the dealer answers in order, and not every
        # communicator makes a receive wait for the receives posted before it
        self._arrive()
        self._comm.recv(t, self._dealer)
        return self._received(t)

    def _received(self, t: torch.Tensor) -> torch.Tensor:
        self.stats.bytes_received += t.numel() * t.element_size()
        self.stats.messages += 1
        return t

    def _start_recording(self, key: int) -> None:
        self._send(torch.tensor([Command.RECORD, key], dtype=torch.int64))

    def _stop_recording(self) -> None:
        self._send(END)

    def _fetch(self, req: Request) -> list[torch.Tensor]:
        self._send(req.encode())
        raw = self._recv(torch.empty(bundle_bytes([req]), dtype=torch.uint8))
        return _split_bundle(raw, [req], self._prg)[0]

    def _bundles(self, key: int, schedule: list[Request]) -> _Bundles:
        if key not in self._buffers:
            self._buffers[key] = _Bundles(schedule)
        return self._buffers[key]

    def _prepare(self, key: int, schedule: list[Request]) -> list[list[torch.Tensor]]:
        bundles = self._bundles(key, schedule)
        if key in self._coming:
            self._arrive()
            which = self._coming.pop(key)[0]
            self._received(bundles.received[which].raw)
        else:
            which = bundles.take(beside=False)
            self._send(torch.tensor([Command.BUNDLE, key], dtype=torch.int64))
            self._recv(bundles.received[which].raw)
        bundles.masks.draw(self._prg)
        bundles.received[which].refresh()
        return [list(item) for item in bundles.items[which]]

    def _arrive(self) -> None:
        """Wait until every bundle asked for ahead has arrived."""
        for key, (which, work) in self._coming.items():
            if work is not None:
                work.wait()
                self._coming[key] = (which, None)

    def _ask_ahead(self, key: int, schedule: list[Request]) -> None:
        # the dealer answers commands in order: a bundle asked for later (another phase's)
        # comes after this one, and ``_recv`` waits for this one first
        assert key not in self._coming, "the next run of this phase is already on its way"
        bundles = self._bundles(key, schedule)
        which = bundles.take(beside=True)
        self._send(torch.tensor([Command.BUNDLE, key], dtype=torch.int64))
        raw = bundles.received[which].raw
        self._coming[key] = (which, self._comm.irecv(raw, self._dealer))

    def close(self) -> None:
        # bundles asked for ahead that no run took (training stopped early): received, dropped
        self._arrive()
        for key, (which, _) in self._coming.items():
            self._received(self._buffers[key].received[which].raw)
        self._coming.clear()
        self._send(torch.tensor([Command.STOP, 0], dtype=torch.int64))

    def checkpoint(self, step: int) -> None:
        self._send(torch.tensor([Command.CHECKPOINT, step], dtype=torch.int64))


def _split_bundle(raw: torch.Tensor, reqs: list[Request], prg: Prg) -> list[list[torch.Tensor]]:
    """Party 1's shares of ``reqs``: of the masks drawn from ``prg`` (in one draw, each item's
    in ``free`` order, as the dealer draws them in ``deal``), the others cut from ``raw``."""
    mask_slots, sent_slots = mask_and_sent_slots(reqs)
    received = SlotBuffer(sent_slots)
    if received.size != raw.numel():
        raise RuntimeError("the dealer's bundle does not match the schedule")
    received.raw.copy_(raw)
    return _assemble(reqs, random_shares(mask_slots, prg), received.refresh())


def _assemble(
    reqs: list[Request], masks: list[torch.Tensor], received: list[torch.Tensor]
) -> list[list[torch.Tensor]]:
    """Each item's tensors in ``layout`` order, from its masks and its received tensors."""
    mask_iter, received_iter = iter(masks), iter(received)
    out: list[list[torch.Tensor]] = []
    for req in reqs:
        item = {i: next(mask_iter) for i in free(req)}
        slots = range(len(layout(req)))
        out.append([item[i] if i in item else next(received_iter) for i in slots])
    return out


class _Bundles:
    """Party 1's buffers for a replayed phase: its shares of the masks, drawn every run, and up
    to two buffers the dealer's bundles go to in turn (the next run's arrives while this run's
    is in use; a phase never asked for ahead has only one)."""

    def __init__(self, schedule: list[Request]) -> None:
        self._schedule = schedule
        mask_slots, self._sent_slots = mask_and_sent_slots(schedule)
        self.masks = SlotBuffer(mask_slots)
        self.received: list[SlotBuffer] = []
        self.items: list[list[list[torch.Tensor]]] = []
        """Each item's tensors, with each received buffer's tensors."""
        self._current = 0

    def take(self, beside: bool) -> int:
        """The buffer for the next bundle: the one the last bundle went to, or with ``beside``
        (asked for ahead, while a run uses that one) the other."""
        which = (1 - self._current if beside else self._current) if self.received else 0
        if which == len(self.received):
            self.received.append(SlotBuffer(self._sent_slots))
            tensors = self.received[which].tensors
            self.items.append(_assemble(self._schedule, self.masks.tensors, tensors))
        self._current = which
        return which
