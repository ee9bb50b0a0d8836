"""Serve the built dashboard at ``/`` with a single-page-app fallback."""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from fastapi.responses import FileResponse
from starlette.exceptions import HTTPException

REPO_DIST = Path(__file__).resolve().parents[2] / "frontend" / "dist"


def mount_dashboard(app: FastAPI, dist: Path | None) -> bool:
    """Serve ``dist`` when it holds a built dashboard; False when there is none."""
    root = (dist or REPO_DIST).resolve()
    index = root / "index.html"
    if not index.is_file():
        return False

    @app.get("/{path:path}", include_in_schema=False)
    def dashboard(path: str) -> FileResponse:
        if path.startswith("api/") or path == "api":
            raise HTTPException(404, f"no route {'/' + path}")
        candidate = (root / path).resolve()
        if path and candidate.is_file() and candidate.is_relative_to(root):
            return FileResponse(candidate)
        return FileResponse(index)

    return True
