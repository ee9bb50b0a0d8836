"""A cryptographic pseudo-random generator for shares and masks: AES-256 in counter mode.

A party's seeded shares must stay unpredictable to the other party even though it holds the
other shares of the same values: a generator whose state can be searched (``torch.Generator``
keeps 32 bits of a seed) or recovered from its outputs (the Mersenne twister) would let it
rebuild them. Here every stream is keyed by 32 bytes, the key is never reused with another
stream, and the output is AES's keystream.
"""

from __future__ import annotations

import hashlib
import math
import os
import struct

import torch
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

KEY_BYTES = 32
ROOM = 15
"""Bytes a buffer needs past what the cipher writes into it: some versions of
``cryptography`` ask ``update_into`` for room for one block less a byte more than it writes."""


class Prg:
    """A keystream, drawn in order: ring elements (every value of the dtype) or 0/1 bytes."""

    def __init__(self, key: bytes) -> None:
        if len(key) != KEY_BYTES:
            raise ValueError(f"a PRG key is {KEY_BYTES} bytes, not {len(key)}")
        self._stream = Cipher(algorithms.AES(key), modes.CTR(bytes(16))).encryptor()

    @classmethod
    def fresh(cls) -> Prg:
        """A stream under a key from the operating system's randomness."""
        return cls(os.urandom(KEY_BYTES))

    @classmethod
    def derived(cls, seed: bytes, *labels: int) -> Prg:
        """The stream for ``labels`` (e.g. a phase and its run) under ``seed``: each label
        tuple gets its own key, so streams of one seed never share a key."""
        label = struct.pack(f"<{len(labels)}q", *labels)
        return cls(hashlib.blake2b(label, key=seed, digest_size=KEY_BYTES).digest())

    def bytes(self, n: int) -> torch.Tensor:
        """The next ``n`` bytes of the stream."""
        if n == 0:
            return torch.empty(0, dtype=torch.uint8)
        out = torch.empty(n + ROOM, dtype=torch.uint8)
        self.fill(out, n)
        return out[:n]

    def fill(self, buffer: torch.Tensor, n: int) -> None:
        """Writes the next ``n`` bytes of the stream over ``buffer``'s first ``n`` (a contiguous
        uint8 tensor of at least ``n + ROOM`` bytes)."""
        if buffer.dtype != torch.uint8 or not buffer.is_contiguous():
            raise ValueError("the keystream goes into a contiguous uint8 buffer")
        if buffer.numel() < n + ROOM:
            raise ValueError(f"a keystream of {n} bytes needs a buffer of {n + ROOM} bytes")
        if self._stream.update_into(_zeros(n), buffer.numpy().data) != n:
            raise RuntimeError("the keystream came short")

    def ring(self, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
        """Uniform elements of ``dtype``'s ring (``torch.int32`` or ``torch.int64``)."""
        size = torch.empty((), dtype=dtype).element_size()
        return self.bytes(math.prod(shape) * size).view(dtype).reshape(shape)

    def bits(self, shape: tuple[int, ...]) -> torch.Tensor:
        """Uniform 0/1 bytes."""
        return (self.bytes(math.prod(shape)) & 1).reshape(shape)


_ZEROS = memoryview(bytes(1 << 20))


def _zeros(n: int) -> memoryview:
    """``n`` zero bytes to encrypt, from one shared buffer (grown when a longer run is asked)."""
    global _ZEROS
    if n > len(_ZEROS):
        _ZEROS = memoryview(bytes(n))
    return _ZEROS[:n]
