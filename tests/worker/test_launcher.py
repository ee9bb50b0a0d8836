"""The launcher on real rank processes joined in a real gloo world (no control plane)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import torch

from tessera_ml.ports import port_of, reserve_port
from tessera_ml.security.pki import Authority, Identity, issue_credentials
from tessera_ml.worlds import free_port
from tessera_worker import procs
from tessera_worker.hardware import interface_of
from tessera_worker.identity import TaskCredentials
from tessera_worker.launch import HostedRank, Rendezvous, TaskLaunch
from tessera_worker.launcher import (
    SOCKET_INTERFACES,
    LaunchSettings,
    Outcome,
    RunningRank,
    end,
    launch_ranks,
    rank_environment,
    shared_memory,
    watch,
)
from tests.worker.proc_scan import pids_with, wait_for, wait_until_gone
from tests.worker.toy_algorithm import ENTRY_POINT, PRIVATE_CAUSE

ROOT = Path(__file__).resolve().parents[2]
AUTHORITY = Authority.create("launcher test CA")
SECRET = "ab" * 32


def _plan(parties: list[str]) -> list[dict[str, Any]]:
    return [
        {"rank": r, "party": p, "role": "trainer", "role_rank": r, "assignment_index": r}
        | {"local_index": 0}
        for r, p in enumerate(parties)
    ]


def _launch(task_id: str, ranks: list[int], parties: list[str], **config: Any) -> TaskLaunch:
    return TaskLaunch(
        task_id=task_id,
        job_id=f"job-{task_id}",
        algorithm="toy",
        config=config,
        plan=_plan(parties),
        world_size=len(parties),
        ranks=[{"rank": r, "device": "cpu"} for r in ranks],  # type: ignore[misc]
        attempt_id=f"attempt-{config.get('attempt_tag', 'x')}",
    )


def _ranks_of(task: str) -> str:
    return f"logs/{task}/rank-"


def _settings(tmp_path: Path) -> LaunchSettings:
    return LaunchSettings(
        home=tmp_path,
        rendezvous_timeout_s=30,
        collective_timeout_s=30,
        stop_grace_s=2,
        extra_env={"PYTHONPATH": str(ROOT)},
    )


def credentials(launch: TaskLaunch, folder: Path) -> TaskCredentials:
    """What a worker obtains from the control plane for a task: a certificate of its party."""
    party = launch.party_of(launch.ranks[0].rank)
    tls = issue_credentials(
        AUTHORITY, Identity(party, launch.attempt_id), folder / launch.task_id / "tls"
    )
    return TaskCredentials(folder / launch.task_id, tls, token="")


def _run(
    launch: TaskLaunch,
    settings: LaunchSettings,
    stop: threading.Event,
    port: int,
    listener: socket.socket | None = None,
) -> Outcome:
    return launch_ranks(
        launch,
        Rendezvous(host="127.0.0.1", port=port, secret=SECRET),
        settings,
        stop,
        entry_point=ENTRY_POINT,
        credentials=credentials(launch, settings.home / "tasks"),
        store_listener=listener,
    )


def test_two_parties_join_one_world_and_succeed(tmp_path: Path) -> None:
    port, stop = free_port(), threading.Event()
    parties = ["alice", "bob", "bob"]
    outcomes: dict[str, Outcome] = {}
    tasks = {"a": [0], "b": [1, 2]}
    launches = {
        t: _launch(t, ranks, parties, steps=3, checkpoint_every=3) for t, ranks in tasks.items()
    }

    def one(task: str) -> None:
        outcomes[task] = _run(launches[task], _settings(tmp_path), stop, port)

    threads = [threading.Thread(target=one, args=(t,)) for t in tasks]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)

    assert {t: o.status for t, o in outcomes.items()} == {"a": "succeeded", "b": "succeeded"}
    folder = tmp_path / "checkpoints" / "job-a" / "step-000000003"
    assert (folder / "rank-0.pt").exists()
    log = (tmp_path / "logs" / "b" / "rank-2.log").read_text()
    assert "rank 2 finished" in log


def _state(pid: int) -> str:
    """A process's state letter (``Z``: ended, not yet reaped: its id is still its own)."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def test_ranks_that_ended_keep_their_ids_until_the_task_ends(tmp_path: Path) -> None:
    # a leader reaped while the task runs gives up its id, and the task's end, which kills
    # every rank's process group, would reach whatever process was given the id since
    settings = _settings(tmp_path)
    running = []
    for rank, seconds in enumerate((0.0, 1.5)):
        gone, held = procs.lifeline()
        log = tmp_path / f"rank-{rank}.log"
        argv = [sys.executable, "-c", f"import time; time.sleep({seconds})"]
        proc = procs.spawn(argv, env=dict(os.environ), log_path=log, pass_fds=(held,))
        os.close(held)
        running.append(RunningRank(rank, proc, log, tmp_path / f"rank-{rank}.json", gone))
    deadline = time.monotonic() + 30
    while procs.exit_code(running[0].proc) is None and time.monotonic() < deadline:
        time.sleep(0.02)
    assert procs.exit_code(running[0].proc) == 0 and _state(running[0].proc.pid) == "Z"

    outcome = watch(_launch("t", [0, 1], ["alice", "alice"]), running, threading.Event(), settings)

    assert outcome.status == "succeeded"
    assert [_state(r.proc.pid) for r in running] == ["Z", "Z"]
    assert end(running, settings)
    assert [r.proc.returncode for r in running] == [0, 0]


