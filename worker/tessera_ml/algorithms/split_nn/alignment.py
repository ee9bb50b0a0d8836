"""Alignment of vertically split parties by sample id, coordinated by the label party.

1. The label party draws a random salt and sends it to every feature party.
2. Each feature party sends the salted SHA-256 digests of its train and test ids.
3. The label party intersects every party's digests with its own, orders the common samples by
   its own plain ids, and sends each feature party the positions of those samples in that
   party's own tables. The middle party receives only the two counts.

What this reveals: the label party learns every feature party's salted digests, so it can test
any id it can guess for membership in that party's set (with guessable ids, the set itself).
A feature party learns which of its own rows all parties share and how many there are; it
learns nothing about ids outside the intersection. The middle party learns the counts only.
No feature value and no label is exchanged.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass

import numpy as np
import torch

from tessera_ml.comm.base import Communicator

SALT_BYTES = 16
DIGEST_BYTES = 16


@dataclass(frozen=True)
class Alignment:
    """Positions of the common samples in this party's tables (None at the middle party)."""

    train: torch.Tensor | None
    test: torch.Tensor | None
    num_train: int
    num_test: int


def digests(ids: np.ndarray, salt: bytes) -> list[bytes]:
    return [hashlib.sha256(salt + str(i).encode()).digest()[:DIGEST_BYTES] for i in ids]


def _common_positions(
    own: np.ndarray, others: list[list[bytes]], salt: bytes
) -> tuple[torch.Tensor, list[torch.Tensor]]:
    mine = digests(own, salt)
    common = set(mine)
    for theirs in others:
        common &= set(theirs)
    order = sorted((str(own[i]), i) for i, d in enumerate(mine) if d in common)
    own_pos = [i for _, i in order]
    wanted = [mine[i] for i in own_pos]
    per_party: list[torch.Tensor] = []
    for theirs in others:
        where = {d: i for i, d in enumerate(theirs)}
        per_party.append(torch.tensor([where[d] for d in wanted], dtype=torch.int64))
    return torch.tensor(own_pos, dtype=torch.int64), per_party


def align_as_label(
    comm: Communicator,
    train_ids: np.ndarray,
    test_ids: np.ndarray,
    feature_ranks: list[int],
    middle_rank: int | None,
) -> Alignment:
    salt = os.urandom(SALT_BYTES)
    for r in feature_ranks:
        comm.send_data(salt, r)
    received = [comm.recv_data(r) for r in feature_ranks]
    train_own, train_theirs = _common_positions(train_ids, [t for t, _ in received], salt)
    test_own, test_theirs = _common_positions(test_ids, [t for _, t in received], salt)
    for r, tr, te in zip(feature_ranks, train_theirs, test_theirs, strict=True):
        comm.send_data((tr, te), r)
    counts = (len(train_own), len(test_own))
    if middle_rank is not None:
        comm.send_data(counts, middle_rank)
    return Alignment(train_own, test_own, *counts)


def align_as_feature(
    comm: Communicator, train_ids: np.ndarray, test_ids: np.ndarray, label_rank: int
) -> Alignment:
    salt: bytes = comm.recv_data(label_rank)
    comm.send_data((digests(train_ids, salt), digests(test_ids, salt)), label_rank)
    train, test = comm.recv_data(label_rank)
    return Alignment(train, test, len(train), len(test))


def align_as_middle(comm: Communicator, label_rank: int) -> Alignment:
    num_train, num_test = comm.recv_data(label_rank)
    return Alignment(None, None, int(num_train), int(num_test))
