"""Whether an error is a rank's link to another rank breaking: the other rank went away, which
is rarely the cause of a failure (and is what a rank sees when a peer was stopped first)."""

from __future__ import annotations

import re

PEER_LOST = re.compile(
    r"connection (closed|reset) by peer|remote worker|DistNetworkError|broken pipe"
    r"|peer closed the link|LinkError",
    re.IGNORECASE,
)


def lost_a_peer(text: str) -> bool:
    return bool(PEER_LOST.search(text))
