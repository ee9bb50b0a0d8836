"""Serve the built dashboard at ``/`` with a single-page-app fallback.

There is no catch-all route: a GET that matches no route and lies outside ``/api`` is answered
from the dashboard's files, or with its ``index.html`` so the client-side router takes over.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.responses import FileResponse

REPO_DIST = Path(__file__).resolve().parents[2] / "frontend" / "dist"


def mount_dashboard(app: FastAPI, dist: Path | None) -> bool:
    """Serve ``dist`` when it holds a built dashboard; False when there is none."""
    root = (dist or REPO_DIST).resolve()
    app.state.dashboard_root = root if (root / "index.html").is_file() else None
    return app.state.dashboard_root is not None


def dashboard_file(request: Request) -> FileResponse | None:
    """The dashboard's answer to an unmatched request, if it has one."""
    root: Path | None = getattr(request.app.state, "dashboard_root", None)
    path = request.url.path
    if root is None or request.method not in ("GET", "HEAD"):
        return None
    if path == "/api" or path.startswith("/api/"):
        return None
    candidate = (root / path.lstrip("/")).resolve()
    if candidate.is_file() and candidate.is_relative_to(root):
        return FileResponse(candidate)
    return FileResponse(root / "index.html")
