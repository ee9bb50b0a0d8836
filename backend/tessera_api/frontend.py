"""Serve the built dashboard at ``/`` with a single-page-app fallback.

There is no catch-all route: a GET that matches no route and lies outside ``/api`` is answered
from the dashboard's files, or with its ``index.html`` so the client-side router takes over.

The build names each asset after a hash of its content (``assets/index-pkRgPjkc.js``), so an
asset under ``assets/`` never changes under its name: browsers keep it for a year without
asking again. Everything else (``index.html``, which names the current assets) is revalidated on
each load, answered with 304 when unchanged. Text files are sent gzip-compressed to clients that
accept it, compressed once per file version and kept in memory.
"""

from __future__ import annotations

import functools
import gzip
import mimetypes
import re
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.responses import FileResponse, Response

REPO_DIST = Path(__file__).resolve().parents[2] / "frontend" / "dist"
IMMUTABLE = "public, max-age=31536000, immutable"
REVALIDATE = "no-cache"
HASHED = re.compile(r"^assets/.+-[A-Za-z0-9_-]{8,}\.[a-z0-9]+$")
COMPRESSIBLE = frozenset({".js", ".mjs", ".css", ".html", ".svg", ".json", ".map", ".txt"})
MIN_COMPRESS = 1024


def mount_dashboard(app: FastAPI, dist: Path | None) -> bool:
    """Serve ``dist`` when it holds a built dashboard; False when there is none."""
    root = (dist or REPO_DIST).resolve()
    app.state.dashboard_root = root if (root / "index.html").is_file() else None
    return app.state.dashboard_root is not None


def dashboard_file(request: Request) -> Response | None:
    """The dashboard's answer to an unmatched request, if it has one."""
    root: Path | None = getattr(request.app.state, "dashboard_root", None)
    path = request.url.path
    if root is None or request.method not in ("GET", "HEAD"):
        return None
    if path == "/api" or path.startswith("/api/"):
        return None
    candidate = (root / path.lstrip("/")).resolve()
    if candidate.is_file() and candidate.is_relative_to(root):
        return _send(request, candidate, candidate.relative_to(root).as_posix())
    return _send(request, root / "index.html", "index.html")


def accepts_gzip(header: str) -> bool:
    """Whether an ``Accept-Encoding`` value allows gzip (named or ``*``, without ``q=0``)."""
    for part in header.lower().split(","):
        coding, _, params = part.partition(";")
        if coding.strip() not in ("gzip", "*"):
            continue
        weight = params.strip().removeprefix("q=")
        try:
            return weight == "" or float(weight) > 0
        except ValueError:
            return False
    return False


def _send(request: Request, path: Path, name: str) -> Response:
    cache = IMMUTABLE if HASHED.match(name) else REVALIDATE
    stat = path.stat()
    compress = (
        path.suffix in COMPRESSIBLE
        and stat.st_size >= MIN_COMPRESS
        and accepts_gzip(request.headers.get("accept-encoding", ""))
    )
    etag = f'"{stat.st_mtime_ns:x}-{stat.st_size:x}{"-gz" if compress else ""}"'
    headers = {"Cache-Control": cache, "Vary": "Accept-Encoding", "ETag": etag}
    if etag in request.headers.get("if-none-match", ""):
        return Response(status_code=304, headers=headers)
    if not compress:
        return FileResponse(path, headers=headers)
    body = _gzipped(path, stat.st_mtime_ns, stat.st_size)
    media_type = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
    headers |= {"Content-Encoding": "gzip"}
    return Response(body, media_type=media_type, headers=headers)


@functools.lru_cache(maxsize=64)
def _gzipped(path: Path, mtime_ns: int, size: int) -> bytes:
    """The file compressed; a new build (another mtime or size) is compressed anew."""
    return gzip.compress(path.read_bytes(), compresslevel=9, mtime=0)
