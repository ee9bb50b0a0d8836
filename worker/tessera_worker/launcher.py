"""Spawn a task's ranks, watch them, and tear every one of them down on any way out.

``launch_ranks`` returns when all hosted ranks exited 0 (``succeeded``), when one failed
(``failed``: the others are killed at once; the outcome names the rank that failed first, its
party and its last output lines), or when the stop signal is set (``cancelled``: SIGTERM, a short
grace, then SIGKILL).
Whatever happens, including an exception in the launcher itself, no rank process survives it: it
returns once none of the ranks' processes is left, confinement's included (``end``).
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tessera_worker import hardware, procs, rank_files
from tessera_worker.confine import Confinement, code_folders, inside
from tessera_worker.identity import TaskCredentials
from tessera_worker.launch import RankLaunch, Rendezvous, TaskLaunch
from tessera_worker.peer_loss import lost_a_peer
from tessera_worker.rank import failure_marker, failure_text
from tessera_worker.redaction import HostPaths

MAX_REASON = 2000
SECRET_NAME = re.compile(r"TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|KEY|AUTH", re.IGNORECASE)
RANK_SAFE_TESSERA = frozenset({"TESSERA_RANK_THREADS"})


@dataclass
class LaunchSettings:
    """How this worker runs ranks; ``home`` holds logs and checkpoints."""

    home: Path
    api_url: str | None = None
    api_ca_file: str | None = None
    python: str = sys.executable
    rendezvous_timeout_s: float = 120.0
    collective_timeout_s: float = 300.0
    stop_grace_s: float = 3.0
    poll_interval_s: float = 0.1
    failure_settle_s: float = 1.0
    rank_threads: int = 1
    extra_env: dict[str, str] = field(default_factory=dict)
    address: str = "127.0.0.1"
    """Where this worker's ranks accept links from other parties' ranks."""
    allow_custom: tuple[str, ...] = ()
    rank_env: tuple[str, ...] = ()
    """Names of further variables of the worker's environment its ranks get (``--rank-env``)."""
    """Prefixes of the code (``module`` or ``module:callable``) a job may make ranks import."""
    confine: bool = True
    """Whether each rank sees of ``home`` only its own task's folders and none of
    ``hidden`` (``confine.py``); off where the host cannot (``tessera worker
    --confine-ranks``)."""
    hidden: tuple[str, ...] = ()
    """Files and folders outside ``home`` no rank may read (the party token's file, what the
    operator names with ``--hide-from-ranks``)."""
    share_checkpoints: bool = False
    """Whether ranks upload their checkpoint files to the control plane, for this party to
    download from the dashboard (off: they stay on this host)."""

    def log_dir(self, task_id: str) -> Path:
        return self.home / "logs" / task_id

    def spool_path(self, task_id: str, rank: int) -> Path:
        """Where a rank leaves its undelivered reports (``reporter.deliver_spool``)."""
        return self.log_dir(task_id) / f"rank-{rank}.spool.json"

    def task_dir(self, task_id: str) -> Path:
        """Where a task's credentials live while it runs."""
        return self.home / "tasks" / task_id

    def checkpoint_dir(self, job_id: str) -> Path:
        return self.home / "checkpoints" / job_id


@dataclass
class Outcome:
    """How a task ended; a failure's ``reason`` is what the rank said, without party or rank."""

    status: str
    reason: str | None = None
    rank: int | None = None
    party: str | None = None
    exit_code: int | None = None
    last_lines: list[str] = field(default_factory=list)
    peer_went_away: bool = False
    """Whether the rank's own log (all of it, causes included) says a peer went away."""

    @property
    def lost_a_peer(self) -> bool:
        """The rank failed because another rank went away: probably not the cause."""
        return self.status == "failed" and (
            self.peer_went_away or lost_a_peer("\n".join(self.last_lines))
        )


@dataclass
class RunningRank:
    rank: int
    proc: subprocess.Popen[bytes]
    log: Path
    spec_path: Path
    gone: int
    """The watching end of the rank's ``procs.lifeline``, held by its confinement's helper and
    init, the rank and what it started without closing it (``end``)."""

    def failed_at(self) -> float:
        """When the rank caught its error (a rank killed by a signal never noted one)."""
        code = procs.exit_code(self.proc)
        if code is not None and code < 0:
            return float("-inf")
        try:
            marker = failure_marker(self.spec_path)
            return float(rank_files.read_text(self.log.parent, marker, limit=64))
        except (OSError, ValueError):
            return float("inf")


