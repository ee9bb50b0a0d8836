"""The bounds on what a client may send, in one place.

- A request body is at most ``MAX_BODY_BYTES``; a larger one is refused (413) before it is held
  in memory.
- Free-form JSON (a job's ``config``, each ``assignments[].options``) is nested at most
  ``MAX_JSON_DEPTH`` containers deep and serializes to at most ``MAX_CONFIG_BYTES`` (config) or
  ``MAX_OPTIONS_BYTES`` (one assignment's options; ``MAX_JOB_OPTIONS_BYTES`` for all of a job's
  options together). A configuration is a form of a few dozen settings, a few levels deep
  (``config.model.kwargs.…``); options hold a handful of per-party hints (``pace``,
  ``devices_per_node``, ``compute``). The bounds leave room for hundreds of times that, while a
  job stays small where it is copied: each assignment's options go into the plan once per rank
  it runs (up to 64) and every read of the job returns them, and the stored JSON stays well
  inside what the JSON encoders can nest (about 255 levels).
- Numbers are finite: JSON has no NaN or Infinity (Python's parser accepts them as literals).
- A cursor over row ids (``after``, ``Last-Event-ID``) is at most ``MAX_ROW_ID``.
- Names (of parties, jobs, workers, roles, accelerators …) hold no control characters
  (U+0000 to U+001F, U+007F to U+009F); free text (descriptions, reasons, log lines) holds no
  NUL, which PostgreSQL cannot store, so every database answers alike.

A request beyond a bound gets 422 whose ``errors[].loc`` names the field and ``msg`` the reason.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

MAX_BODY_BYTES = 32 * 1024 * 1024
MAX_JSON_DEPTH = 32
MAX_CONFIG_BYTES = 64 * 1024
MAX_OPTIONS_BYTES = 16 * 1024
MAX_JOB_OPTIONS_BYTES = 64 * 1024
MAX_ROW_ID = 2**31 - 1
"""Row ids (log lines, events) are 32-bit integers: a cursor beyond them would match nothing,
and PostgreSQL refuses to compare with it."""

NAME_PATTERN = r"^[^\x00-\x1f\x7f-\x9f]*$"
"""A name: any characters but the control characters."""
TEXT_PATTERN = r"^[^\x00]*$"
"""Free text: any characters but NUL."""
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def control_character(value: str, *, nul_only: bool = False) -> str | None:
    """Why ``value`` cannot be a name (or, with ``nul_only``, free text); None when it can."""
    if nul_only:
        at = value.find("\x00")
        return None if at < 0 else f"must not contain NUL (U+0000, at position {at})"
    match = _CONTROL.search(value)
    if match is None:
        return None
    return (
        f"must not contain control characters (U+{ord(match.group()):04X}, "
        f"at position {match.start()})"
    )


class JsonProblem(ValueError):
    """Why a free-form JSON value is refused, and where in it (``loc``, relative to the field)."""

    def __init__(self, kind: str, reason: str, loc: tuple[str | int, ...] = ()) -> None:
        super().__init__(reason)
        self.kind = kind
        self.reason = reason
        self.loc = loc


def json_size(value: Any) -> int:
    """Bytes of ``value`` as compact UTF-8 JSON; raises ``JsonProblem`` for a string that is
    not valid Unicode (an unpaired surrogate, which Python's JSON parser lets through)."""
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    try:
        return len(text.encode())
    except UnicodeEncodeError as exc:
        raise JsonProblem(
            "string_unicode", "holds a string that is not valid Unicode (an unpaired surrogate)"
        ) from exc


def check_json(value: Any, *, max_bytes: int, max_depth: int = MAX_JSON_DEPTH) -> int:
    """The serialized size of a free-form JSON value within the bounds; raises ``JsonProblem``.

    Walks without recursion, so a value nested deeper than Python's stack is refused like any
    other; every item serializes to at least one byte, so the walk stops before it has met more
    than ``max_bytes`` of them.
    """
    stack: list[tuple[Any, int, tuple[str | int, ...]]] = [(value, 1, ())]
    met = 1
    while stack:
        item, depth, loc = stack.pop()
        if isinstance(item, dict | list):
            if depth > max_depth:
                raise JsonProblem(
                    "json_too_deep", f"nested deeper than {max_depth} levels of objects and arrays"
                )
            met += len(item)
            if met > max_bytes:
                raise JsonProblem("json_too_large", f"larger than {max_bytes} bytes as JSON")
            children = item.items() if isinstance(item, dict) else enumerate(item)
            stack.extend((child, depth + 1, (*loc, key)) for key, child in children)
        elif isinstance(item, float) and not math.isfinite(item):
            raise JsonProblem(
                "finite_number",
                f"{_literal(item)} is not a JSON number; numbers must be finite",
                loc,
            )
    size = json_size(value)
    if size > max_bytes:
        raise JsonProblem("json_too_large", f"{size} bytes as JSON, over the limit of {max_bytes}")
    return size


def _literal(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    return "Infinity" if value > 0 else "-Infinity"


STREAMED_UPLOAD = re.compile(r"^/api/v1/jobs/[^/]+/checkpoints/\d+/\d+/\d+/file$")
"""A checkpoint file's upload: streamed to disk, within its own limit
(``Settings.max_checkpoint_file_bytes``), never held in memory."""


class BodySizeLimit:
    """Refuses a body longer than ``max_bytes``, by its Content-Length or as it arrives
    (a streamed upload keeps to its own limit)."""

    def __init__(self, app: ASGIApp, max_bytes: int = MAX_BODY_BYTES) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or (
            scope["method"] == "PUT" and STREAMED_UPLOAD.match(scope["path"])
        ):
            await self.app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length", b"")
        received = 0

        async def limited() -> Message:
            nonlocal received
            if declared.isdigit() and int(declared) > self.max_bytes:
                raise self._too_large()
            message = await receive()
            received += len(message.get("body", b""))
            if received > self.max_bytes:
                raise self._too_large()
            return message

        await self.app(scope, limited, send)

    def _too_large(self) -> HTTPException:
        return HTTPException(413, f"the request body is larger than {self.max_bytes} bytes")
