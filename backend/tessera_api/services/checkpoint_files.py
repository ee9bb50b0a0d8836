"""Checkpoint files (and the exports and revealed models recorded the same way) that a
party's workers share with the control plane, for that party to download.

A worker uploads the file of a checkpoint its rank recorded only when its host is set to share
them (``tessera worker --share-checkpoints``; the local demo of ``tessera up`` does): a party's
model state leaves its host only by its own choice. The control plane checks the bytes against
the recorded size and SHA-256, keeps them under
``artifacts/<job>/attempt-<n>/<kind>/step-<step>/rank-<rank>.pt``, and hands them only to the
party whose rank wrote them and to the admin.
"""

from __future__ import annotations

import hashlib
import os
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TypeVarTuple

from sqlalchemy import Select, select
from sqlalchemy.orm import Session

from tessera_api.errors import ApiError, forbidden, not_found
from tessera_api.models import Attempt, Checkpoint, Task
from tessera_api.security import Caller

Ts = TypeVarTuple("Ts")


@dataclass(frozen=True)
class Stored:
    """Where one recorded checkpoint's file lives (or would) and what it must hold."""

    path: Path
    size: int
    sha256: str


def path_of(root: Path, *, job_id: str, attempt: int, kind: str, step: int, rank: int) -> Path:
    folder = root / job_id / f"attempt-{attempt}" / kind
    return folder / f"step-{step:09d}" / f"rank-{rank}.pt"


def _latest(query: Select[*Ts], *, kind: str, step: int, rank: int) -> Select[*Ts]:
    """``query`` narrowed to the last record of (kind, step, rank): a step saved again by a
    resumed attempt of the same task counts once, as last written."""
    return (
        query.where(Checkpoint.kind == kind, Checkpoint.step == step, Checkpoint.rank == rank)
        .order_by(Checkpoint.id.desc())
        .limit(1)
    )


def for_upload(
    session: Session, root: Path, *, task: Task, kind: str, step: int, rank: int
) -> Stored:
    """The record a task's upload of (kind, step, rank) must match: the task recorded it first."""
    found = session.scalars(
        _latest(select(Checkpoint), kind=kind, step=step, rank=rank).where(
            Checkpoint.task_id == task.id
        )
    ).first()
    if found is None:
        raise not_found(kind, f"step {step} rank {rank} of task {task.id}")
    number = task.attempt.number
    path = path_of(root, job_id=found.job_id, attempt=number, kind=kind, step=step, rank=rank)
    return Stored(path, found.size, found.sha256)


def for_download(
    session: Session,
    root: Path,
    *,
    job_id: str,
    attempt: int,
    kind: str,
    step: int,
    rank: int,
    caller: Caller,
) -> Stored:
    """The stored file of a checkpoint, if the caller may have it."""
    query = (
        select(Checkpoint, Task.party_id)
        .join(Attempt, Checkpoint.attempt_id == Attempt.id)
        .join(Task, Checkpoint.task_id == Task.id)
        .where(Checkpoint.job_id == job_id, Attempt.number == attempt)
    )
    row = session.execute(_latest(query, kind=kind, step=step, rank=rank)).first()
    if row is None:
        raise not_found(kind, f"attempt {attempt} step {step} rank {rank}")
    checkpoint, party_id = row
    if caller.party is not None and caller.party.id != party_id:
        raise forbidden("a checkpoint's file goes only to the party whose rank wrote it")
    path = path_of(root, job_id=job_id, attempt=attempt, kind=kind, step=step, rank=rank)
    if not path.is_file():
        raise ApiError(
            404,
            "checkpoint_not_shared",
            f"the worker of rank {rank} did not share this {kind}'s file; it is on that "
            "party's host",
        )
    return Stored(path, checkpoint.size, checkpoint.sha256)


class Upload:
    """One upload being written beside its destination; ``commit`` checks it and moves it in."""

    def __init__(self, stored: Stored, *, max_bytes: int) -> None:
        self.stored = stored
        self.max_bytes = max_bytes
        stored.path.parent.mkdir(parents=True, exist_ok=True)
        self._part = stored.path.with_name(f".{stored.path.name}.{uuid.uuid4().hex}.part")
        self._file: IO[bytes] = self._part.open("wb")
        self._hash = hashlib.sha256()
        self.size = 0

    def write(self, chunk: bytes) -> None:
        self.size += len(chunk)
        if self.size > self.max_bytes:
            self.abort()
            raise ApiError(
                413,
                "checkpoint_too_large",
                f"the file is over the control plane's limit of {self.max_bytes} bytes",
            )
        self._hash.update(chunk)
        self._file.write(chunk)

    def commit(self) -> None:
        self._file.close()
        if self.size != self.stored.size or self._hash.hexdigest() != self.stored.sha256:
            self.abort()
            raise ApiError(
                422,
                "checkpoint_mismatch",
                f"the file ({self.size} bytes) does not match the recorded checkpoint "
                f"({self.stored.size} bytes, SHA-256 {self.stored.sha256[:12]}…)",
            )
        os.replace(self._part, self.stored.path)

    def abort(self) -> None:
        self._file.close()
        self._part.unlink(missing_ok=True)


def is_shared(root: Path, *, job_id: str, attempt: int, kind: str, step: int, rank: int) -> bool:
    return path_of(root, job_id=job_id, attempt=attempt, kind=kind, step=step, rank=rank).is_file()
