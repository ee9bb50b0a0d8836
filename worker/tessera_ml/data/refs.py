"""Dataset references: the strings a job names its data with. Importable without torch.

Syntax: ``SCHEME:TARGET[?key=value&key=value…]``

- ``sklearn:NAME`` with NAME in ``digits``, ``breast_cancer``, ``wine``, ``diabetes``
- ``generated:clicks`` (options: ``rows``, ``fields``, ``ids``, ``zipf``, ``dim``, ``seed``)
- ``file:PATH`` with PATH ending in ``.csv``, ``.parquet`` or ``.npz``; on a worker the file
  must lie in its data root, where relative paths are resolved (``tessera_ml.host_paths``;
  options: ``label``, ``id``, ``task``)

Options every scheme accepts: ``test`` (test fraction, default 0.2, or ``file:OTHER.csv`` for a
separate test file), ``split_seed`` (default 0: the split is fixed, whatever the job seed),
``shard=I/N`` (keep shard I of N by rows), ``columns=A:B`` or ``columns=name,name`` (keep those
feature columns).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Annotated
from urllib.parse import parse_qsl

from pydantic import AfterValidator, StringConstraints

from tessera_ml.errors import CodedError

SCHEMES = ("sklearn", "generated", "file")
SKLEARN_SETS = ("digits", "breast_cancer", "wine", "diabetes")
GENERATED_SETS = ("clicks",)
FILE_SUFFIXES = (".csv", ".parquet", ".npz")
COMMON_OPTIONS = frozenset({"test", "split_seed", "shard", "columns", "standardize"})
SCHEME_OPTIONS: dict[str, frozenset[str]] = {
    "sklearn": frozenset(),
    "generated": frozenset({"rows", "fields", "ids", "zipf", "dim", "seed", "bias"}),
    "file": frozenset({"label", "id", "task"}),
}
_SHARD = re.compile(r"^(\d+)/(\d+)$")


class DataRefError(CodedError):
    """A dataset reference that cannot be parsed or resolved."""


@dataclass(frozen=True)
class DataRef:
    scheme: str
    target: str
    options: dict[str, str] = field(default_factory=dict)

    def option(self, key: str, default: str | None = None) -> str | None:
        return self.options.get(key, default)

    def shard(self) -> tuple[int, int] | None:
        raw = self.options.get("shard")
        if raw is None:
            return None
        match = _SHARD.match(raw)
        if match is None:
            raise DataRefError("bad_shard", f"shard must look like I/N, got {raw!r}")
        index, count = int(match[1]), int(match[2])
        if count < 1 or not 0 <= index < count:
            raise DataRefError("bad_shard", f"shard {raw!r} needs 0 <= I < N")
        return index, count

    def __str__(self) -> str:
        query = "&".join(f"{k}={v}" for k, v in self.options.items())
        return f"{self.scheme}:{self.target}" + (f"?{query}" if query else "")


def parse_ref(ref: str) -> DataRef:
    """Parse and check a dataset reference without loading anything."""
    scheme, sep, rest = ref.partition(":")
    if not sep or scheme not in SCHEMES:
        prefixes = ", ".join(s + ":" for s in SCHEMES)
        raise DataRefError(
            "unknown_scheme", f"dataset reference {ref!r} must start with one of {prefixes}"
        )
    target, _, query = rest.partition("?")
    options = dict(parse_qsl(query, keep_blank_values=True, strict_parsing=False))
    allowed = COMMON_OPTIONS | SCHEME_OPTIONS[scheme]
    unknown = sorted(set(options) - allowed)
    if unknown:
        raise DataRefError(
            "unknown_option",
            f"{scheme}: references take no option {', '.join(unknown)} "
            f"(allowed: {', '.join(sorted(allowed))})",
        )
    if scheme == "sklearn" and target not in SKLEARN_SETS:
        raise DataRefError(
            "unknown_dataset", f"no bundled set {target!r} (known: {', '.join(SKLEARN_SETS)})"
        )
    if scheme == "generated" and target not in GENERATED_SETS:
        raise DataRefError(
            "unknown_dataset", f"no generator {target!r} (known: {', '.join(GENERATED_SETS)})"
        )
    if scheme == "file" and not target.lower().endswith(FILE_SUFFIXES):
        raise DataRefError(
            "unknown_format", f"file {target!r} must end in {', '.join(FILE_SUFFIXES)}"
        )
    parsed = DataRef(scheme, target, options)
    parsed.shard()
    return parsed


def checked_ref(ref: str) -> str:
    """``ref`` unchanged once it parses; a configuration field's validator."""
    parse_ref(ref)
    return ref


DatasetRef = Annotated[str, StringConstraints(max_length=1024), AfterValidator(checked_ref)]
"""A configuration field holding a dataset reference, checked when the job is created."""