def test_a_party_whose_ranks_are_all_here_meets_over_loopback(tmp_path: Path) -> None:
    """gloo's and NCCL's own connections carry no authentication: where a party's process
    group is all in one task, its ranks listen on loopback, out of other hosts' reach."""
    loopback = interface_of("127.0.0.1")
    assert loopback is not None
    task = uuid.uuid4().hex
    note = tmp_path / "checkpoints" / f"job-{task}" / "note"
    launch = _launch(task, [0, 1], ["alice", "alice"], paths=["/proc/self/environ"])
    launch.config["write_to"] = str(note)
    outside = dict.fromkeys(SOCKET_INTERFACES, "eth-outside")
    settings = replace(_settings(tmp_path), extra_env={**_settings(tmp_path).extra_env, **outside})
    rendezvous = Rendezvous(host="127.0.0.1", port=free_port(), secret=SECRET)

    outcome = launch_ranks(
        launch,
        rendezvous,
        settings,
        threading.Event(),
        entry_point="tests.worker.toy_algorithm:peek",
        credentials=credentials(launch, tmp_path / "tasks"),
    )

    assert outcome.status == "succeeded", outcome.reason
    for rank in (0, 1):
        log = (tmp_path / "logs" / task / f"rank-{rank}.log").read_text()
        seen = json.loads(next(line for line in log.splitlines() if line.startswith("peek "))[5:])
        environ = dict(v.split("=", 1) for v in seen["/proc/self/environ"].split("\0") if "=" in v)
        assert environ["GLOO_SOCKET_IFNAME"] == environ["NCCL_SOCKET_IFNAME"] == loopback
    # a party with a rank on another host keeps the interface other hosts reach
    assert launch.hosts_whole_party
    assert not _launch(task, [0, 1], ["alice", "alice", "alice", "bob"]).hosts_whole_party
    assert _launch(task, [3], ["alice", "alice", "alice", "bob"]).hosts_whole_party


def test_rank_zero_serves_the_store_on_the_port_its_worker_reserved(tmp_path: Path) -> None:
    listener = reserve_port("127.0.0.1")
    port = port_of(listener)
    # between publishing the port and rank 0's start nothing else can bind it
    with pytest.raises(OSError):
        socket.create_server(("127.0.0.1", port))
    task = uuid.uuid4().hex
    launch = _launch(task, [0, 1], ["alice", "alice"], steps=2)
    outcome = _run(launch, _settings(tmp_path), threading.Event(), port, listener)

    assert outcome.status == "succeeded", outcome.reason
    assert listener.fileno() == -1  # the worker's copy is closed once the ranks started
    log = (tmp_path / "logs" / task / "rank-1.log").read_text()
    assert "rank 1 finished" in log
    with socket.create_server(("127.0.0.1", port)):  # and the port is free again
        pass