def rank_specs(
    launch: TaskLaunch,
    rendezvous: Rendezvous,
    settings: LaunchSettings,
    entry_point: str,
    credentials: TaskCredentials,
    store_fd: int | None = None,
) -> list[RankLaunch]:
    """One ``RankLaunch`` per rank this task hosts; rank 0's serves the store on ``store_fd``
    where the worker reserved its port."""
    checkpoints = settings.checkpoint_dir(launch.job_id)
    return [
        RankLaunch(
            rank=hosted.rank,
            world_size=launch.world_size,
            device=hosted.device,
            backend=launch.backend,
            store_host=rendezvous.host,
            store_port=rendezvous.port,
            store_fd=store_fd if hosted.rank == 0 else None,
            store_secret=rendezvous.secret,
            address=settings.address,
            attempt_id=launch.attempt_id,
            tls_dir=str(credentials.tls.key.parent),
            task_token=credentials.token or None,
            spool_path=str(settings.spool_path(launch.task_id, hosted.rank)),
            algorithm=launch.algorithm,
            entry_point=entry_point,
            config=launch.config,
            plan=launch.plan,
            job_id=launch.job_id,
            attempt=launch.attempt,
            task_id=launch.task_id,
            api_url=settings.api_url,
            api_ca_file=settings.api_ca_file,
            checkpoint_dir=str(checkpoints),
            share_checkpoints=settings.share_checkpoints,
            # this host's own checkpoint of that step: a path another party reported is not
            # opened here, whatever it says
            resume_from=(
                str(checkpoints / f"step-{launch.resume_from.step:09d}")
                if launch.resume_from
                else None
            ),
            data_root=str(settings.home / "data"),
            home=str(settings.home),
            rendezvous_timeout_s=settings.rendezvous_timeout_s,
            collective_timeout_s=settings.collective_timeout_s,
        )
        for hosted in launch.ranks
    ]


