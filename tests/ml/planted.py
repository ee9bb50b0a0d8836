"""A payload whose unpickling creates a marker file: what a hostile peer or a planted state file
could hold. A test that refuses it checks that the marker never appears."""

from __future__ import annotations

from pathlib import Path
from typing import Any


class Touch:
    def __init__(self, marker: Path | str) -> None:
        self.marker = Path(marker)

    def __reduce__(self) -> tuple[Any, ...]:
        return (Path.touch, (self.marker,))
