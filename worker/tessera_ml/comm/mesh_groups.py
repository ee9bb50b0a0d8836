"""What a mesh group is to this rank: inside its party, across parties, or another party's."""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import Any


def group_tag(name: str) -> int:
    """The link tag of a group's collectives (never the point-to-point tag)."""
    return zlib.crc32(name.encode()) | 1


@dataclass(frozen=True)
class LocalGroup:
    """A group inside this rank's party: a process group of the party's world."""

    handle: Any


@dataclass(frozen=True)
class SpanningGroup:
    """A group across parties: collectives as rings of point-to-point messages."""

    tag: int


@dataclass(frozen=True)
class ForeignGroup:
    """A group inside another party; this rank never uses it."""


def ring_tag(kind: Any) -> int:
    """The link tag of a spanning group; any other group is not this rank's to ring."""
    if not isinstance(kind, SpanningGroup):
        raise RuntimeError("this rank is not a member of the group")
    return kind.tag