def test_a_rank_gets_only_what_python_and_torch_read_of_its_workers_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kept = {
        "PATH": "/usr/bin",
        "LC_ALL": "C.UTF-8",
        "OMP_NUM_THREADS": "2",
        "NCCL_DEBUG": "WARN",
        "HTTPS_PROXY": "http://proxy:3128",
        "PYTHONUSERBASE": "/opt/py",
        "HIP_VISIBLE_DEVICES": "0",
        "FI_PROVIDER": "efa",
        "MY_RANK_SETTING": "asked for with --rank-env",
    }
    dropped = {
        "OPENAI_API_KEY": "sk-1",
        "AWS_ACCESS_KEY_ID": "AKIA1",
        "WANDB_API_KEY": "w1",
        "SSH_AUTH_SOCK": "/tmp/ssh-agent.sock",
        "DATABASE_URL": "postgresql://tessera:pw@db/tessera",
        "CELERY_BROKER_URL": "redis://:pw@redis:6379/0",
        "http_proxy": "http://user:pw@proxy:3128",
        "ALL_PROXY": "socks5://key-8c1e@proxy:1080",
        "all_proxy": "http://user:p/w@proxy:3128",
        "TESSERA_PARTY_TOKEN": "t1",
        "TESSERA_HOME": str(tmp_path),
        "NCCL_SECRET": "s",
    }
    for name, value in {**kept, **dropped}.items():
        monkeypatch.setenv(name, value)

    env = rank_environment(
        replace(_settings(tmp_path), rank_env=("MY_RANK_SETTING", "OPENAI_API_KEY"))
    )

    assert {name: env.get(name) for name in kept} == kept
    assert sorted(set(dropped) & set(env)) == []  # a secret-like name even when asked for
    assert env["PYTHONPATH"] == str(ROOT)  # what the worker adds
    assert env["TESSERA_RANK_THREADS"]


def test_failed_rank_fails_the_task_naming_party_and_rank(tmp_path: Path) -> None:
    task = uuid.uuid4().hex
    launch = _launch(task, [0, 1], ["bob", "bob"], steps=50, step_s=0.05, crash_rank=1)
    outcome = _run(launch, _settings(tmp_path), threading.Event(), free_port())

    assert outcome.status == "failed"
    assert (outcome.party, outcome.rank, outcome.exit_code) == ("bob", 1, 1)
    assert outcome.reason is not None
    assert outcome.reason.startswith("exited with code 1")
    assert "RuntimeError: boom at step 1" in outcome.reason
    # the traceback names the module's file, not where this host keeps it
    assert 'File "tests/worker/toy_algorithm.py"' in outcome.reason
    assert str(ROOT) not in outcome.reason
    # the cause it was raised from quotes data: it stays in this host's log
    assert PRIVATE_CAUSE not in outcome.reason
    assert not [line for line in outcome.last_lines if PRIVATE_CAUSE in line]
    assert PRIVATE_CAUSE in (tmp_path / "logs" / task / "rank-1.log").read_text()
    assert pids_with(_ranks_of(task)) == []


def test_a_hung_rank_fails_the_task_within_the_collective_timeout(tmp_path: Path) -> None:
    task = uuid.uuid4().hex
    launch = _launch(task, [0, 1], ["alice", "alice"], steps=50, hang_rank=1, hang_step=2)
    settings = _settings(tmp_path)
    settings.collective_timeout_s = 3
    started = time.monotonic()
    outcome = _run(launch, settings, threading.Event(), free_port())

    assert outcome.status == "failed" and outcome.rank == 0
    assert time.monotonic() - started < 60
    assert pids_with(_ranks_of(task)) == []


def test_stop_signal_cancels_every_rank_quickly(tmp_path: Path) -> None:
    task = uuid.uuid4().hex
    launch = _launch(task, [0, 1], ["alice", "alice"], steps=10_000, step_s=0.05)
    stop = threading.Event()
    result: list[Outcome] = []
    thread = threading.Thread(
        target=lambda: result.append(_run(launch, _settings(tmp_path), stop, free_port()))
    )
    thread.start()
    assert len(wait_for(_ranks_of(task), 2, 30)) == 2
    time.sleep(1.0)
    stopped_at = time.monotonic()
    stop.set()
    thread.join(15)

    assert result and result[0].status == "cancelled"
    assert time.monotonic() - stopped_at < 10
    assert pids_with(_ranks_of(task)) == []


