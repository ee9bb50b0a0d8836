"""Parties: creating and updating them, what is shown of them, and their policies."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from pydantic import BaseModel, Field

from tessera_api.schemas.common import Name63, Slug, Strict, Text200, Text2000


class PartyCreate(Strict):
    name: Annotated[Slug, Field(json_schema_extra={"not": {"const": "admin"}})] = Field(
        description="Lower-case slug; not `admin`, which names the admin in policies"
    )
    display_name: Text200 | None = None
    description: Text2000 = ""


class PartyUpdate(Strict):
    display_name: Text200 | None = None
    description: Text2000 | None = None
    disabled: bool | None = None


class PartyPublic(BaseModel):
    id: str
    name: str
    display_name: str
    description: str
    created_at: datetime
    disabled: bool


class PartyName(BaseModel):
    """A party as any party may see it: enough to name it in a job's assignments."""

    name: str
    display_name: str


class PartyCreated(PartyPublic):
    token: str = Field(description="The party's API token; shown only once")


class PartyPolicy(Strict):
    """What a party consents to without being asked, and what its workers may run."""

    auto_approve_from: list[Slug] = Field(
        max_length=1000,
        description="Parties (or `admin`) whose jobs this party approves without being asked",
    )
    algorithms: list[Name63] | None = Field(
        max_length=1000,
        description="Algorithms this party's workers run; null: every algorithm shipped",
    )
    custom_code: bool = Field(
        description="Whether this party runs jobs whose configuration imports code by name "
        "(a custom model); its workers also need the code on their --allow-custom list"
    )
