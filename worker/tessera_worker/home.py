"""Where a machine keeps Tessera's files: ``$TESSERA_HOME``, else this default. The control
plane and the workers of one machine share it."""

from __future__ import annotations

from pathlib import Path


def default_home() -> Path:
    """``~/.tessera`` when a home directory exists, else ``./.tessera``."""
    home = Path("~").expanduser()
    return home / ".tessera" if home.is_dir() else Path(".tessera").resolve()
