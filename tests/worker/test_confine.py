"""Ranks see of their worker's files only their own task's (``tessera_worker.confine``).

Real namespaces and mounts throughout: the host must allow unprivileged user namespaces, as
``tessera worker --confine-ranks auto`` checks (this one does, and so does CI's).
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import replace
from pathlib import Path

import pytest
from pydantic import ValidationError

from tessera_ml.worlds import free_port
from tessera_worker import confine
from tessera_worker.confine import Confinement
from tessera_worker.launch import Rendezvous, TaskLaunch
from tessera_worker.launcher import (
    LaunchSettings,
    Outcome,
    confinement,
    launch_ranks,
    rank_specs,
    shared_memory,
)
from tests.worker.test_launcher import SECRET, _launch, _settings, credentials

LOOK = """
import ctypes, json, os, sys
seen = {"pid": os.getpid(), "cwd": os.getcwd()}
seen["processes"] = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
seen["devices"] = sorted(os.listdir("/dev"))
seen["run"] = sorted(os.listdir("/run")) if os.path.isdir("/run") else []
seen["group"], seen["session"] = os.getpgid(0), os.getsid(0)
seen["init"] = open("/proc/1/cmdline").read()
try:  # to the mode it has: were the device writable here, the host's would not change
    os.chmod("/dev/null", os.stat("/dev/null").st_mode & 0o7777)
    seen["chmod"] = "changed"
except OSError as exc:
    seen["chmod"] = type(exc).__name__
with open("/dev/null", "w") as null, open("/dev/urandom", "rb") as noise:
    seen["devices work"] = null.write("x") == 1 and len(noise.read(8)) == 8
outside, folder = int(sys.argv[1]), sys.argv[2]
try:
    os.kill(outside, 0)
    seen["signal"] = "sent"
except OSError as exc:
    seen["signal"] = type(exc).__name__
for path in sys.argv[3:]:
    try:
        seen[path] = open(path).read()
    except OSError as exc:
        seen[path] = type(exc).__name__
libc = ctypes.CDLL(None, use_errno=True)
seen["umount"] = libc.umount2(folder.encode(), 2)
try:
    open(os.path.join(folder, "new"), "w")
    seen["create"] = "created"
except OSError as exc:
    seen["create"] = type(exc).__name__
