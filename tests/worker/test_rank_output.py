"""What real rank processes say reaches the control plane's ingest: their own start and end, what
the algorithm prints and logs, lines on its progress, CPU, memory and traffic metrics; a cancel
is one clear line per rank, without a traceback."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tessera_ml.security.pki import Identity, issue_credentials
from tessera_ml.worlds import free_port
from tessera_worker.identity import TaskCredentials
from tessera_worker.launch import Rendezvous, TaskLaunch
from tessera_worker.launcher import LaunchSettings, Outcome, launch_ranks
from tests.worker.test_launcher import AUTHORITY, ROOT, SECRET, _launch
from tests.worker.toy_algorithm import ENTRY_POINT


@dataclass
class Ingest:
    """The control plane's ingest routes, over HTTP, keeping what they were sent."""

    lines: list[dict[str, Any]] = field(default_factory=list)
    points: list[dict[str, Any]] = field(default_factory=list)
    url: str = ""

    def of_rank(self, rank: int) -> list[tuple[str, str]]:
        return [(ln["level"], ln["message"]) for ln in self.lines if ln["rank"] == rank]


@pytest.fixture
def ingest() -> Iterator[Ingest]:
    kept = Ingest()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            if self.path.endswith("/logs"):
                kept.lines.extend(body["lines"])
            elif self.path.endswith("/metrics"):
                kept.points.extend(body["points"])
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    kept.url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield kept
    finally:
        server.shutdown()
        server.server_close()


def _run(
    launch: TaskLaunch, home: Path, api_url: str, stop: threading.Event, port: int | None = None
) -> Outcome:
    party = launch.party_of(launch.ranks[0].rank)
    tls = issue_credentials(
        AUTHORITY, Identity(party, launch.attempt_id), home / "tasks" / launch.task_id / "tls"
    )
    settings = LaunchSettings(
        home=home,
        api_url=api_url,
        rendezvous_timeout_s=30,
        collective_timeout_s=30,
        stop_grace_s=5,
        extra_env={"PYTHONPATH": str(ROOT)},
    )
    return launch_ranks(
        launch,
        Rendezvous(host="127.0.0.1", port=port or free_port(), secret=SECRET),
        settings,
        stop,
        entry_point=ENTRY_POINT,
        credentials=TaskCredentials(home / "tasks" / launch.task_id, tls, token="task-token"),
    )


def test_a_ranks_output_logging_progress_and_process_facts_reach_the_logs(
    tmp_path: Path, ingest: Ingest
) -> None:
    launch = _launch(uuid.uuid4().hex, [0, 1], ["alice", "alice"], steps=3, chatty=True)
    outcome = _run(launch, tmp_path, ingest.url, threading.Event())

    assert outcome.status == "succeeded", outcome.reason
    for rank in (0, 1):
        lines = ingest.of_rank(rank)
        messages = [m for _, m in lines]
        assert messages[0] == f"rank {rank}/2 of job {launch.job_id} starting"
        assert ("warning", "toy: a warning through logging") in lines
        assert [m for m in messages if m.startswith("toy step")] == [
            f"toy step {s} done" for s in (1, 2, 3)
        ]
        progress = [m for m in messages if m.startswith("progress:")]
        assert progress[0].startswith("progress: step 1/3 (33%)")
        assert progress[-1].startswith("progress: step 3/3 (100%)")
        assert "loss 0.3333" in progress[-1]
        assert messages[-1].startswith(f"rank {rank} finished in ")
        assert not [m for level, m in lines if level == "error"]
        names = {p["name"] for p in ingest.points if p["rank"] == rank}
        # the toy algorithm reports no traffic: its communicator's counters stand in
        assert {"cpu_seconds", "memory_rss_bytes", "bytes_sent", "bytes_received"} <= names
        sent = [
            p["value"] for p in ingest.points if p["rank"] == rank and p["name"] == "bytes_sent"
        ]
        assert sent[-1] > 0
        rss = [p["value"] for p in ingest.points if p["name"] == "memory_rss_bytes"]
        assert min(rss) > 10 * 2**20  # a Python process with torch loaded


def test_a_cancel_is_one_line_per_rank_without_a_traceback(tmp_path: Path, ingest: Ingest) -> None:
    # one party's worker stops its rank first: the other rank's link breaks before its own
    # worker stops it, which is still the cancel, not a failure
    parties = ["alice", "bob"]
    config = {"steps": 10_000, "step_s": 0.02, "attempt_tag": uuid.uuid4().hex}
    launches = [_launch(uuid.uuid4().hex, [r], parties, **config) for r in (0, 1)]
    port = free_port()
    stops = [threading.Event(), threading.Event()]
    outcomes: dict[int, Outcome] = {}

    def one(rank: int) -> None:
        outcomes[rank] = _run(launches[rank], tmp_path, ingest.url, stops[rank], port)

    threads = [threading.Thread(target=one, args=(r,)) for r in (0, 1)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 60
    while not any(m.startswith("progress:") for _, m in ingest.of_rank(1)):
        assert time.monotonic() < deadline, ingest.lines
        time.sleep(0.1)
    stops[1].set()
    time.sleep(1.0)
    stops[0].set()
    for t in threads:
        t.join(30)

    assert {r: o.status for r, o in outcomes.items()} == {0: "cancelled", 1: "cancelled"}
    for rank in (0, 1):
        lines = ingest.of_rank(rank)
        assert lines[-1] == ("info", f"rank {rank} stopped: the job was cancelled")
        assert [level for level, _ in lines if level in ("error", "critical")] == []
        assert not any("Traceback" in m for _, m in lines)
