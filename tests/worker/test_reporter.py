"""The HTTP reporter keeps training alive while the control plane is briefly unreachable."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from tessera_ml.worlds import free_port
from tessera_worker.client import ControlPlane
from tessera_worker.redaction import HostPaths
from tessera_worker.reporter import MAX_SPOOL_BYTES, HttpReporter, deliver_spool


class Ingest:
    """A minimal HTTP endpoint standing in for the ingest routes; it can go down and come back."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.posts: list[tuple[str, dict[str, Any]]] = []
        self.puts: list[tuple[str, str]] = []
        self.put_bodies: list[bytes] = []
        self.delay_s = 0.0
        self.in_flight = self.most_in_flight = 0
        self._server: ThreadingHTTPServer | None = None

    def up(self) -> None:
        ingest, lock = self, threading.Lock()

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                with lock:
                    ingest.in_flight += 1
                    ingest.most_in_flight = max(ingest.most_in_flight, ingest.in_flight)
                time.sleep(ingest.delay_s)
                length = int(self.headers["Content-Length"])
                ingest.posts.append((self.path, json.loads(self.rfile.read(length))))
                with lock:
                    ingest.in_flight -= 1
                self.send_response(204)
                self.end_headers()

            def do_PUT(self) -> None:
                path, _, query = self.path.partition("?")
                ingest.puts.append((path, query))
                ingest.put_bodies.append(self._body())
                self.send_response(204)
                self.end_headers()

            def _body(self) -> bytes:
                if "Content-Length" in self.headers:
                    return self.rfile.read(int(self.headers["Content-Length"]))
                chunks = []
                while size := int(self.rfile.readline().strip(), 16):
                    chunks.append(self.rfile.read(size))
                    self.rfile.readline()
                self.rfile.readline()
                return b"".join(chunks)

            def log_message(self, *args: Any) -> None:
                return None

        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def down(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def steps(self) -> list[int]:
        return [
            p["step"]
            for path, body in self.posts
            if path.endswith("/metrics")
            for p in body["points"]
        ]


@pytest.fixture
def ingest() -> Iterator[Ingest]:
    server = Ingest(free_port())
    yield server
    server.down()


def _reporter(ingest: Ingest, max_buffer: int = 20_000) -> HttpReporter:
    api = ControlPlane(f"http://127.0.0.1:{ingest.port}", "token", timeout_s=2)
    return HttpReporter(
        api, job_id="j", task_id="t", rank=3, max_buffer=max_buffer, flush_interval_s=0.05
    )


def test_metrics_are_batched_and_delivered(ingest: Ingest) -> None:
    ingest.up()
    reporter = _reporter(ingest)
    for step in range(1, 1201):
        reporter.metrics(step, {"loss": 1.0 / step})
    reporter.log("hello")
    reporter.checkpoint(1200, "/ckpt/step-1200", 10, "ab" * 32)

    assert reporter.close()
    assert ingest.steps() == list(range(1, 1201))
    metric_posts = [b for path, b in ingest.posts if path == "/api/v1/jobs/j/metrics"]
    assert 3 <= len(metric_posts) < 1200
    assert all(p["rank"] == 3 for b in metric_posts for p in b["points"])
    assert (
        "/api/v1/jobs/j/checkpoints",
        {
            "task_id": "t",
            "rank": 3,
            "step": 1200,
            "uri": "/ckpt/step-1200",
            "size": 10,
            "sha256": "ab" * 32,
        },
    ) in ingest.posts


def test_log_lines_name_no_folder_of_the_host(ingest: Ingest, tmp_path: Path) -> None:
    ingest.up()
    api = ControlPlane(f"http://127.0.0.1:{ingest.port}", "token", timeout_s=2)
    reporter = HttpReporter(
        api, job_id="j", task_id="t", rank=0, flush_interval_s=0.05, host_paths=HostPaths(tmp_path)
    )
    reporter.log(f"read {tmp_path}/data/rows.csv")
    assert reporter.close()
    (body,) = [b for path, b in ingest.posts if path.endswith("/logs")]
    assert [line["message"] for line in body["lines"]] == ["read $TESSERA_HOME/data/rows.csv"]


def test_an_unreachable_control_plane_is_survived_with_a_bounded_buffer(ingest: Ingest) -> None:
    reporter = _reporter(ingest, max_buffer=100)
    for step in range(1, 251):
        reporter.metrics(step, {"loss": 0.5})
    reporter.checkpoint(250, "/ckpt", 1, "00")
    assert not reporter.flush(timeout_s=0.3)
    assert reporter.failures > 0

    ingest.up()
    assert reporter.close(timeout_s=20)

    assert reporter.dropped == 150
    assert ingest.steps() == list(range(151, 251))
    assert any(path.endswith("/checkpoints") for path, _ in ingest.posts)


def test_flush_beside_the_sender_thread_posts_one_batch_at_a_time(ingest: Ingest) -> None:
    ingest.up()
    ingest.delay_s = 0.2
    reporter = _reporter(ingest)
    reporter.metrics(1, {"loss": 1.0})
    time.sleep(0.1)  # the sender thread is posting step 1
    reporter.metrics(2, {"loss": 0.5})

    assert reporter.flush()
    assert reporter.close()
    assert ingest.most_in_flight == 1
    assert ingest.steps() == [1, 2]


def test_what_a_rank_could_not_deliver_is_spooled_and_delivered_by_its_worker(
    ingest: Ingest, tmp_path: Path
) -> None:
    spool = tmp_path / "rank-3.spool.json"
    api = ControlPlane(f"http://127.0.0.1:{ingest.port}", "token", timeout_s=2)
    reporter = HttpReporter(api, job_id="j", task_id="t", rank=3, spool=spool)
    for step in range(1, 1001):
        reporter.metrics(step, {"loss": 1.0 / step})
    reporter.log("the end")
    reporter.checkpoint(1000, "/ckpt/step-1000", 10, "ab" * 32)

    assert not reporter.close(timeout_s=0.3)  # the control plane is down as the rank ends
    assert spool.exists()

    with pytest.raises(httpx.TransportError):
        deliver_spool(api, "j", "t", spool, tmp_path, attempt=1)  # still down: kept for later
    assert spool.exists()
    ingest.up()
    deliver_spool(api, "j", "t", spool, tmp_path, attempt=1)

    assert not spool.exists()
    assert ingest.steps() == list(range(1, 1001))
    assert any(path.endswith("/checkpoints") for path, _ in ingest.posts)
    assert any(path.endswith("/logs") for path, _ in ingest.posts)


def test_values_the_control_plane_refuses_are_left_out_and_said(ingest: Ingest) -> None:
    ingest.up()
    reporter = _reporter(ingest)
    reporter.metrics(1, {"loss": 0.5, "acc": 0.1})
    reporter.metrics(2, {"loss": float("nan"), "acc": 0.2})
    reporter.metrics(3, {"loss": float("inf"), "acc": 0.3})
    reporter.log("a\x00b")
    assert reporter.close()

    points = [
        (p["step"], p["name"])
        for path, body in ingest.posts
        if path.endswith("/metrics")
        for p in body["points"]
    ]
    assert sorted(points) == [(1, "acc"), (1, "loss"), (2, "acc"), (3, "acc")]
    lines = [
        (line["level"], line["message"])
        for path, body in ingest.posts
        if path.endswith("/logs")
        for line in body["lines"]
    ]
    assert lines[0][0] == "warning" and "step 2: loss=nan is not a finite number" in lines[0][1]
    assert len([m for level, m in lines if level == "warning"]) == 1  # said once per metric
    assert ("info", "a\ufffdb") in lines


def test_a_worker_uploads_no_file_its_rank_pointed_at_outside_the_checkpoints(
    ingest: Ingest, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The rank writes the spool; the worker that delivers it sees files the rank does not
    (its key), so it opens only regular files of the job's checkpoint folder, through no link."""
    ingest.up()
    api = ControlPlane(f"http://127.0.0.1:{ingest.port}", "token", timeout_s=2)
    key = tmp_path / "identity" / "worker.key"
    key.parent.mkdir()
    key.write_text("PRIVATE KEY")
    checkpoints = tmp_path / "checkpoints" / "j"
    (checkpoints / "step-1").mkdir(parents=True)
    (checkpoints / "step-1" / "rank-0.pt").symlink_to(key)
    (checkpoints / "step-2").symlink_to(key.parent, target_is_directory=True)
    (checkpoints / "step-3").mkdir()
    (checkpoints / "step-3" / "rank-0.pt").write_bytes(b"weights")
    item = {"attempt": 1, "rank": 0, "task_id": "t", "kind": "checkpoint"}
    uploads = [
        item | {"step": 1, "upload": str(checkpoints / "step-1" / "rank-0.pt")},
        item | {"step": 2, "upload": str(checkpoints / "step-2" / "worker.key")},
        item | {"step": 4, "upload": str(key)},
        item | {"step": 3, "upload": str(checkpoints / "step-3" / "rank-0.pt")},
    ]
    spool = tmp_path / "logs" / "t" / "rank-0.spool.json"
    spool.parent.mkdir(parents=True)
    spool.write_text(json.dumps({"checkpoints": uploads}))

    deliver_spool(api, "j", "t", spool, checkpoints, attempt=1)

    assert [path for path, _ in ingest.puts] == ["/api/v1/jobs/j/checkpoints/1/3/0/file"]
    assert ingest.put_bodies == [b"weights"]
    assert capsys.readouterr().err.count("dropped 1 spooled items") == 3


def test_a_spool_that_is_a_link_is_dropped_unread(ingest: Ingest, tmp_path: Path) -> None:
    ingest.up()
    api = ControlPlane(f"http://127.0.0.1:{ingest.port}", "token", timeout_s=2)
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_text(json.dumps({"lines": [{"message": "not the rank's"}]}))
    spool = tmp_path / "rank-0.spool.json"
    spool.symlink_to(elsewhere)

    deliver_spool(api, "j", "t", spool, tmp_path, attempt=1)

    assert ingest.posts == []
    assert not spool.is_symlink() and elsewhere.exists()


def test_a_spool_of_the_wrong_shape_or_size_is_dropped_without_harm(
    ingest: Ingest, tmp_path: Path
) -> None:
    ingest.up()
    api = ControlPlane(f"http://127.0.0.1:{ingest.port}", "token", timeout_s=2)
    (tmp_path / "rank-0.spool.json").mkdir()
    (tmp_path / "rank-1.spool.json").write_text("[]")
    (tmp_path / "rank-2.spool.json").write_text(json.dumps({"points": "many"}))
    with (tmp_path / "rank-3.spool.json").open("wb") as sparse:
        sparse.truncate(MAX_SPOOL_BYTES + 1)

    for rank in range(4):
        deliver_spool(api, "j", "t", tmp_path / f"rank-{rank}.spool.json", tmp_path, attempt=1)

    assert ingest.posts == []
    assert [p.name for p in tmp_path.iterdir()] == ["rank-0.spool.json"]  # a folder: left


def test_spooled_checkpoints_are_sent_as_the_tasks_own_rank(ingest: Ingest, tmp_path: Path) -> None:
    """The worker delivers a spool with the party's token: the task and the rank are its own,
    whatever the rank wrote, and numbers that are not integers are refused."""
    ingest.up()
    api = ControlPlane(f"http://127.0.0.1:{ingest.port}", "token", timeout_s=2)
    record = {"step": 5, "uri": "step-000000005", "size": 3, "sha256": "ab" * 32}
    weights = tmp_path / "step-000000005" / "rank-2.pt"
    weights.parent.mkdir()
    weights.write_bytes(b"weights")
    forged = [
        record | {"task_id": "another-task", "rank": 7},
        record | {"step": "5/../../other"},
        record | {"task_id": "another-task", "rank": 7, "attempt": 9, "upload": str(weights)},
    ]
    spool = tmp_path / "rank-2.spool.json"
    spool.write_text(json.dumps({"checkpoints": forged}))

    deliver_spool(api, "j", "t", spool, tmp_path, attempt=1)

    assert [body for _, body in ingest.posts] == [record | {"task_id": "t", "rank": 2}]
    assert ingest.puts == [("/api/v1/jobs/j/checkpoints/1/5/2/file", "task_id=t&kind=checkpoint")]
