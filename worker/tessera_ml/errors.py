"""The library's errors that reach a user: each carries a stable ``code`` and a ``reason``."""

from __future__ import annotations


class CodedError(ValueError):
    """Input the library refuses, with a machine-readable ``code`` and a sentence for people."""

    def __init__(self, code: str, reason: str) -> None:
        super().__init__(reason)
        self.code = code
        self.reason = reason
