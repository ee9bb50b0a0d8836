"""The declared encoding between ranks: round trips of plain data, and refusal of anything else."""

from __future__ import annotations

import json
import math
import pickle
import struct
from dataclasses import dataclass
from enum import IntEnum
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pytest
import torch

from tessera_ml.comm import codec
from tessera_ml.comm.codec import MAX_DEPTH, DecodeError, decode, encode
from tests.ml.planted import Touch

TENSOR_DTYPES = [
    torch.bool,
    torch.uint8,
    torch.int8,
    torch.int16,
    torch.int32,
    torch.int64,
    torch.float16,
    torch.bfloat16,
    torch.float32,
    torch.float64,
]
ARRAY_DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "float32", "float64"]


def _same(a: Any, b: Any) -> bool:
    """Equal values of identical types, all the way down (tensors and arrays by dtype and bits)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return list(a) == list(b) and all(
            type(k) is type(j) and _same(a[k], b[j]) for k, j in zip(a, b, strict=True)
        )
    if isinstance(a, torch.Tensor):
        return a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)
    if isinstance(a, np.ndarray):
        return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b)
    if isinstance(a, float) and math.isnan(a):
        return math.isnan(b)
    if isinstance(a, float):
        return a == b and math.copysign(1, a) == math.copysign(1, b)
    return bool(a == b)


def _round_trip(value: Any) -> Any:
    data = encode(value)
    assert data.startswith(b"TSD1")
    back = decode(data)
    assert _same(value, back), (value, back)
    return back


@pytest.mark.parametrize(
    "value",
    [
        None,
        True,
        False,
        0,
        -1,
        2**63,
        -(2**200) + 7,
        10**5000,
        0.0,
        -0.0,
        1.5,
        -1e-308,
        5e-324,
        1.7976931348623157e308,
        math.inf,
        -math.inf,
        math.nan,
        "",
        "plain",
        "ünïcødé \U0001f600 \x00 \ud800",
        b"",
        b"\x00\x80\xff" * 10,
        [],
        (),
        {},
        [1, "a", None],
        (1,),
        {"a": 1, 2: "b", -3: [None]},
        {"1": "str key", 1: "int key"},
        [[[[]]]],
        {"alignment": (b"salt", [b"d1", b"d2"]), "counts": (3, 4), "ok": True},
    ],
    ids=lambda v: type(v).__name__,
)
def test_plain_values_round_trip_with_their_types(value: Any) -> None:
    _round_trip(value)


def test_nested_structures_keep_tuples_lists_and_key_order() -> None:
    value = {
        "z": [(1, 2.5), [b"x", ("s", None)]],
        "a": {0: torch.arange(3), 1: np.arange(2, dtype=np.int32)},
        7: ((), [], {}),
    }
    back = _round_trip(value)
    assert list(back) == ["z", "a", 7]
    assert isinstance(back["z"][0], tuple) and isinstance(back["z"][1], list)


@pytest.mark.parametrize("dtype", TENSOR_DTYPES, ids=str)
def test_tensors_of_every_allowed_dtype(dtype: torch.dtype) -> None:
    values = torch.tensor([[0.0, 1.0, -2.0], [3.5, -0.0, 100.0]])
    t = values.to(dtype)
    back = _round_trip(t)
    assert back.device.type == "cpu" and not back.requires_grad
    assert _same(_round_trip(t[0, 1]), t[0, 1])
    assert _same(_round_trip(t[:0]), t[:0])


def test_tensor_special_values_and_shapes() -> None:
    special = torch.tensor([math.inf, -math.inf, math.nan, -0.0, 5e-324], dtype=torch.float64)
    back = decode(encode(special))
    assert back.numpy().tobytes() == special.numpy().tobytes()
    for shape in [(), (0,), (4, 0, 2), (2, 3, 4)]:
        _round_trip(torch.rand(shape))


def test_non_contiguous_tensors_are_sent_as_their_values() -> None:
    base = torch.arange(24, dtype=torch.float32).reshape(4, 6)
    for view in [base.t(), base[:, ::2], base[1:3, 2:5], base.expand(2, 4, 6), base[::2, 1:]]:
        assert not view.is_contiguous()
        back = _round_trip(view)
        assert back.is_contiguous()
    grad = torch.ones(3, requires_grad=True) * 2
    assert _same(decode(encode(grad)), torch.full((3,), 2.0))
    assert _same(decode(encode(torch.nn.Parameter(torch.ones(2)))), torch.ones(2))


def test_encoded_tensor_is_only_its_header_and_raw_bytes() -> None:
    t = torch.arange(5, dtype=torch.int32)
    data = encode(t)
    (size,) = struct.unpack(">I", data[4:8])
    assert json.loads(data[8 : 8 + size]) == ["T", "int32", [5], 20]
    assert data[8 + size :] == t.numpy().tobytes()


@pytest.mark.parametrize("dtype", ARRAY_DTYPES)
def test_numpy_arrays_of_every_allowed_dtype(dtype: str) -> None:
    a = np.array([[0, 1, 2], [3, 4, 5]]).astype(dtype)
    _round_trip(a)
    _round_trip(a.T)
    _round_trip(a[:, ::2])
    _round_trip(np.array(a[0, 0]))
    swapped = a.astype(np.dtype(dtype).newbyteorder(">"))
    back = decode(encode(swapped))
    assert back.dtype == np.dtype(dtype) and np.array_equal(back, a)
    assert back.flags.writeable


@dataclass
class _Capacity:
    node: int


class _Kind(IntEnum):
    ONE = 1


class _Pair(NamedTuple):
    a: int
    b: int


@pytest.mark.parametrize(
    ("value", "named"),
    [
        (_Capacity(1), "_Capacity"),
        ({1, 2}, "set"),
        (frozenset(), "frozenset"),
        (object(), "object"),
        (bytearray(b"x"), "bytearray"),
        (complex(1, 2), "complex"),
        (_Kind.ONE, "_Kind"),
        (_Pair(1, 2), "_Pair"),
        (np.float64(1.0), "numpy.float64"),
        (np.int64(1), "numpy.int64"),
        (torch.Size([2, 3]), "torch.Size"),
        (Path("/x"), "Path"),
        ([1, {"deep": {2, 3}}], "set"),
    ],
    ids=lambda v: type(v).__name__,
)
def test_unsupported_types_are_refused_by_name(value: Any, named: str) -> None:
    with pytest.raises(TypeError, match=f"cannot encode .*{named}"):
        encode(value)


def test_unsupported_dict_keys_and_dtypes_are_refused() -> None:
    for key, named in [(1.5, "float"), (True, "bool"), ((1,), "tuple"), (None, "NoneType")]:
        with pytest.raises(TypeError, match=f"dict keys must be str or int, got {named}"):
            encode({key: 1})
    for t in [torch.zeros(2, dtype=torch.complex64), torch.zeros(2, dtype=torch.uint16)]:
        with pytest.raises(TypeError, match="cannot encode a tensor of dtype"):
            encode(t)
    with pytest.raises(TypeError, match=r"cannot encode a tensor with layout torch\.sparse_coo"):
        encode(torch.eye(2).to_sparse())
    for a in [
        np.array(["a"]),
        np.array([1], dtype=object),
        np.zeros(1, dtype=np.complex64),
        np.zeros(1, dtype="datetime64[s]"),
        np.zeros(1, dtype=[("x", "i4")]),
        np.zeros(1, dtype=np.uint32),
    ]:
        with pytest.raises(TypeError, match="cannot encode a numpy array of dtype"):
            encode(a)


def _nested(levels: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(levels - 1):
        value = [value]
    return value


def test_nesting_is_limited_both_ways() -> None:
    _round_trip(_nested(MAX_DEPTH))
    with pytest.raises(ValueError, match=f"nested deeper than {MAX_DEPTH} levels"):
        encode(_nested(MAX_DEPTH + 1))
    looped: list[Any] = []
    looped.append(looped)
    with pytest.raises(ValueError, match="nested deeper"):
        encode(looped)
    deep = ["l"]
    for _ in range(MAX_DEPTH):
        deep = ["l", deep]
    with pytest.raises(DecodeError, match=f"containers nested deeper than {MAX_DEPTH} levels"):
        decode(_frame(deep))
    with pytest.raises(DecodeError, match="nested deeper"):
        decode(_raw_frame(b"[" * 100_000 + b"]" * 100_000))


def _raw_frame(header: bytes, blobs: bytes = b"") -> bytes:
    return b"TSD1" + struct.pack(">I", len(header)) + header + blobs


def _frame(header: Any, blobs: bytes = b"") -> bytes:
    return _raw_frame(json.dumps(header).encode(), blobs)


def test_a_pickle_is_refused_without_being_loaded(tmp_path: Path) -> None:
    marker = tmp_path / "unpickled"
    for protocol in range(2, pickle.HIGHEST_PROTOCOL + 1):
        with pytest.raises(DecodeError, match="refused a pickled payload"):
            decode(pickle.dumps(Touch(marker), protocol=protocol))
    with pytest.raises(DecodeError, match="wrong magic"):
        decode(pickle.dumps(Touch(marker), protocol=0))
    with pytest.raises(DecodeError, match="refused a pickled payload"):
        decode(pickle.dumps({"hello": [1, 2, 3]}))
    assert not marker.exists()


def test_truncation_and_trailing_bytes_are_refused() -> None:
    data = encode({"salt": b"0123456789", "t": torch.arange(4)})
    with pytest.raises(DecodeError, match="truncated: 0 bytes, shorter than the 8-byte prefix"):
        decode(b"")
    with pytest.raises(DecodeError, match="truncated: 6 bytes, shorter than the 8-byte prefix"):
        decode(data[:6])
    with pytest.raises(DecodeError, match="truncated: 2 bytes"):
        decode(b"TS")
    (size,) = struct.unpack(">I", data[4:8])
    with pytest.raises(DecodeError, match=f"truncated: a header of {size} bytes"):
        decode(data[: 8 + size - 1])
    for cut in [8 + size, len(data) - 1, len(data) - 32]:
        with pytest.raises(DecodeError, match="truncated: a blob of"):
            decode(data[:cut])
    with pytest.raises(DecodeError, match="1 trailing bytes after the last blob"):
        decode(data + b"\x00")
    with pytest.raises(DecodeError, match="3 trailing bytes"):
        decode(_frame(["n"], b"abc"))


def test_wrong_magic_is_refused() -> None:
    with pytest.raises(DecodeError, match=r"wrong magic b'TSD2', expected b'TSD1'"):
        decode(b"TSD2" + encode(1)[4:])
    for data in [json.dumps([1, 2]).encode(), b"PK\x03\x04" + bytes(20), b"X"]:
        with pytest.raises(DecodeError, match="wrong magic"):
            decode(data)


@pytest.mark.parametrize(
    ("header", "blobs", "message"),
    [
        (["x"], b"", "unknown tag 'x'"),
        (["P", "os.system"], b"", "unknown tag 'P'"),
        ({"tag": "n"}, b"", "malformed node"),
        ([], b"", "malformed node"),
        ("n", b"", "malformed node"),
        ([1], b"", "malformed node"),
        (["n", 1], b"", "malformed None node"),
        (["b", 1], b"", "malformed bool node"),
        (["i", 1], b"", "malformed int node"),
        (["i", "0x1"], b"", "malformed int node"),
        (["i", "01"], b"", "malformed int node"),
        (["i", "-0"], b"", "malformed int node"),
        (["i", " 1"], b"", "malformed int node"),
        (["f", 1.5], b"", "malformed float node"),
        (["f", "1.5"], b"", "malformed float node"),
        (["f", "Infinity"], b"", "malformed float node"),
        (["f", "0x1.8p+1", 2], b"", "malformed 'f' node"),
        (["s", 3], b"", "malformed str node"),
        (["y", -1], b"", "malformed blob size"),
        (["y", 1.0], b"", "malformed blob size"),
        (["y", True], b"", "malformed blob size"),
        (["y", 4], b"ab", "truncated: a blob of 4 bytes, 2 left"),
        (["d", ["s", "a"]], b"", "a dict node with a key and no value"),
        (["d", ["f", "0x0.0p+0"], ["n"]], b"", "dict keys must be str or int nodes"),
        (["d", ["t"], ["n"]], b"", "dict keys must be str or int nodes"),
        (["d", ["s", "a"], ["n"], ["s", "a"], ["n"]], b"", "duplicate dict key 'a'"),
        (["d", ["i", "1"], ["n"], ["i", "1"], ["n"]], b"", "duplicate dict key 1"),
        (["T", "float32", [2]], b"", "malformed tensor node"),
        (["T", "float32", 2, 8], b"", "malformed tensor node"),
        (["T", "object", [1], 8], b"\x00" * 8, "tensor dtype 'object' is not in the allow-list"),
        (["T", "complex64", [1], 8], b"\x00" * 8, "tensor dtype 'complex64' is not in the"),
        (["T", "uint16", [1], 2], b"\x00" * 2, "tensor dtype 'uint16' is not in the allow-list"),
        (["A", "O", [1], 8], b"\x00" * 8, "numpy array dtype 'O' is not in the allow-list"),
        (["A", "object", [1], 8], b"\x00" * 8, "numpy array dtype 'object' is not in the"),
        (["A", "bfloat16", [1], 2], b"\x00" * 2, "numpy array dtype 'bfloat16' is not in"),
        (["T", "float32", [-1], 4], b"\x00" * 4, "malformed dimension -1"),
        (["T", "float32", [1.0], 4], b"\x00" * 4, "malformed dimension 1.0"),
        (["T", "float32", [2, 3], 20], b"\x00" * 20, "tensor size 20 does not match shape"),
        (["T", "int64", [3], 8], b"\x00" * 8, r"size 8 does not match shape \[3\] of int64 \(24"),
        (["A", "int16", [2], 8], b"\x00" * 8, r"numpy array size 8 does not match shape \[2\]"),
        (["T", "float32", [2], 8], b"\x00" * 4, "truncated: a blob of 8 bytes, 4 left"),
        (["T", "float32", [0, 2**70], 0], b"", "tensor shape .* cannot be built"),
        (["A", "float32", [0, 2**70], 0], b"", "numpy array shape .* cannot be built"),
    ],
    ids=lambda v: repr(v)[:40],
)
def test_malformed_headers_are_refused(header: Any, blobs: bytes, message: str) -> None:
    with pytest.raises(DecodeError, match=message):
        decode(_frame(header, blobs))


def test_headers_that_are_not_strict_json_are_refused() -> None:
    for raw in [b'["f", NaN]', b'["f", Infinity]', b"not json", b"\xff\xfe", b'["n"] x']:
        with pytest.raises(DecodeError, match="malformed header"):
            decode(_raw_frame(raw))


def test_decode_error_is_a_value_error() -> None:
    assert issubclass(codec.DecodeError, ValueError)