RANK_NAMES = frozenset(
    {
        *("PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "PWD", "TZ", "LANG", "LANGUAGE"),
        *("TMPDIR", "TMP", "TEMP", "VIRTUAL_ENV", "CONDA_PREFIX", "LD_LIBRARY_PATH"),
        *("LD_PRELOAD", "SSL_CERT_FILE", "SSL_CERT_DIR", "NO_PROXY", "no_proxy", "HTTP_PROXY"),
        *("HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY", "all_proxy"),
    }
)
"""What a rank process takes of its worker's environment, besides ``RANK_PREFIXES`` and what
its operator adds (``--rank-env``)."""
RANK_PREFIXES = (
    *("PYTHON", "LC_", "XDG_", "OMP_", "GOMP_", "KMP_", "MKL_", "OPENBLAS_", "MALLOC_"),
    *("TORCH_", "PYTORCH_", "TORCHINDUCTOR_", "TRITON_", "CUDA_", "NVIDIA_", "CUBLAS_"),
    *("CUDNN_", "NCCL_", "GLOO_", "HIP_", "ROCR_", "HSA_", "ROCM_", "FI_", "OFI_", "UCX_"),
)


def rank_environment(settings: LaunchSettings) -> dict[str, str]:
    """What a rank gets of the worker's environment: only what a Python process, torch and
    its libraries read (``RANK_NAMES``, ``RANK_PREFIXES``), and what the worker adds
    (``extra_env``). Nothing named like a secret, and no value holding a password (a proxy
    address with one): the rest (the worker's settings, cloud keys, service addresses, the
    operator's ssh agent) stays with the worker."""
    env = {
        name: value
        for name, value in {**os.environ, **settings.extra_env}.items()
        if (
            name in RANK_NAMES
            or name.startswith(RANK_PREFIXES)
            or name in settings.extra_env
            or name in settings.rank_env
            or name in RANK_SAFE_TESSERA
        )
        and not SECRET_NAME.search(name)
        and not _holds_credentials(value)
    }
    env["TESSERA_RANK_THREADS"] = str(settings.rank_threads)
    env["PYTHONUNBUFFERED"] = "1"
    return env


def _holds_credentials(value: str) -> bool:
    """A URL with a user in it (``scheme://user:password@host``, or a proxy's key as its user,
    ``scheme://key@host``), even with a password that holds a ``/`` not escaped."""
    return re.search(r"://[^@\s]+@", value) is not None


NOT_WALKED = frozenset({"logs", "checkpoints", "data", "tasks", "broker"})
"""Folders of the home whose links are not looked for: ranks write in the first four (a link
a rank left there must not hide anything from later ranks), and the broker's queue is
written by the worker and the control plane only, and may be long."""


def _links_out_of(home: Path) -> list[str]:
    """Where the links in ``home`` lead (its key's folder may be one), and the links in the
    folders they lead to, and so on; but not those in the folders of ``NOT_WALKED``."""
    targets = []
    folders = []
    for entry in home.iterdir():
        if entry.is_symlink():
            targets.append(os.path.realpath(entry))
        if entry.name not in NOT_WALKED and entry.is_dir():
            folders.append(os.path.realpath(entry))
    walked: set[str] = set()
    while folders:
        top = folders.pop()
        if top in walked:
            continue
        walked.add(top)
        for folder, names, files in os.walk(top):
            for name in [*names, *files]:
                path = os.path.join(folder, name)
                if os.path.islink(path):
                    targets.append(os.path.realpath(path))
                    if os.path.isdir(path):
                        folders.append(os.path.realpath(path))
    return targets


def _overlaps(path: str, folders: set[str]) -> bool:
    """Whether ``path`` is one of ``folders``, lies in one, or holds one."""
    return any(path == f or inside(path, f) or inside(f, path) for f in folders)


def shared_memory(task_id: str) -> str:
    """The folder of the host's ``/dev/shm`` a task's confined ranks share as theirs."""
    return f"/dev/shm/tessera-{task_id}"


def confinement(spec: RankLaunch, settings: LaunchSettings) -> Confinement:
    """What a rank of ``spec``'s task may see of the worker's files: of ``home``, its task's
    logs and credentials and its job's checkpoints, and read-only the party's data, the
    checkpoints of its other jobs (a job may start from one) and the Python it runs; none of
    ``hidden``, nor where an entry of ``home`` that is a link leads (unless the Python it runs
    is there: a virtual environment's link to its interpreter, say). Its ``/dev/shm`` is its
    task's own."""
    home = settings.home
    python = {sys.prefix, sys.exec_prefix, str(Path(settings.python).parent), *sys.path}
    # the entry point's top package; the helper keeps this worker's own (``confine._python``)
    python = (python | code_folders(spec.entry_point.split(":")[0].split(".")[0])) - {""}
    needed = {os.path.realpath(p) for p in python} | {os.path.realpath(settings.python)}
    linked = [t for t in _links_out_of(home) if not _overlaps(t, needed)]
    return Confinement(
        hide=(str(home), *linked, *settings.hidden),
        keep=(
            str(settings.log_dir(spec.task_id)),
            str(settings.task_dir(spec.task_id)),
            str(settings.checkpoint_dir(spec.job_id)),
        ),
        readonly=(
            str(home / "data"),
            str(home / "checkpoints"),
            *([settings.api_ca_file] if settings.api_ca_file else []),
            *sorted(python),
        ),
        shm=shared_memory(spec.task_id),
    )


SOCKET_INTERFACES = ("GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME")


def socket_interfaces(interface: str) -> dict[str, str]:
    """The variables that make gloo and NCCL listen on ``interface``, but those this worker's
    operator set: their choice stands."""
    return {name: interface for name in SOCKET_INTERFACES if name not in os.environ}


def start_ranks(
    specs: list[RankLaunch], settings: LaunchSettings, *, whole_party: bool = False
) -> list[RunningRank]:
    """Start the ranks of ``specs``; ``whole_party``: they are all of their party's ranks."""
    env = rank_environment(settings)
    if whole_party and (loopback := hardware.interface_of("127.0.0.1")) is not None:
        # the party's own process group connects without authentication (gloo, NCCL): where
        # all of its ranks are here, it listens where no other host reaches, unless this
        # worker's operator chose an interface
        env.update(socket_interfaces(loopback))
    folder = settings.log_dir(specs[0].task_id) if specs else settings.home
    folder.mkdir(parents=True, exist_ok=True)
    if specs:  # the folders a confined rank is shown must be there when it starts
        settings.checkpoint_dir(specs[0].job_id).mkdir(parents=True, exist_ok=True)
        (settings.home / "data").mkdir(exist_ok=True)
        # temporary files on disk, shared by the task's ranks and gone with its folder (a
        # confined rank's /tmp is its own, in memory)
        scratch = settings.task_dir(specs[0].task_id) / "tmp"
        scratch.mkdir(mode=0o700, parents=True, exist_ok=True)
        env["TMPDIR"] = str(scratch)
    # one plan for the task: its ranks share their task's and job's folders
    plan = confinement(specs[0], settings) if settings.confine and specs else None
    if plan is not None and plan.shm is not None:
        with contextlib.suppress(FileExistsError):  # confinement checks whose it is
            os.mkdir(plan.shm, 0o700)
    started: list[RunningRank] = []
    try:
        for spec in specs:
            spec_path = folder / f"rank-{spec.rank}.json"
            rank_files.write_text(folder, spec_path, spec.model_dump_json())
            log = folder / f"rank-{spec.rank}.log"
            argv = [settings.python, "-m", "tessera_worker.rank", str(spec_path)]
            if plan is not None:
                argv = plan.command(argv, settings.python)
            gone, held = procs.lifeline()
            fds = (held,) if spec.store_fd is None else (held, spec.store_fd)
            try:
                # in the task's folder: a module a rank could leave in the worker's folder is
                # on no later rank's import path
                proc = procs.spawn(argv, env=env, log_path=log, pass_fds=fds, cwd=folder)
            except BaseException:
                os.close(gone)
                raise
            finally:
                os.close(held)
            started.append(RunningRank(spec.rank, proc, log, spec_path, gone))
    except BaseException:
        end(started, settings)
        raise
    return started


def end(running: list[RunningRank], settings: LaunchSettings) -> bool:
    """Kill every rank and wait until no process holds their lifelines: a confined rank's
    processes all end with its namespace; an unconfined one's, those that kept the lifeline
    (a child started with ``close_fds`` does not). False if one was still held after the stop
    grace and a few seconds more."""
    procs.kill_all([r.proc for r in running])
    return procs.wait_closed([r.gone for r in running], settings.stop_grace_s + 5.0)


def describe_exit(code: int | None) -> str:
    if code is None:
        return "had not ended 5 s after it was killed"
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with code {code}"


def failure(launch: TaskLaunch, failed: RunningRank, settings: LaunchSettings) -> Outcome:
    code = procs.exit_code(failed.proc)
    # every party of the job reads these: they name no folder of this host
    hidden = HostPaths(settings.home)
    written = failure_text(failed.spec_path)
    # the error the rank wrote for the job's parties, else (a rank killed, or dead before it
    # could write) the last lines of its output
    logged = rank_files.tail(failed.log.parent, failed.log)
    said = rank_files.tail(written.parent, written) if os.path.lexists(written) else logged
    lines = [hidden.hide(line) for line in said]
    head = describe_exit(code)
    detail = "\n".join(lines[-8:])[-(MAX_REASON - len(head) - 2) :]
    reason = f"{head}: {detail}" if detail else head
    party = launch.party_of(failed.rank)
    went_away = lost_a_peer("\n".join(logged))
    return Outcome("failed", reason, failed.rank, party, code, lines, went_away)


def _any_failed(running: list[RunningRank]) -> bool:
    return any(procs.exit_code(r.proc) not in (None, 0) for r in running)


def _cause(running: list[RunningRank], settle_s: float) -> RunningRank:
    """The rank that failed first: peers fail on the broken connection only after it did."""
    deadline = time.monotonic() + settle_s
    while time.monotonic() < deadline and any(procs.exit_code(r.proc) is None for r in running):
        time.sleep(0.05)
    failed = [
        r
        for r in running
        if procs.exit_code(r.proc) not in (None, 0) or r.failed_at() < float("inf")
    ]
    return min(failed, key=lambda r: (r.failed_at(), r.rank))


def watch(
    launch: TaskLaunch,
    running: list[RunningRank],
    stop: threading.Event,
    settings: LaunchSettings,
) -> Outcome:
    """Wait for the ranks to finish, one to fail, or the stop signal (``launch_ranks`` then
    ends whatever is left of them)."""
    all_procs = [r.proc for r in running]
    while True:
        if stop.is_set():
            procs.stop_all(all_procs, grace_s=settings.stop_grace_s)
            return Outcome("cancelled", "stopped by the control plane")
        if _any_failed(running):
            bad = _cause(running, settings.failure_settle_s)
            procs.kill_all(all_procs)  # before their logs are read: nothing more is added
            return failure(launch, bad, settings)
        if all(procs.exit_code(p) == 0 for p in all_procs):
            return Outcome("succeeded")
        time.sleep(settings.poll_interval_s)


def launch_ranks(
    launch: TaskLaunch,
    rendezvous: Rendezvous,
    settings: LaunchSettings,
    stop: threading.Event,
    *,
    entry_point: str,
    credentials: TaskCredentials,
    on_started: Callable[[list[RunningRank]], None] | None = None,
    store_listener: socket.socket | None = None,
) -> Outcome:
    """Run this task's ranks to an outcome (see the module docstring). ``store_listener``, the
    socket the worker reserved the store's port with, goes to rank 0 and is closed here once
    the ranks have started."""
    try:
        fd = store_listener.fileno() if store_listener is not None else None
        specs = rank_specs(launch, rendezvous, settings, entry_point, credentials, fd)
        running = start_ranks(specs, settings, whole_party=launch.hosts_whole_party)
    finally:
        if store_listener is not None:
            store_listener.close()
    try:
        if on_started is not None:
            on_started(running)
        return watch(launch, running, stop, settings)
    finally:
        try:
            if not end(running, settings):
                print(
                    f"tessera worker: task {launch.task_id}: a process its ranks started or "
                    "gave their lifeline to was still there after they were killed",
                    file=sys.stderr,
                    flush=True,
                )
        finally:
            # what the ranks left in their shared memory goes with them
            rank_files.remove_tree(shared_memory(launch.task_id))
