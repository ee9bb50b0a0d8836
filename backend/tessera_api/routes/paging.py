"""Parameters shared by routes: paging, and the keys and names in paths and queries."""

from __future__ import annotations

from typing import Annotated

from fastapi import Path, Query

from tessera_api.limits import MAX_ROW_ID
from tessera_api.schemas import AS_NAME, NameCheck

Limit = Annotated[int, Query(ge=1, le=500, description="Page size")]
Offset = Annotated[int, Query(ge=0, le=2**31, description="Items to skip")]
Key = Annotated[str, Path(json_schema_extra=AS_NAME), NameCheck]
"""An id or a name in the path: no control characters."""
Name63Query = Annotated[str | None, Query(max_length=63, json_schema_extra=AS_NAME), NameCheck]
Cursor = Annotated[int, Query(ge=0, le=MAX_ROW_ID, description="Items after this id")]
