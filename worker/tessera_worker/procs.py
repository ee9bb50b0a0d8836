"""Child processes that never outlive their launcher.

Each child runs in its own session (so its whole process tree can be signalled at once) and, first
thing, asks the kernel to kill it when the thread that spawned it dies (``die_with_parent``), so
even a launcher killed with SIGKILL leaves no orphan behind. The request is made by the child
itself, after exec: code between fork and exec is unsafe in a threaded launcher.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import select
import signal
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

_PR_SET_DUMPABLE = 4
_PR_SET_PDEATHSIG = 1
PARENT_ENV = "TESSERA_PARENT_PID"


def die_with_parent() -> None:
    """Be SIGKILLed when the spawning thread dies; exit now if the parent is already gone."""
    parent = os.environ.pop(PARENT_ENV, None)
    if parent is None:
        return
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != int(parent):
        os._exit(1)


def keep_memory_private() -> bool:
    """Make this process undumpable: its memory and its ``/proc/<pid>/environ`` (which keeps
    the environment it started with, token included) become unreadable to other processes of
    the same user, such as the ranks it starts; children it executes are dumpable again.
    False where the kernel call is not available."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def spawn(
    argv: Sequence[str],
    *,
    env: dict[str, str],
    log_path: Path,
    cwd: Path | None = None,
    stdin_text: str | None = None,
    pass_fds: Sequence[int] = (),
) -> subprocess.Popen[bytes]:
    """Start ``argv`` in a new session with stdout and stderr appended to ``log_path``;
    ``stdin_text`` (a secret, say) is written to its standard input, which is then closed;
    ``pass_fds`` stay open in the child under the same numbers.

    The child must call ``die_with_parent()`` first thing (ranks and workers do).
    """
    log_path.parent.mkdir(parents=True, exist_ok=True)
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
    with os.fdopen(os.open(log_path, flags, 0o600), "ab") as log:
        proc = subprocess.Popen(
            list(argv),
            env={**env, PARENT_ENV: str(os.getpid())},
            cwd=cwd,
            stdin=subprocess.DEVNULL if stdin_text is None else subprocess.PIPE,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            pass_fds=tuple(pass_fds),
        )
    if stdin_text is not None and proc.stdin is not None:
        with proc.stdin:
            proc.stdin.write(stdin_text.encode())
    return proc


def exit_code(proc: subprocess.Popen[bytes]) -> int | None:
    """How ``proc`` ended (``Popen.returncode``'s form), or None while it runs, without reaping
    it: until it is reaped its id stays its own, so a signal to its group reaches no process
    that was given the id later. ``kill_all`` reaps."""
    if proc.returncode is not None:
        return proc.returncode
    try:
        ended = os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:  # reaped behind Popen's back
        return proc.poll()
    if ended is None:
        return None
    killed = ended.si_code in (os.CLD_KILLED, os.CLD_DUMPED)
    return -ended.si_status if killed else ended.si_status


def signal_group(proc: subprocess.Popen[bytes], sig: int) -> None:
    """Send ``sig`` to the process group led by ``proc``; nothing once ``proc`` was reaped,
    as its id may since have gone to another process (which a group signal would reach)."""
    if proc.returncode is not None:
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)


def stop_all(procs: Sequence[subprocess.Popen[bytes]], *, grace_s: float) -> None:
    """SIGTERM every group, wait up to ``grace_s``, then SIGKILL what is left and reap."""
    for p in procs:
        if exit_code(p) is None:
            signal_group(p, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and any(exit_code(p) is None for p in procs):
        time.sleep(0.05)
    kill_all(procs)


def lifeline() -> tuple[int, int]:
    """A pipe ``(watching, held)``: pass ``held`` to a child (``pass_fds``) and close it here;
    whatever the child starts inherits it unless it closes it, so ``watching`` reads the end of
    file once all of them are gone (``wait_closed``)."""
    return os.pipe()


def wait_closed(watching: Sequence[int], timeout_s: float) -> bool:
    """Wait until no process holds the other end of any pipe of ``watching`` (what they write
    is dropped), then close them; False if ``timeout_s`` ran out first."""
    poller = select.poll()
    for fd in watching:
        os.set_blocking(fd, False)  # a holder may also read its pipe: never wait in read
        poller.register(fd, select.POLLIN)
    left, deadline = set(watching), time.monotonic() + timeout_s
    try:
        while left and (wait := deadline - time.monotonic()) > 0:
            for fd, _ in poller.poll(wait * 1000):
                with contextlib.suppress(BlockingIOError):
                    if not os.read(fd, 65536):
                        poller.unregister(fd)
                        left.discard(fd)
    finally:
        for fd in watching:
            with contextlib.suppress(OSError):
                os.close(fd)
    return not left


def kill_all(procs: Sequence[subprocess.Popen[bytes]]) -> None:
    """SIGKILL every group, leader exited or not (its group may live on), and reap the
    leaders; a leader's group is signalled only before it is reaped (``exit_code``)."""
    for p in procs:
        signal_group(p, signal.SIGKILL)
    for p in procs:
        with contextlib.suppress(subprocess.TimeoutExpired):
            p.wait(timeout=5)
