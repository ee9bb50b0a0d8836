"""What ``tessera api`` and ``tessera up`` settle before serving: the settings, the home folder
and the database. Each problem becomes a one-line ``StartupError`` that names the setting and
never its value (the admin token is one of them)."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from tessera_api.settings import Settings


class StartupError(Exception):
    """A setting, the home folder or the database that the control plane cannot start with."""


def load_settings(**overrides: Any) -> Settings:
    try:
        settings = Settings()
    except ValidationError as exc:
        raise StartupError(f"invalid settings: {settings_problems(exc)}") from exc
    return settings.model_copy(update=overrides) if overrides else settings


def settings_problems(exc: ValidationError) -> str:
    """Each bad setting by its environment variable and what is wrong, without the values."""
    problems = []
    for error in exc.errors(include_input=False, include_url=False):
        field = ".".join(str(part) for part in error["loc"])
        name = f"TESSERA_{field.upper()}" if field else "the settings"
        problems.append(f"{name}: {error['msg']}")
    return "; ".join(problems)


def prepare_home(settings: Settings) -> None:
    try:
        settings.home.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StartupError(
            f"cannot use TESSERA_HOME={settings.home} as the data folder: {exc.strerror}"
        ) from exc


def migrate_database(settings: Settings) -> None:
    """Bring the database to the latest schema."""
    from sqlalchemy.exc import ArgumentError, NoSuchModuleError, OperationalError

    from tessera_api.migrate import upgrade

    try:
        upgrade(settings.resolved_database_url)
    except (OperationalError, ArgumentError, NoSuchModuleError, ImportError, ValueError) as exc:
        where = settings.resolved_database_url.split("@")[-1]
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise StartupError(
            f"cannot use the database at {where} (TESSERA_DATABASE_URL): {first}"
        ) from exc