print(json.dumps(seen))
"""


def test_a_confined_process_sees_only_what_its_plan_keeps(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    home = tmp_path / "home"
    (home / "identity").mkdir(parents=True)
    (home / "identity" / "worker.key").write_text("the worker's key")
    (home / "logs" / "t1").mkdir(parents=True)
    (home / "logs" / "t1" / "mine").write_text("the task's own")
    (home / "logs" / "t2").mkdir()
    (home / "logs" / "t2" / "other").write_text("another task's")
    # a file named alone reads as empty, even in a folder kept writable
    token = home / "logs" / "t1" / "party.token"
    token.write_text("the party token")
    (home / "tokens").mkdir()
    (home / "tokens" / "bob.token").write_text("a token under the hidden folder")
    hide = (str(home), str(token), str(home / "tokens" / "bob.token"))
    plan = Confinement(hide=hide, keep=(str(home / "logs" / "t1"),))
    # through a process outside the namespaces (this one: dumpable, of the same user)
    around = Path(f"/proc/{os.getpid()}/root{home}/identity/worker.key")
    cmdline = Path(f"/proc/{os.getpid()}/cmdline")
    # a socket of the host's /tmp (an ssh agent's, say), listening
    agent = socket.socket(socket.AF_UNIX)
    agent.bind(str(tmp_path / "agent.sock"))
    agent.listen()
    request.addfinalizer(agent.close)
    paths = [
        tmp_path / "agent.sock",
        around,
        home / "tokens" / "bob.token",
        home / "identity" / "worker.key",
        home / "logs" / "t1" / "mine",
        home / "logs" / "t2" / "other",
        token,
        cmdline,
    ]
    look = [sys.executable, "-c", LOOK, str(os.getpid()), str(home), *map(str, paths)]
    proc = subprocess.Popen(
        plan.command(look),
        cwd=home / "identity",
        stdout=subprocess.PIPE,
        text=True,
    )
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0
    seen = json.loads(out)

    assert seen[str(home / "identity" / "worker.key")] == "FileNotFoundError"
    assert seen[str(tmp_path / "agent.sock")] == "FileNotFoundError"
    # of the host's /run (its services' sockets), at most the way to the resolver's file
    resolver = Path(os.path.realpath("/etc/resolv.conf"))
    way = [resolver.relative_to("/run").parts[0]] if resolver.is_relative_to("/run") else []
    assert seen["run"] == way and (not Path("/run").is_dir() or os.listdir("/run") != way)
    # this process is not in the namespace's /proc, nor can it be signalled from there
    assert seen[str(around)] == seen[str(cmdline)] == "FileNotFoundError"
    assert seen["signal"] == "ProcessLookupError"
    assert seen["processes"] == [1, seen["pid"]]  # its init and itself
    # its init's group and session, not the helper's: kill(0, ...) reaches nothing outside
    assert seen["group"] == seen["session"] == 1
    # its init's command line, which it can read, holds no plan (no hidden path)
    assert "tessera_worker.confine" in seen["init"] and '"hide"' not in seen["init"]
    # of /dev, only what every program uses, shared memory and GPUs: no disk, no console
    common = {"null", "zero", "full", "random", "urandom", "tty", "shm"}
    gpus = {n for n in os.listdir("/dev") if n.startswith("nvidia") or n in ("dri", "kfd")}
    links = {"fd", "stdin", "stdout", "stderr"}
    assert set(seen["devices"]) - (common | gpus | links | {"infiniband"}) == set()
    assert {"null", "urandom", "shm", "fd"} <= set(seen["devices"]) and seen["devices work"]
    assert set(os.listdir("/dev")) - set(seen["devices"])  # the host's has more (ptmx, say)
    assert seen["chmod"] == "OSError"  # a device's inode is the host's: read-only here
    assert seen[str(home / "tokens" / "bob.token")] == "FileNotFoundError"
    assert seen[str(home / "logs" / "t2" / "other")] == "FileNotFoundError"
    assert seen[str(token)] == ""
    assert seen[str(home / "logs" / "t1" / "mine")] == "the task's own"
    assert seen["cwd"] == "/"  # its folder was hidden: nothing is reached through it
    assert seen["umount"] == -1  # no capability left to uncover the rest
    assert seen["create"] == "OSError"  # the hidden folder is read-only (EROFS)
    assert not (home / "new").exists()
    # nothing of it is seen outside
    assert (home / "identity" / "worker.key").read_text() == "the worker's key"
    assert token.read_text() == "the party token"
    assert str(home) not in Path("/proc/self/mountinfo").read_text()


def test_a_kept_folder_stays_writable_and_what_is_written_lands_outside(tmp_path: Path) -> None:
    home = tmp_path / "home"
    kept = home / "checkpoints" / "job"
    kept.mkdir(parents=True)
    (home / "worker.key").write_text("the worker's key")
    # keeping the hidden folder itself keeps nothing: the folder stays hidden
    plan = Confinement(hide=(str(home),), keep=(str(kept), str(home)))
    write = (
        f"import os; open({str(kept / 'step')!r}, 'w').write('saved'); "
        f"assert not os.path.exists({str(home / 'worker.key')!r})"
    )
    subprocess.run(plan.command([sys.executable, "-c", write]), check=True, timeout=60)
    assert (kept / "step").read_text() == "saved"


def test_links_are_hidden_where_they_lead_but_not_those_ranks_could_leave(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    keys, elsewhere = tmp_path / "keys", tmp_path / "elsewhere"
    keys.mkdir()
    elsewhere.mkdir()
    (home / "identity" / "alice").mkdir(parents=True)
    (home / "identity" / "alice" / "tls").symlink_to(keys)
    for folder in ("tasks/other-task", "logs/other-task", "checkpoints/job-x", "data"):
        (home / folder).mkdir(parents=True)
        (home / folder / "link").symlink_to(elsewhere)
    launch = _launch("t1", [0], ["alice"])
    spec = rank_specs(launch, _rendezvous(), _settings(home), "m:run", credentials(launch, home))
    plan = confinement(spec[0], _settings(home))
    assert str(keys) in plan.hide
    assert str(elsewhere) not in plan.hide


def test_an_unusable_plan_ends_the_process_before_its_command_runs(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    argv = [sys.executable, "-c", f"open({str(marker)!r}, 'w')"]
    done = subprocess.run(
        [sys.executable, "-m", "tessera_worker.confine", "{not json", *argv],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == confine.EXIT_CODE
    assert "not a confinement plan" in done.stderr
    assert not marker.exists()


@pytest.mark.parametrize(
    ("ends", "code"),
    [
        ("sys.exit(7)", 7),
        ("os.kill(os.getpid(), signal.SIGKILL)", -signal.SIGKILL),
        ("time.sleep(60)", -signal.SIGTERM),  # the helper's SIGTERM, passed on
        # a signal Python ignores in the helper is mirrored all the same
        ("signal.signal(signal.SIGPIPE, signal.SIG_DFL); os.kill(os.getpid(), 13)", -13),
        ("sys.exit(200)", 200),
    ],
)
def test_the_helper_ends_as_its_command_did(tmp_path: Path, ends: str, code: int) -> None:
    plan = Confinement(hide=(str(tmp_path),))
    script = f"import os, signal, sys, time; print('started', flush=True); {ends}"
    proc = subprocess.Popen(
        plan.command([sys.executable, "-c", script]), stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stdout.readline() == "started\n"
    if "sleep" in ends:
        proc.send_signal(signal.SIGTERM)  # to the helper alone, not its process group

    assert proc.wait(timeout=30) == code


COUNT_TERMS = """
import signal, sys, time
got = []
signal.signal(signal.SIGTERM, lambda *_: got.append(1))
print("started", flush=True)
deadline = time.monotonic() + float(sys.argv[1])
while time.monotonic() < deadline and not got:
    time.sleep(0.01)
