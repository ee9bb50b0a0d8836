"""Ranks see of their worker's files only their own task's.

A rank runs code its party allowed and reads what other parties send; it runs as the worker's
user, so without more it could open every file that user can: the worker's key and
certificate, the party token's file, other tasks' credentials and logs, the embedded broker's
queue and, under ``tessera up``, the control plane's database and authority.

``python -m tessera_worker.confine PLAN ARGV...`` gives the process a mount namespace of its
own, inside a user namespace so that no privilege is needed, in which each hidden folder is an
empty read-only folder with only the plan's ``keep`` paths put back, and each hidden file reads
as empty; then it executes ``ARGV`` in place (same process, same id). Its user id inside the
namespace is not 0, so that exec leaves it no capability: it cannot unmount what hides the rest.
The namespace's mounts are private: nothing done in it is seen outside.
"""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

_CLONE_NEWNS = 0x00020000
_CLONE_NEWUSER = 0x10000000
_MS_RDONLY = 1
_MS_NOSUID = 2
_MS_NODEV = 4
_MS_REMOUNT = 32
_MS_BIND = 4096
_MS_REC = 16384
_MS_PRIVATE = 1 << 18
_NOBODY = 65534
EXIT_CODE = 3
"""How a process that could not be confined ends (before it ran any of ``ARGV``)."""


class ConfineError(OSError):
    """A step of the confinement failed; the message names the step and the path."""


@dataclass(frozen=True)
class Confinement:
    """What a process may not see: ``hide`` (folders shown empty, files shown empty), except
    the ``keep`` paths inside a hidden folder, which are put back as they are."""

    hide: tuple[str, ...]
    keep: tuple[str, ...] = ()

    def to_json(self) -> str:
        return json.dumps({"hide": list(self.hide), "keep": list(self.keep)})

    @classmethod
    def from_json(cls, text: str) -> Confinement:
        data = json.loads(text)
        return cls(hide=tuple(data["hide"]), keep=tuple(data.get("keep", ())))

    def command(self, argv: Sequence[str], python: str = sys.executable) -> list[str]:
        """``argv`` run under this confinement."""
        return [python, "-m", "tessera_worker.confine", self.to_json(), *argv]


def _inside(path: str, folder: str) -> bool:
    """Whether ``path`` lies in ``folder`` (not ``folder`` itself: keeping a hidden folder
    whole would hide nothing)."""
    return path != folder and path.startswith(folder.rstrip("/") + "/")


def _call(result: int, what: str, path: str | None = None) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        where = f" {path}" if path else ""
        raise ConfineError(errno, f"{what}{where}: {os.strerror(errno)}")


def _write(path: str, text: str) -> None:
    try:
        with open(path, "w") as f:
            f.write(text)
    except OSError as exc:
        raise ConfineError(exc.errno or 0, f"write {path}: {exc.strerror}") from exc


def enter(plan: Confinement) -> None:
    """Confine this process as ``plan`` says; what it executes next stays confined."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mount.argtypes = [ctypes.c_char_p] * 3 + [ctypes.c_ulong, ctypes.c_char_p]
    uid, gid = os.geteuid(), os.getegid()
    hidden = sorted({os.path.realpath(p) for p in plan.hide if os.path.lexists(p)}, key=len)
    kept = sorted(
        {
            real
            for real in (os.path.realpath(p) for p in plan.keep if os.path.exists(p))
            if any(_inside(real, folder) for folder in hidden)
        },
        key=len,
    )
    kept = [p for i, p in enumerate(kept) if not any(_inside(p, q) for q in kept[:i])]
    # what lies in a hidden folder is hidden with it, unless a kept path brings it back
    hidden = [
        p
        for i, p in enumerate(hidden)
        if not any(_inside(p, q) for q in hidden[:i]) or any(_inside(p, k) for k in kept)
    ]
    folders = [p for p in hidden if os.path.isdir(p)]
    files = [p for p in hidden if not os.path.isdir(p)]

    _call(libc.unshare(_CLONE_NEWUSER | _CLONE_NEWNS), "unshare the user and mount namespaces")
    _write("/proc/self/setgroups", "deny")
    _write("/proc/self/uid_map", f"{uid or _NOBODY} {uid} 1")
    _write("/proc/self/gid_map", f"{gid or _NOBODY} {gid} 1")
    _call(libc.mount(None, b"/", None, _MS_REC | _MS_PRIVATE, None), "make the mounts private")
    # opened in this namespace, before the folders holding them are covered
    sources = {path: os.open(path, os.O_PATH) for path in kept}
    try:
        for folder in folders:
            _call(
                libc.mount(
                    b"tmpfs", folder.encode(), b"tmpfs", _MS_NOSUID | _MS_NODEV, b"mode=0755"
                ),
                "cover",
                folder,
            )
            for path, fd in sources.items():
                if not _inside(path, folder):
                    continue
                if os.path.isdir(f"/proc/self/fd/{fd}"):
                    os.makedirs(path, exist_ok=True)
                else:
                    os.makedirs(os.path.dirname(path), exist_ok=True)
                    Path(path).touch()
                source = f"/proc/self/fd/{fd}".encode()
                bind = _MS_BIND | _MS_REC
                _call(libc.mount(source, path.encode(), None, bind, None), "keep", path)
            readonly = _MS_REMOUNT | _MS_RDONLY | _MS_NOSUID | _MS_NODEV
            _call(libc.mount(None, folder.encode(), None, readonly, None), "seal", folder)
        for path in files:
            _call(libc.mount(b"/dev/null", path.encode(), None, _MS_BIND, None), "cover", path)
    finally:
        for fd in sources.values():
            os.close(fd)
    try:  # the same folder, seen through the new mounts; "/" if it is hidden now
        os.chdir(os.getcwd())
    except OSError:
        os.chdir("/")


def unavailable(python: str = sys.executable, timeout_s: float = 30.0) -> str | None:
    """Why this host cannot confine ranks (a child process tries), or None if it can."""
    with tempfile.TemporaryDirectory(prefix="tessera-confine-") as folder:
        secret = Path(folder, "hidden", "secret")
        secret.parent.mkdir()
        secret.write_text("x")
        kept = Path(folder, "hidden", "kept")
        kept.mkdir()
        plan = Confinement(hide=(str(secret.parent),), keep=(str(kept),))
        check = (
            "import os, sys; "
            f"sys.exit(os.path.exists({str(secret)!r}) or not os.path.isdir({str(kept)!r}))"
        )
        try:
            done = subprocess.run(
                plan.command([python, "-c", check], python),
                capture_output=True,
                text=True,
                timeout=timeout_s,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return str(exc)
    if done.returncode == 0:
        return None
    said = done.stderr.strip().splitlines()
    return said[-1] if said else f"the confined process ended with code {done.returncode}"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) < 2:
        print("usage: python -m tessera_worker.confine PLAN ARGV...", file=sys.stderr)
        return 2
    try:
        enter(Confinement.from_json(args[0]))
    except OSError as exc:
        print(f"tessera rank: cannot confine the rank: {exc.strerror}", file=sys.stderr, flush=True)
        return EXIT_CODE
    except (ValueError, KeyError) as exc:
        print(f"tessera rank: not a confinement plan: {exc}", file=sys.stderr, flush=True)
        return EXIT_CODE
    os.execv(args[1], args[1:])


if __name__ == "__main__":
    raise SystemExit(main())
