"""The built dashboard is served at / with a single-page-app fallback."""

from __future__ import annotations

from pathlib import Path

from fastapi.testclient import TestClient

from tessera_api.app import create_app
from tessera_api.settings import Settings
from tests.backend.conftest import ADMIN_TOKEN, SPECS


def test_dashboard_and_fallback(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    (dist / "assets").mkdir(parents=True)
    (dist / "index.html").write_text("<html>tessera</html>")
    (dist / "assets" / "app.js").write_text("console.log(1)")
    settings = Settings(home=tmp_path, admin_token=ADMIN_TOKEN, frontend_dist=dist)
    client = TestClient(create_app(settings, specs=SPECS))
    assert client.get("/").text == "<html>tessera</html>"
    assert client.get("/jobs/abc").text == "<html>tessera</html>"
    assert client.get("/assets/app.js").text == "console.log(1)"
    for method in ("GET", "POST"):
        missing = client.request(method, "/api/v1/nothing")
        assert missing.status_code == 404
        assert missing.headers["content-type"].startswith("application/problem+json")
    assert client.post("/jobs/abc").status_code == 404
    assert client.get("/api/v1/health").json() == {"status": "ok"}
    (tmp_path / "secret.txt").write_text("secret")
    escaped = client.get("/assets/%2E%2E/%2E%2E/secret.txt")
    assert escaped.text == "<html>tessera</html>"


def test_no_dashboard_no_root(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path, admin_token=ADMIN_TOKEN, frontend_dist=tmp_path / "none")
    client = TestClient(create_app(settings, specs=SPECS))
    assert client.get("/").status_code == 404