time.sleep(0.5)  # for copies still on their way
print(len(got), flush=True)
"""


def test_a_signal_to_the_helpers_group_reaches_the_command_once(tmp_path: Path) -> None:
    plan = Confinement(hide=(str(tmp_path),))
    proc = subprocess.Popen(
        plan.command([sys.executable, "-c", COUNT_TERMS, "30"]),
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,  # as the launcher starts it, which signals its group
    )
    assert proc.stdout is not None and proc.stdout.readline() == "started\n"
    os.killpg(proc.pid, signal.SIGTERM)

    out, _ = proc.communicate(timeout=30)
    assert (proc.returncode, out) == (0, "1\n")


def test_a_signal_sent_while_the_command_starts_is_not_lost(tmp_path: Path) -> None:
    """Before the namespace's init passes signals on, they wait: an init drops those it has no
    handler for, which would leave the command running until the launcher's SIGKILL. The
    moments swept cover the helper's start and the init's set-up in steps shorter than it."""
    plan = Confinement(hide=(str(tmp_path),))
    for step in range(40):
        delay = 0.02 + 0.005 * step
        proc = subprocess.Popen(
            plan.command([sys.executable, "-c", "import time; time.sleep(60)"]),
            start_new_session=True,
        )
        time.sleep(delay)
        os.killpg(proc.pid, signal.SIGTERM)
        assert proc.wait(timeout=20) == -signal.SIGTERM, delay


def test_a_helper_killed_alone_at_any_moment_leaves_nothing_behind(tmp_path: Path) -> None:
    plan = Confinement(hide=(str(tmp_path),))
    word = f"orphan-{uuid.uuid4().hex}"
    command = [sys.executable, "-c", "import time; time.sleep(60)", word]
    for delay in (0.0, 0.02, 0.05, 0.08, 0.11, 0.14, 0.5):
        proc = subprocess.Popen(plan.command(command))
        time.sleep(delay)
        proc.kill()
        proc.wait(timeout=10)
    deadline = time.monotonic() + 10
    while _running_with(word) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _running_with(word) == []


@pytest.mark.skipif(shutil.which("unshare") is None, reason="needs util-linux's unshare")
def test_mounts_out_of_sight_under_later_ones_do_not_stop_the_confinement(tmp_path: Path) -> None:
    """A mount under /proc (binfmt_misc, on many hosts) is under the namespace's own /proc, and
    one on a folder of the home is under its cover: neither can be sealed, nor need be. Made
    in a namespace of this test's own, so that the host's mounts stay as they are."""
    home = tmp_path / "home"
    (home / "logs" / "t1").mkdir(parents=True)
    plan = Confinement(hide=(str(home),), keep=(str(home / "logs" / "t1"),))
    confined = shlex.join(plan.command([sys.executable, "-c", "print('ran')"]))
    script = (
        f"mount -t tmpfs none /proc/sys/fs/binfmt_misc && mount -t tmpfs none {home}/logs && "
        f"mkdir {home}/logs/t1 && {confined}"
    )
    done = subprocess.run(
        ["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (done.returncode, done.stdout) == (0, "ran\n"), done.stderr


SHM = """
import os, sys
open(os.path.join("/dev/shm", sys.argv[1]), "w").write(sys.argv[1])
print(sorted(os.listdir("/dev/shm")))
"""


def test_processes_given_one_shared_memory_folder_share_it_and_only_it(tmp_path: Path) -> None:
    host = Path("/dev/shm") / f"tessera-host-{uuid.uuid4().hex}"  # another program's segment
    task, other, missing = (Path("/dev/shm") / f"tessera-{uuid.uuid4().hex}" for _ in range(3))
    host.write_text("not the rank's")
    task.mkdir(0o700)
    other.mkdir(0o700)

    def run(shm: Path | None, name: str) -> str:
        plan = Confinement(hide=(str(tmp_path),), shm=None if shm is None else str(shm))
        done = subprocess.run(
            plan.command([sys.executable, "-c", SHM, name]), capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    try:
        assert run(task, "a") == "['a']"
        assert run(task, "b") == "['a', 'b']"  # the same task's
        assert run(other, "c") == "['c']"  # another task's
        assert run(None, "d") == "['d']"  # an empty one of its own
        assert (task / "a").read_text() == "a" and task.stat().st_mode & 0o777 == 0o700
        os.chmod(other, 0o755)  # a folder others may enter is not taken
        plan = Confinement(hide=(str(tmp_path),), shm=str(other))
        done = subprocess.run(plan.command(["/bin/true"]), capture_output=True, text=True)
        assert done.returncode == confine.EXIT_CODE
        assert "not this user's alone" in done.stderr
        # made by the launcher, never by the confinement: a namespace still starting after its
        # task was swept leaves nothing behind
        plan = Confinement(hide=(str(tmp_path),), shm=str(missing))
        done = subprocess.run(plan.command(["/bin/true"]), capture_output=True, text=True)
        assert done.returncode == confine.EXIT_CODE and not missing.exists()
    finally:
        host.unlink()
        shutil.rmtree(task, ignore_errors=True)
        shutil.rmtree(other, ignore_errors=True)


def test_this_host_can_confine_ranks() -> None:
    assert confine.probe() == confine.Probe(problem=None, own_proc=True)


def test_a_rank_reads_its_own_credentials_and_data_and_none_of_its_workers_secrets(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    # folders of the home that are links elsewhere: hidden where they lead, shown where kept
    (tmp_path / "identity").mkdir()
    (tmp_path / "disk" / "checkpoints").mkdir(parents=True)
    home.mkdir()
    (home / "identity").symlink_to(tmp_path / "identity", target_is_directory=True)
    (tmp_path / "carol-identity").mkdir()
    (tmp_path / "identity" / "carol").symlink_to(tmp_path / "carol-identity")
    (tmp_path / "dave-keys").mkdir()
    (tmp_path / "carol-identity" / "dave").symlink_to(tmp_path / "dave-keys")
    (home / "checkpoints").symlink_to(tmp_path / "disk" / "checkpoints", target_is_directory=True)
    # a link to the Python the ranks run: where it leads stays in their sight
    (home / "python").symlink_to(Path(sys.executable).resolve().parent)
    earlier = home / "checkpoints" / "job-earlier" / "step-000000010" / "rank-0.pt"
    earlier.parent.mkdir(parents=True)
    earlier.write_text("weights of an earlier job")
    secrets = {
        "worker key": home / "identity" / "alice" / "worker.key",
        "worker key, where the link leads": tmp_path / "identity" / "bob" / "worker.key",
        "worker key, a link further down": tmp_path / "carol-identity" / "worker.key",
        "worker key, behind two links": tmp_path / "dave-keys" / "worker.key",
        "other task's key": home / "tasks" / "other-task" / "tls" / "key.pem",
        "other task's log": home / "logs" / "other-task" / "rank-0.log",
        "broker queue": home / "broker" / "queue" / "message",
        "database": home / "tessera.db",
    }
    for name, path in secrets.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(name)
    token = tmp_path / "alice.token"
    token.write_text("the party token")
    (home / "data").mkdir()
    (home / "data" / "rows.csv").write_text("a,label\n1,0\n")
    task = uuid.uuid4().hex
    own_key = home / "tasks" / task / "tls" / "key.pem"
    written = home / "checkpoints" / f"job-{task}" / "note"
    paths = [*secrets.values(), token, own_key, home / "data" / "rows.csv", earlier]
    denied = [earlier, home / "data" / "rows.csv", home / "new-file"]
    launch = _launch(
        task,
        [0],
        ["alice"],
        paths=[str(p) for p in paths],
        try_write=[str(p) for p in denied],
        write_to=str(written),
    )
    settings = replace(_settings(home), hidden=(str(token),))
    assert settings.confine  # the default

    outcome = _run(launch, settings, "tests.worker.toy_algorithm:peek")

    assert outcome.status == "succeeded", outcome.reason
    log = (home / "logs" / task / "rank-0.log").read_text()
    seen = json.loads(next(line for line in log.splitlines() if line.startswith("peek "))[5:])
    assert {name: seen[str(path)] for name, path in secrets.items()} == dict.fromkeys(
        secrets, "missing"
    )
    # a scratch folder is the rank's own: a file hidden there is not even in it
    assert seen[str(token)] == ("missing" if _in_scratch(token) else "")
    assert seen[str(own_key)].startswith("-----BEGIN")
    assert seen[str(home / "data" / "rows.csv")] == "a,label\n1,0\n"
    assert seen[str(earlier)] == "weights of an earlier job"
    assert {seen[f"write {p}"] for p in denied} == {"refused: Read-only file system"}
    assert earlier.read_text() == "weights of an earlier job"
    assert written.read_text() == "written by the rank"
    # temporary files on disk, in the task's folder; its shared memory gone with it
    assert seen["tmpdir"] == str(home / "tasks" / task / "tmp")
    assert not Path(shared_memory(task)).exists()


def test_a_rank_cannot_make_its_worker_read_a_file_for_it(tmp_path: Path) -> None:
    """The worker reads the files a rank leaves in its task's folder (its error, its log, when
    it failed) and sends what they say to every party of the job: it follows no link the rank
    planted there to a file only the worker sees, and does not block on a FIFO."""
    home = tmp_path / "home"
    key = home / "identity" / "alice" / "worker.key"
    key.parent.mkdir(parents=True)
    key.write_text("BEGIN PRIVATE KEY of the worker")
    token = tmp_path / "alice.token"
    token.write_text("the party token")
    task = uuid.uuid4().hex
    folder = home / "logs" / task
    launch = _launch(
        task,
        [0],
        ["alice"],
        links={str(folder / "rank-0.error"): str(key), str(folder / "rank-0.log"): str(token)},
        fifos=[str(folder / "rank-0.failed")],
    )
    settings = replace(_settings(home), hidden=(str(token),))

    outcome = _run(launch, settings, "tests.worker.toy_algorithm:plant")

    assert (outcome.status, outcome.exit_code) == ("failed", 1)
    said = f"{outcome.reason} {outcome.last_lines}"
    assert "PRIVATE KEY" not in said and "party token" not in said
    assert outcome.reason == "exited with code 1"


def _in_scratch(path: Path) -> bool:
    return any(path.is_relative_to(folder) for folder in confine.SCRATCH)


def _running_with(word: str) -> list[int]:
    """The processes of this host whose command line holds ``word``."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and word.encode() in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def test_a_rank_reaches_no_process_outside_and_leaves_none_behind(tmp_path: Path) -> None:
    """A rank cannot signal its worker (here, this process) nor read its command line, where
    a token given with ``--token`` would be; what it starts in a session of its own, out of
    the reach of the launcher's signals to its process group, ends with it."""
    home = tmp_path / "home"
    task = uuid.uuid4().hex
    word = f"left-behind-{task}"
    worker = os.getpid()
    launch = _launch(
        task,
        [0],
        ["alice"],
        paths=[f"/proc/{worker}/cmdline", f"/proc/{worker}/status"],
        signal=[worker],
        daemon=word,
        write_to=str(home / "checkpoints" / f"job-{task}" / "note"),
    )

    outcome = _run(launch, _settings(home), "tests.worker.toy_algorithm:peek")

    assert outcome.status == "succeeded", outcome.reason
    log = (home / "logs" / task / "rank-0.log").read_text()
    seen = json.loads(next(line for line in log.splitlines() if line.startswith("peek "))[5:])
    assert seen[f"/proc/{worker}/cmdline"] == seen[f"/proc/{worker}/status"] == "missing"
    assert seen[f"signal {worker}"] == "ProcessLookupError"
    assert _running_with(word) == []


