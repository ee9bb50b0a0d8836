"""The built dashboard is served at / with a single-page-app fallback."""

from __future__ import annotations

from pathlib import Path

from fastapi.testclient import TestClient

from tessera_api.app import create_app
from tessera_api.frontend import accepts_gzip
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


def test_hashed_assets_are_cached_for_good_and_text_is_sent_compressed(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    (dist / "assets").mkdir(parents=True)
    (dist / "index.html").write_text('<html><script src="/assets/index-AbCd1234.js"></script>')
    script = "export const answer = 42;\n" * 400
    (dist / "assets" / "index-AbCd1234.js").write_text(script)
    settings = Settings(home=tmp_path, admin_token=ADMIN_TOKEN, frontend_dist=dist)
    client = TestClient(create_app(settings, specs=SPECS))

    asset = client.get("/assets/index-AbCd1234.js", headers={"Accept-Encoding": "gzip"})
    assert asset.headers["cache-control"] == "public, max-age=31536000, immutable"
    assert asset.headers["content-encoding"] == "gzip"
    assert int(asset.headers["content-length"]) < len(script) / 10
    assert asset.text == script  # the client decompresses
    assert asset.headers["content-type"].startswith("text/javascript")
    again = client.get(
        "/assets/index-AbCd1234.js",
        headers={"Accept-Encoding": "gzip", "If-None-Match": asset.headers["etag"]},
    )
    assert again.status_code == 304

    plain = client.get("/assets/index-AbCd1234.js", headers={"Accept-Encoding": "gzip;q=0"})
    assert "content-encoding" not in plain.headers
    assert plain.text == script

    for page in ("/", "/jobs/abc"):
        index = client.get(page, headers={"Accept-Encoding": "gzip"})
        assert index.headers["cache-control"] == "no-cache"
        assert "index-AbCd1234.js" in index.text
        unchanged = client.get(page, headers={"If-None-Match": index.headers["etag"]})
        assert unchanged.status_code == 304


def test_gzip_acceptance() -> None:
    assert accepts_gzip("gzip, deflate, br")
    assert accepts_gzip("br;q=1.0, gzip;q=0.8")
    assert accepts_gzip("*")
    assert not accepts_gzip("gzip;q=0")
    assert not accepts_gzip("br")
    assert not accepts_gzip("")
