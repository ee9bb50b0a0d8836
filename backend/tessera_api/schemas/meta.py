"""The API's health, the caller's identity, and the version served."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field


class Health(BaseModel):
    status: Literal["ok"]


class Me(BaseModel):
    name: str = Field(description="``admin``, or the party's slug name")
    is_admin: bool


class Version(BaseModel):
    version: str
    api: str
    algorithms: list[str]
