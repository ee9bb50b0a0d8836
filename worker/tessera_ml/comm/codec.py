"""The declared encoding of plain data between ranks: nothing a peer sends is ever unpickled.

``encode(obj)`` accepts, by exact type: None, bool, int (any size), float (inf and nan too),
str, bytes, list, tuple, dict (str or int keys, kept in order and as given), ``torch.Tensor``
(any device, copied to the CPU) and ``numpy.ndarray``. Tensor and array dtypes come from an
allow-list: bool, uint8, int8, int16, int32, int64, float16, bfloat16 (tensors only), float32,
float64. Anything else (a dataclass, a set, an enum, a named tuple, a numpy scalar) raises
``TypeError`` naming its type; containers nested deeper than ``MAX_DEPTH`` levels raise
``ValueError``.

Format::

    b"TSD1" | header length (uint32, big-endian) | header (ASCII JSON) | blobs

The header is one node, a JSON array whose first element is a tag:

=====================================  ==================================================
``["n"]``                              None
``["b", true]``                        bool
``["i", "-1f"]``                       int, in hexadecimal
``["f", "0x1.8p+1"]``                  float, as ``float.hex`` (``"inf"``, ``"nan"``)
``["s", "text"]``                      str
``["y", nbytes]``                      bytes: the next blob
``["l", node, ...]``                   list
``["t", node, ...]``                   tuple
``["d", key, value, ...]``             dict; each key an ``"s"`` or ``"i"`` node
``["T", dtype, [dim, ...], nbytes]``   tensor: the next blob, C order, little-endian
``["A", dtype, [dim, ...], nbytes]``   numpy array: likewise
=====================================  ==================================================

Blobs follow the header back to back, in the order their nodes appear (depth first). ``decode``
checks everything and raises ``DecodeError`` on any departure: a wrong magic (a pickle is named
as such), truncation, an unknown tag, a malformed node, a dtype outside the allow-list, a blob
size that does not match its shape, containers nested deeper than ``MAX_DEPTH``, or trailing
bytes.
"""

from __future__ import annotations

import json
import math
import re
import struct
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

MAGIC = b"TSD1"
MAX_DEPTH = 64

_HEADER_LENGTH = struct.Struct(">I")
_PREFIX = len(MAGIC) + _HEADER_LENGTH.size
_HEX_INT = re.compile(r"-?[0-9a-f]+")

TENSOR_DTYPES: dict[str, torch.dtype] = {
    "bool": torch.bool,
    "uint8": torch.uint8,
    "int8": torch.int8,
    "int16": torch.int16,
    "int32": torch.int32,
    "int64": torch.int64,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "float32": torch.float32,
    "float64": torch.float64,
}
_TENSOR_NAMES = {dtype: name for name, dtype in TENSOR_DTYPES.items()}
ARRAY_DTYPES: dict[str, np.dtype[Any]] = {
    name: np.dtype(name).newbyteorder("<") for name in TENSOR_DTYPES if name != "bfloat16"
}


class DecodeError(ValueError):
    """Bytes from a peer that are not a valid encoding; nothing of them was used."""


def encode(obj: Any) -> bytes:
    """``obj`` in the declared encoding (see the module docstring)."""
    blobs: list[bytes] = []
    header = json.dumps(_encode(obj, blobs, 0), separators=(",", ":"), allow_nan=False)
    data = header.encode("ascii")
    return b"".join([MAGIC, _HEADER_LENGTH.pack(len(data)), data, *blobs])


def _encode(obj: Any, blobs: list[bytes], depth: int) -> list[Any]:
    kind = type(obj)
    if kind in (list, tuple, dict) and depth >= MAX_DEPTH:
        raise ValueError(f"containers nested deeper than {MAX_DEPTH} levels cannot be encoded")
    if obj is None:
        return ["n"]
    if kind is bool:
        return ["b", obj]
    if kind is int:
        return ["i", format(obj, "x")]
    if kind is float:
        return ["f", obj.hex()]
    if kind is str:
        return ["s", obj]
    if kind is bytes:
        blobs.append(obj)
        return ["y", len(obj)]
    if kind is list or kind is tuple:
        return ["l" if kind is list else "t", *(_encode(v, blobs, depth + 1) for v in obj)]
    if kind is dict:
        node: list[Any] = ["d"]
        for key, value in obj.items():
            if type(key) is not str and type(key) is not int:
                raise TypeError(f"dict keys must be str or int, got {_name(type(key))}")
            node.append(_encode(key, blobs, depth + 1))
            node.append(_encode(value, blobs, depth + 1))
        return node
    if isinstance(obj, torch.Tensor):
        return _encode_tensor(obj, blobs)
    if kind is np.ndarray:
        return _encode_array(obj, blobs)
    raise TypeError(f"cannot encode {_name(kind)}: only plain data crosses between ranks")


