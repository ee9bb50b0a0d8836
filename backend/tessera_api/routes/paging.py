"""Query parameters shared by list routes."""

from __future__ import annotations

from typing import Annotated

from fastapi import Query

Limit = Annotated[int, Query(ge=1, le=500, description="Page size")]
Offset = Annotated[int, Query(ge=0, le=2**31, description="Items to skip")]