def test_an_unconfined_task_ends_once_what_its_rank_started_with_its_files_is_gone(
    tmp_path: Path,
) -> None:
    """Out of the launcher's reach (a session of its own, no namespace around it), a process
    that kept the rank's open files holds its lifeline: the task ends only once it is gone."""
    home = tmp_path / "home"
    task = uuid.uuid4().hex
    word = f"lingering-{task}"
    launch = _launch(
        task,
        [0],
        ["alice"],
        paths=[],
        daemon=word,
        daemon_s=2,
        daemon_keeps_fds=True,
        write_to=str(home / "note"),
    )
    settings = replace(_settings(home), confine=False)

    outcome = _run(launch, settings, "tests.worker.toy_algorithm:peek")

    assert outcome.status == "succeeded", outcome.reason
    assert _running_with(word) == []


@pytest.mark.parametrize("field", ["job_id", "task_id"])
@pytest.mark.parametrize("value", ["../identity", "a/b", ".", ""])
def test_a_task_whose_ids_are_paths_is_refused(field: str, value: str) -> None:
    """The ids name the task's and the job's folders on this host, which a rank is shown."""
    launch = _launch("t1", [0], ["alice"]).model_dump()
    with pytest.raises(ValidationError, match=field):
        TaskLaunch.model_validate(launch | {field: value})