def _encode_tensor(t: torch.Tensor, blobs: list[bytes]) -> list[Any]:
    name = _TENSOR_NAMES.get(t.dtype)
    if name is None:
        raise TypeError(f"cannot encode a tensor of dtype {t.dtype}")
    if t.layout != torch.strided:
        raise TypeError(f"cannot encode a tensor with layout {t.layout}")
    flat = t.detach().cpu().contiguous().reshape(-1)
    raw = flat.view(torch.uint8).numpy().tobytes()
    blobs.append(raw)
    return ["T", name, list(t.shape), len(raw)]


def _encode_array(a: np.ndarray, blobs: list[bytes]) -> list[Any]:
    name = a.dtype.name
    if a.dtype.kind not in "biuf" or name not in ARRAY_DTYPES:
        raise TypeError(f"cannot encode a numpy array of dtype {a.dtype}")
    raw = np.ascontiguousarray(a, dtype=ARRAY_DTYPES[name]).tobytes()
    blobs.append(raw)
    return ["A", name, list(a.shape), len(raw)]


def _name(kind: type) -> str:
    return (
        f"{kind.__module__}.{kind.__qualname__}" if kind.__module__ != "builtins" else kind.__name__
    )


def decode(data: bytes) -> Any:
    """The value ``encode`` made ``data`` from; ``DecodeError`` for anything else."""
    if data[:1] == b"\x80":
        raise DecodeError("refused a pickled payload: peers send plain data in the TSD1 encoding")
    if not MAGIC.startswith(data[: len(MAGIC)]):
        raise DecodeError(f"wrong magic {bytes(data[: len(MAGIC)])!r}, expected {MAGIC!r}")
    if len(data) < _PREFIX:
        raise DecodeError(f"truncated: {len(data)} bytes, shorter than the {_PREFIX}-byte prefix")
    (size,) = _HEADER_LENGTH.unpack_from(data, len(MAGIC))
    if _PREFIX + size > len(data):
        raise DecodeError(f"truncated: a header of {size} bytes, {len(data) - _PREFIX} present")
    try:
        header = json.loads(
            bytes(data[_PREFIX : _PREFIX + size]).decode("ascii"),
            parse_constant=_refuse_constant,
        )
    except RecursionError:
        raise DecodeError(f"containers nested deeper than {MAX_DEPTH} levels") from None
    except ValueError as exc:
        raise DecodeError(f"malformed header: {exc}") from None
    reader = _Reader(memoryview(data), _PREFIX + size)
    value = reader.node(header, 0)
    if reader.offset != len(data):
        raise DecodeError(f"{len(data) - reader.offset} trailing bytes after the last blob")
    return value


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not allowed in a header")


