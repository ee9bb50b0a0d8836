"""Alembic environment: the models' metadata and the URL from the config or the settings."""

from __future__ import annotations

from alembic import context
from sqlalchemy import Connection

from tessera_api.db import make_engine
from tessera_api.models import Base
from tessera_api.settings import Settings

config = context.config
target_metadata = Base.metadata


def database_url() -> str:
    url = config.get_main_option("sqlalchemy.url")
    return url or Settings().resolved_database_url


def run_with(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        compare_type=True,
        render_as_batch=connection.dialect.name == "sqlite",
    )
    with context.begin_transaction():
        context.run_migrations()


def run_offline() -> None:
    context.configure(url=database_url(), target_metadata=target_metadata, literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()


def run_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        run_with(connection)
        return
    engine = make_engine(database_url())
    with engine.connect() as connection:
        run_with(connection)
    engine.dispose()


if context.is_offline_mode():
    run_offline()
else:
    run_online()
