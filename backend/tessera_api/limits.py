"""A bound on request bodies: a larger one is refused (413) before it is held in memory."""

from __future__ import annotations

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

MAX_BODY_BYTES = 32 * 1024 * 1024


class BodySizeLimit:
    """Refuses a body longer than ``max_bytes``, by its Content-Length or as it arrives."""

    def __init__(self, app: ASGIApp, max_bytes: int = MAX_BODY_BYTES) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
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