class _Reader:
    def __init__(self, data: memoryview, offset: int) -> None:
        self.data = data
        self.offset = offset

    def node(self, node: Any, depth: int) -> Any:
        if type(node) is not list or not node or type(node[0]) is not str:
            raise DecodeError(f"malformed node {_short(node)}")
        tag = node[0]
        if tag in ("l", "t", "d"):
            if depth >= MAX_DEPTH:
                raise DecodeError(f"containers nested deeper than {MAX_DEPTH} levels")
            if tag == "d":
                return self.mapping(node[1:], depth + 1)
            items = [self.node(v, depth + 1) for v in node[1:]]
            return items if tag == "l" else tuple(items)
        if tag in ("T", "A"):
            return self.tensor(tag, node[1:])
        if tag == "y":
            return bytes(self.blob(_one(node)))
        scalar = _SCALARS.get(tag)
        if scalar is None:
            raise DecodeError(f"unknown tag {_short(tag)}")
        return scalar(node)

    def mapping(self, args: list[Any], depth: int) -> dict[str | int, Any]:
        if len(args) % 2:
            raise DecodeError("a dict node with a key and no value")
        out: dict[str | int, Any] = {}
        for i in range(0, len(args), 2):
            key_node = args[i]
            if type(key_node) is not list or not key_node or key_node[0] not in ("s", "i"):
                raise DecodeError(f"dict keys must be str or int nodes, got {_short(key_node)}")
            key = self.node(key_node, depth)
            if key in out:
                raise DecodeError(f"duplicate dict key {_short(key)}")
            out[key] = self.node(args[i + 1], depth)
        return out

    def tensor(self, tag: str, args: list[Any]) -> torch.Tensor | np.ndarray:
        what = "tensor" if tag == "T" else "numpy array"
        if len(args) != 3 or type(args[0]) is not str or type(args[1]) is not list:
            raise DecodeError(f"malformed {what} node {_short([tag, *args])}")
        name, dims, size = args
        allowed = TENSOR_DTYPES if tag == "T" else ARRAY_DTYPES
        if name not in allowed:
            raise DecodeError(f"{what} dtype {_short(name)} is not in the allow-list")
        shape = [_count(d, "dimension") for d in dims]
        if tag == "T":
            itemsize = torch.empty((), dtype=TENSOR_DTYPES[name]).element_size()
        else:
            itemsize = ARRAY_DTYPES[name].itemsize
        expected = math.prod(shape) * itemsize
        if _count(size, "blob size") != expected:
            raise DecodeError(
                f"{what} size {size} does not match shape {shape} of {name} ({expected} bytes)"
            )
        raw = self.blob(size)
        try:
            if tag == "A":
                return np.frombuffer(raw, dtype=ARRAY_DTYPES[name]).reshape(shape).copy()
            if not expected:
                return torch.empty(shape, dtype=TENSOR_DTYPES[name])
            return torch.frombuffer(bytearray(raw), dtype=TENSOR_DTYPES[name]).reshape(shape)
        except (RuntimeError, TypeError, ValueError):
            raise DecodeError(f"{what} shape {_short(shape)} cannot be built") from None

    def blob(self, size: Any) -> memoryview:
        size = _count(size, "blob size")
        end = self.offset + size
        if end > len(self.data):
            left = len(self.data) - self.offset
            raise DecodeError(f"truncated: a blob of {size} bytes, {left} left")
        raw = self.data[self.offset : end]
        self.offset = end
        return raw


def _one(node: list[Any]) -> Any:
    if len(node) != 2:
        raise DecodeError(f"malformed {node[0]!r} node {_short(node)}")
    return node[1]


def _none(node: list[Any]) -> None:
    if len(node) != 1:
        raise DecodeError(f"malformed None node {_short(node)}")


def _bool(node: list[Any]) -> bool:
    value = _one(node)
    if type(value) is not bool:
        raise DecodeError(f"malformed bool node {_short(node)}")
    return value


def _int(node: list[Any]) -> int:
    value = _one(node)
    if type(value) is not str or not _HEX_INT.fullmatch(value):
        raise DecodeError(f"malformed int node {_short(node)}")
    number = int(value, 16)
    if format(number, "x") != value:
        raise DecodeError(f"malformed int node {_short(node)}")
    return number


def _float(node: list[Any]) -> float:
    value = _one(node)
    try:
        number = float.fromhex(value) if type(value) is str else None
    except ValueError:
        number = None
    if number is None or number.hex() != value:
        raise DecodeError(f"malformed float node {_short(node)}")
    return number


def _str(node: list[Any]) -> str:
    value = _one(node)
    if type(value) is not str:
        raise DecodeError(f"malformed str node {_short(node)}")
    return value


_SCALARS: dict[str, Callable[[list[Any]], Any]] = {
    "n": _none,
    "b": _bool,
    "i": _int,
    "f": _float,
    "s": _str,
}


def _count(value: Any, what: str) -> int:
    if type(value) is not int or value < 0:
        raise DecodeError(f"malformed {what} {_short(value)}")
    return value


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