def test_a_confined_process_writes_only_its_kept_folders_and_scratch_space(
    tmp_path: Path,
) -> None:
    """Anything else it wrote (a module on an import path, a start-up file) a process outside
    could later run: the user's home folder, say, is read-only to it, and its /tmp is its own."""
    kept = tmp_path / "home" / "logs" / "t1"
    kept.mkdir(parents=True)
    outside = Path.home()
    if any(outside.is_relative_to(w) for w in confine.WRITABLE):
        pytest.skip(f"the home folder {outside} is scratch space here")
    probe = outside / f"confine-probe-{uuid.uuid4().hex}"
    scratch = Path("/tmp") / probe.name
    targets = [probe, kept / "note", Path("/dev/shm") / probe.name, scratch]
    write = (
        "import json, sys\n"
        "seen = {}\n"
        "for path in sys.argv[1:]:\n"
        "    try:\n"
        "        open(path, 'w').write('x')\n"
        "        seen[path] = 'written'\n"
        "    except OSError as exc:\n"
        "        seen[path] = exc.strerror\n"
        "print(json.dumps(seen))\n"
    )
    plan = Confinement(hide=(str(tmp_path / "home"),), keep=(str(kept),))
    try:
        done = subprocess.run(
            plan.command([sys.executable, "-c", write, *map(str, targets)]),
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        seen = json.loads(done.stdout)
    finally:
        probe.unlink(missing_ok=True)
        (Path("/dev/shm") / probe.name).unlink(missing_ok=True)
    assert seen == {
        str(probe): "Read-only file system",
        str(kept / "note"): "written",
        str(Path("/dev/shm") / probe.name): "written",
        str(scratch): "written",
    }
    assert not scratch.exists()  # its /tmp was its own
    assert (kept / "note").read_text() == "x"


def test_no_module_of_the_launching_folder_runs_before_the_process_is_confined(
    tmp_path: Path,
) -> None:
    """The worker's folder is one its ranks could write: the helper imports nothing from it."""
    marker = tmp_path / "ran"
    (tmp_path / "json.py").write_text(f"open({str(marker)!r}, 'w')\nfrom _json import *\n")
    plan = Confinement(hide=(str(tmp_path / "nothing"),))
    subprocess.run(
        plan.command([sys.executable, "-I", "-c", "pass"]), cwd=tmp_path, check=True, timeout=60
    )
    assert not marker.exists()


def _rendezvous() -> Rendezvous:
    return Rendezvous(host="127.0.0.1", port=free_port(), secret=SECRET)


def _run(launch: TaskLaunch, settings: LaunchSettings, entry_point: str) -> Outcome:
    """``launch``'s ranks run by a worker of ``settings`` to their end."""
    return launch_ranks(
        launch,
        _rendezvous(),
        settings,
        threading.Event(),
        entry_point=entry_point,
        credentials=credentials(launch, settings.home / "tasks"),
    )
