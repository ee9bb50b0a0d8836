"""The control plane's worker-facing routes (docs/worker-protocol.md), with the party token."""

from __future__ import annotations

import contextlib
import ssl
from pathlib import Path
from typing import Any, BinaryIO

import httpx

API = "/api/v1"


class ApiError(RuntimeError):
    """The control plane answered with an error status."""

    def __init__(self, status: int, detail: str, code: str = "") -> None:
        super().__init__(f"control plane answered {status}: {detail}")
        self.status = status
        self.detail = detail
        self.code = code

    @property
    def retryable(self) -> bool:
        return self.status >= 500 or self.status in {408, 429}


class ControlPlane:
    """A thin synchronous client; every method raises ``ApiError`` or ``httpx.HTTPError``."""

    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        timeout_s: float = 10.0,
        http: httpx.Client | None = None,
        verify: str | bool = True,
    ) -> None:
        """``verify``: a CA file to check an HTTPS control plane against (True: the system's)."""
        self.base_url = base_url.rstrip("/")
        self._headers = {"Authorization": f"Bearer {token}"}
        self._http = http or httpx.Client(
            base_url=self.base_url, timeout=timeout_s, verify=_verify(verify)
        )

    def close(self) -> None:
        self._http.close()

    def _call(self, method: str, path: str, body: Any = None) -> Any:
        response = self._http.request(method, API + path, json=body, headers=self._headers)
        if response.status_code >= 400:
            raise ApiError(response.status_code, _detail(response), _code(response))
        if response.status_code == 204 or not response.content:
            return None
        return response.json()

    def me(self) -> dict[str, Any]:
        """Whom the token belongs to (``{"name": party or "admin", "is_admin": …}``)."""
        result: dict[str, Any] = self._call("GET", "/me")
        return result

    def register(self, info: dict[str, Any]) -> dict[str, Any]:
        result: dict[str, Any] = self._call("POST", "/workers", info)
        return result

    def heartbeat(self, worker_id: str, body: dict[str, Any]) -> dict[str, Any]:
        result: dict[str, Any] = self._call("POST", f"/workers/{worker_id}/heartbeat", body)
        return result

    def task(self, task_id: str) -> dict[str, Any]:
        result: dict[str, Any] = self._call("GET", f"/tasks/{task_id}")
        return result

    def task_credentials(self, task_id: str, csr: str, signature: str) -> dict[str, Any]:
        body = {"csr": csr, "signature": signature}
        result: dict[str, Any] = self._call("POST", f"/tasks/{task_id}/credentials", body)
        return result

    def post_rendezvous(self, task_id: str, host: str, port: int) -> None:
        self._call("POST", f"/tasks/{task_id}/rendezvous", {"host": host, "port": port})

    def post_status(self, task_id: str, status: str, **extra: Any) -> None:
        body = {"status": status, **{k: v for k, v in extra.items() if v is not None}}
        self._call("POST", f"/tasks/{task_id}/status", body)

    def post_metrics(self, job_id: str, task_id: str, points: list[dict[str, Any]]) -> None:
        self._call("POST", f"/jobs/{job_id}/metrics", {"task_id": task_id, "points": points})

    def post_logs(self, job_id: str, task_id: str, lines: list[dict[str, Any]]) -> None:
        self._call("POST", f"/jobs/{job_id}/logs", {"task_id": task_id, "lines": lines})

    def post_checkpoint(self, job_id: str, body: dict[str, Any]) -> None:
        """Record a checkpoint, or (an item with ``upload``, queued after its record) upload
        its file; a file gone from disk raises ``OSError``."""
        if "upload" in body:
            self.put_checkpoint_file(job_id, body)
        else:
            self._call("POST", f"/jobs/{job_id}/checkpoints", body)

    def put_checkpoint_file(
        self, job_id: str, item: dict[str, Any], file: BinaryIO | None = None
    ) -> None:
        """Upload the file ``item`` names, or ``file`` (opened by the caller) in its place."""
        where = f"/jobs/{job_id}/checkpoints/{item['attempt']}/{item['step']}/{item['rank']}/file"
        with contextlib.ExitStack() as opened:
            source = file or opened.enter_context(Path(item["upload"]).open("rb"))
            response = self._http.put(
                API + where,
                params={"task_id": item["task_id"], "kind": item.get("kind", "checkpoint")},
                content=iter(lambda: source.read(1 << 20), b""),
                headers=self._headers | {"Content-Type": "application/octet-stream"},
            )
        if response.status_code >= 400:
            raise ApiError(response.status_code, _detail(response), _code(response))


def _verify(verify: str | bool) -> ssl.SSLContext | bool:
    if isinstance(verify, bool):
        return verify
    return ssl.create_default_context(cafile=verify)


def _code(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return ""
    return str(body.get("code", "")) if isinstance(body, dict) else ""


def _detail(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.text[:300]
    if isinstance(body, dict):
        return str(body.get("detail") or body.get("title") or body)[:300]
    return str(body)[:300]
