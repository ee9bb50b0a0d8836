"""The control plane serves algorithm metadata without ever importing torch."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tessera_ml.registry import all_specs

SCRIPT = """
import sys, tempfile
from fastapi.testclient import TestClient
from tessera_api.app import create_app
from tessera_api.settings import Settings
from tessera_api.models import Base

home = tempfile.mkdtemp()
app = create_app(Settings(home=home, admin_token="t"))
Base.metadata.create_all(app.state.engine)
client = TestClient(app)
response = client.get("/api/v1/algorithms", headers={"Authorization": "Bearer t"})
assert response.status_code == 200, response.text
names = [a["name"] for a in response.json()]
for name in names:
    one = client.get(f"/api/v1/algorithms/{name}", headers={"Authorization": "Bearer t"})
    assert one.json()["config_schema"]["type"] == "object"
leaked = sorted(m for m in sys.modules if m == "torch" or m.startswith("torch."))
print(len(names), leaked)
"""


def test_serving_algorithms_never_imports_torch() -> None:
    root = Path(__file__).resolve().parents[2]
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        capture_output=True,
        text=True,
        cwd=root,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    count, leaked = result.stdout.strip().split(" ", 1)
    assert leaked == "[]", f"torch was imported: {leaked}"
    assert int(count) == len(all_specs())