LAUNCHER_SCRIPT = textwrap.dedent(
    """
    import sys, threading
    from pathlib import Path
    from tessera_worker.launch import HostedRank, Rendezvous, TaskLaunch
    from tessera_worker.launcher import LaunchSettings, launch_ranks
    from tests.worker.test_launcher import SECRET, credentials
    launch = TaskLaunch.model_validate_json(sys.argv[1])
    settings = LaunchSettings(home=Path(sys.argv[2]), extra_env={"PYTHONPATH": sys.argv[4]})
    launch_ranks(launch, Rendezvous(host="127.0.0.1", port=int(sys.argv[3]), secret=SECRET),
                 settings, threading.Event(), entry_point="tests.worker.toy_algorithm:run",
                 credentials=credentials(launch, settings.home / "tasks"))
    """
)


def test_killing_the_launcher_leaves_no_rank_behind(tmp_path: Path) -> None:
    task = uuid.uuid4().hex
    launch = _launch(task, [0, 1], ["alice", "alice"], steps=10_000, step_s=0.05)
    argv = [sys.executable, "-c", LAUNCHER_SCRIPT, launch.model_dump_json(), str(tmp_path)]
    launcher = subprocess.Popen([*argv, str(free_port()), str(ROOT)], env=dict(os.environ))
    try:
        assert len(wait_for(_ranks_of(task), 2, 30)) == 2
        os.kill(launcher.pid, signal.SIGKILL)
        launcher.wait(5)
        assert wait_until_gone(_ranks_of(task), 10) == []
    finally:
        launcher.kill()
        for pid in pids_with(_ranks_of(task)):
            os.kill(pid, signal.SIGKILL)
        # a launcher killed so cannot remove its task's shared memory folder
        shutil.rmtree(shared_memory(task), ignore_errors=True)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_ranks_on_gpus_join_an_nccl_world(tmp_path: Path) -> None:
    count = torch.cuda.device_count()
    parties = ["alice"] * count
    launch = _launch(uuid.uuid4().hex, list(range(count)), parties, steps=2)
    launch = launch.model_copy(
        update={
            "backend": "nccl",
            "ranks": [HostedRank(rank=r, device=f"cuda:{r}") for r in range(count)],
        }
    )
    outcome = _run(launch, _settings(tmp_path), threading.Event(), free_port())
    assert outcome.status == "succeeded", outcome.reason


def test_a_rank_reads_data_only_inside_its_workers_data_folder(tmp_path: Path) -> None:
    """A job's dataset reference comes from its creator, maybe another party: a worker's ranks
    read files under the worker's data folder (``<home>/data``) and nowhere else."""
    rows = "a,b,label\n" + "".join(f"{i},{i % 3},{i % 2}\n" for i in range(40))
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "rows.csv").write_text(rows)
    (tmp_path / "private.csv").write_text(rows)
    outcomes = {}
    for name, ref in (("inside", "file:rows.csv"), ("outside", f"file:{tmp_path / 'private.csv'}")):
        task = uuid.uuid4().hex
        launch = TaskLaunch(
            task_id=task,
            job_id=f"job-{task}",
            algorithm="ddp",
            config={"dataset": ref, "steps": 2, "batch_size": 8},
            plan=_plan(["alice"]),
            world_size=1,
            ranks=[{"rank": 0, "device": "cpu"}],  # type: ignore[misc]
            attempt_id=f"attempt-{task}",
        )
        outcomes[name] = launch_ranks(
            launch,
            Rendezvous(host="127.0.0.1", port=free_port(), secret=SECRET),
            _settings(tmp_path),
            threading.Event(),
            entry_point="tessera_ml.algorithms.ddp.train:run",
            credentials=credentials(launch, tmp_path / "tasks"),
        )
    assert outcomes["inside"].status == "succeeded", outcomes["inside"].reason
    outside = outcomes["outside"]
    assert outside.status == "failed"
    assert outside.reason is not None
    assert "DataRefError" in outside.reason
    assert "is outside the folders this worker reads" in outside.reason
