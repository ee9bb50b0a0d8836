"""What a rank receives from the platform when it starts."""

from __future__ import annotations

import hashlib
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

import torch

from tessera_ml.comm.base import Communicator
from tessera_ml.harness import NO_HARNESS, Harness
from tessera_ml.report import MemoryReporter, Reporter
from tessera_ml.safe_load import load_state
from tessera_ml.spec import AlgorithmConfig, RankSlot


class StopSignal(Protocol):
    def is_set(self) -> bool: ...


@dataclass
class RankContext:
    """Everything one rank of a job needs; the entry point is ``run(ctx) -> dict | None``.

    ``plan`` is the whole world's rank plan, so every rank knows who plays which role.
    Algorithms should check ``stop.is_set()`` between steps and return early when it is.
    ``harness`` holds what a benchmark lends the rank to measure it (nothing in a platform job).
    """

    rank: int
    world_size: int
    slot: RankSlot
    plan: list[RankSlot]
    config: AlgorithmConfig
    comm: Communicator
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))
    reporter: Reporter = field(default_factory=MemoryReporter)
    stop: StopSignal = field(default_factory=threading.Event)
    checkpoint_dir: Path | None = None
    resume_from: Path | None = None
    data_root: Path | None = None
    job_id: str = "local"
    attempt: int = 1
    harness: Harness = NO_HARNESS

    @property
    def role(self) -> str:
        return self.slot.role

    @property
    def party(self) -> str:
        return self.slot.party

    @property
    def seed(self) -> int:
        return self.config.seed

    @property
    def file_roots(self) -> list[Path]:
        """The folders in which a file that the job's configuration names may lie on this host
        (``tessera_ml.host_paths``): the data root, and the folder that holds every job's
        checkpoint folder, so that weights from an earlier job can be named. None without a data
        root (outside a worker), where a path is taken as given."""
        if self.data_root is None:
            return []
        roots = [self.data_root]
        if self.checkpoint_dir is not None:
            roots.append(self.checkpoint_dir.parent)
        return roots

    def ranks_of(self, role: str) -> list[int]:
        """Global ranks playing ``role``, in role-rank order."""
        return [s.rank for s in sorted(self.plan, key=lambda s: s.role_rank) if s.role == role]

    def save_checkpoint(self, step: int, state: dict[str, Any]) -> Path | None:
        """Write this rank's state for ``step`` and report it; no-op without a directory."""
        if self.checkpoint_dir is None:
            return None
        return self._save(self.checkpoint_dir / f"step-{step:09d}", step, state, "checkpoint")

    def save_result(
        self, kind: Literal["export", "model"], step: int, state: dict[str, Any]
    ) -> None:
        """Keep a result of the run on this rank's host (a table's export, a model revealed to
        this party) and report it like a checkpoint, for the party to download; no-op without
        a directory. A retry never resumes from these."""
        if self.checkpoint_dir is not None:
            self._save(self.checkpoint_dir / kind / f"step-{step:09d}", step, state, kind)

    def _save(self, folder: Path, step: int, state: dict[str, Any], kind: str) -> Path:
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"rank-{self.rank}.pt"
        tmp = path.with_suffix(".tmp")
        torch.save(state, tmp)
        tmp.replace(path)
        data = path.read_bytes()
        digest = hashlib.sha256(data).hexdigest()
        self.reporter.checkpoint(step, str(folder), len(data), digest, kind=kind)
        return path

    def load_checkpoint(self) -> dict[str, Any] | None:
        """This rank's state from ``resume_from``, or None when starting fresh. It is read with
        torch's restricted unpickler, so a state holds tensors and plain values (numbers,
        strings, lists, tuples, dicts) only."""
        if self.resume_from is None:
            return None
        path = self.resume_from / f"rank-{self.rank}.pt"
        state: dict[str, Any] = load_state(path, self.device, str(path))
        return state
