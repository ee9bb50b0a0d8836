"""Ranks see of their worker's files only their own task's.

A rank runs code its party allowed and reads what other parties send; it runs as the worker's
user, so without more it could open every file that user can: the worker's key and
certificate, the party token's file, other tasks' credentials and logs, the embedded broker's
queue and, under ``tessera up``, the control plane's database and authority.

``python -m tessera_worker.confine PLAN ARGV...`` gives the process a mount namespace of its
own, inside a user namespace so that no privilege is needed, in which each hidden folder is an
empty read-only folder with only the plan's kept paths put back, and each hidden file reads
as empty. Its user id inside the namespace is not 0, so that executing ``ARGV`` leaves it no
capability there, and in a namespace it makes inside this one the kernel locks the mounts it
inherits: it cannot take the covers off. The namespace's mounts are private: nothing done in
it is seen outside.

``ARGV`` also runs in a process-id namespace of its own, under a small first process (its
"init") that forwards signals to it and reports how it ended: it can name, and so signal, no
process outside (not its worker, not another job's ranks), its ``/proc`` lists only its own
processes where the host lets it mount one, and whatever it starts, even in a session of its
own, ends with it, because the kernel kills a namespace's processes when its init ends. The
init leads a session of its own; this helper stays outside, in the launcher's process group,
passes the signals it gets on to the init (a SIGKILL ends it, and the init with it), and ends
as ``ARGV`` did (the same exit code, or the same signal).
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import functools
import importlib.util
import json
import os
import re
import resource
import select
import signal
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from fnmatch import fnmatch
from pathlib import Path

from tessera_worker.procs import die_with_parent

_CLONE_NEWNS = 0x00020000
_CLONE_NEWUSER = 0x10000000
_CLONE_NEWPID = 0x20000000
_PR_SET_PDEATHSIG = 1
_MS_RDONLY = 1
_MS_NOSUID = 2
_MS_NODEV = 4
_MS_NOEXEC = 8
_MS_NOATIME = 1024
_MS_NODIRATIME = 2048
_MS_RELATIME = 1 << 21
_MS_REMOUNT = 32
_MS_BIND = 4096
_MS_REC = 16384
_MS_PRIVATE = 1 << 18
_NOBODY = 65534
EXIT_CODE = 3
"""How a process that could not be confined ends (before it ran any of ``ARGV``)."""
FORWARDED = (
    signal.SIGTERM,
    signal.SIGINT,
    signal.SIGHUP,
    signal.SIGQUIT,
    signal.SIGUSR1,
    signal.SIGUSR2,
)
"""The signals passed on to ``ARGV``: an init ignores those it has no handler for."""
SAYS = "tessera rank: "


class ConfineError(OSError):
    """A step of the confinement failed; the message names the step and the path."""

    def __str__(self) -> str:
        return str(self.strerror)


@dataclass(frozen=True)
class Confinement:
    """What a process may not see: ``hide`` (folders shown empty, files shown empty), except
    the ``keep`` paths inside a hidden folder, which are put back as they are, and the
    ``readonly`` ones, put back read-only (a kept path inside one stays writable)."""

    hide: tuple[str, ...]
    keep: tuple[str, ...] = ()
    readonly: tuple[str, ...] = ()
    """Like ``keep``, but put back read-only."""
    shm: str | None = None
    """A folder of the host's ``/dev/shm`` shown as the process's ``/dev/shm`` (which must be
    there, only this user's), so that processes given the same one share memory, and no other
    process's segments are in reach; where None, an empty one of its own."""

    def to_json(self) -> str:
        return json.dumps(
            {
                "hide": list(self.hide),
                "keep": list(self.keep),
                "readonly": list(self.readonly),
                "shm": self.shm,
            }
        )

    @classmethod
    def from_json(cls, text: str) -> Confinement:
        data = json.loads(text)
        return cls(
            hide=tuple(data["hide"]),
            keep=tuple(data.get("keep", ())),
            readonly=tuple(data.get("readonly", ())),
            shm=data.get("shm"),
        )

    def command(self, argv: Sequence[str], python: str = sys.executable) -> list[str]:
        """``argv`` run under this confinement."""
        # isolated (-I): no module of the current folder, the user's site or PYTHONPATH runs
        # before the process is confined
        return [python, "-I", "-m", "tessera_worker.confine", self.to_json(), *argv]


def inside(path: str, folder: str) -> bool:
    """Whether ``path`` lies in ``folder`` (not ``folder`` itself: keeping a hidden folder
    whole would hide nothing)."""
    return path != folder and path.startswith(folder.rstrip("/") + "/")


def _call(result: int, what: str, path: str | None = None) -> None:
    if result != 0:
        code = ctypes.get_errno()
        where = f" {path}" if path else ""
        raise ConfineError(code, f"{what}{where}: {os.strerror(code)}")


def _write(path: str, text: str) -> None:
    try:
        with open(path, "w") as f:
            f.write(text)
    except OSError as exc:
        raise ConfineError(exc.errno or 0, f"write {path}: {exc.strerror}") from exc


def _targets(plan: Confinement) -> tuple[list[str], list[tuple[str, str, bool]]]:
    """The real paths to hide, and each kept path as (where it goes back, the path it shows,
    read-only), both sorted outermost first. A kept path goes back where its job will look
    for it: below the hidden folder it was named in, through no link inside that folder (a
    link there may lead out of it, and its target is hidden if it was named too)."""
    named = [os.path.abspath(p) for p in plan.hide if os.path.lexists(p)]
    hidden = sorted({os.path.realpath(p) for p in named}, key=len)
    kept: dict[str, tuple[str, bool]] = {}
    for path, readonly in [*((p, False) for p in plan.keep), *((p, True) for p in plan.readonly)]:
        if not os.path.exists(path):
            continue
        path = os.path.abspath(path)
        if path in named:  # keeping a hidden folder whole would hide nothing
            continue
        folder = next((h for h in named if inside(path, h)), None)
        if folder is not None:
            target = os.path.realpath(folder) + path[len(folder) :]
        elif any(inside(os.path.realpath(path), h) for h in hidden):
            target = os.path.realpath(path)
        else:
            continue
        if target not in kept or not readonly:
            kept[target] = (path, readonly)
    ordered = sorted(kept.items(), key=lambda item: len(item[0]))
    keeps = [
        (target, path, readonly)
        for i, (target, (path, readonly)) in enumerate(ordered)
        if not any(inside(target, t) and kept[t][1] == readonly for t, _ in ordered[:i])
    ]
    # what lies in a hidden folder is hidden with it, unless a kept path shows it again; one
    # that holds kept paths is covered all the same, so that it is read-only around them (the
    # folder around it may be a scratch folder, writable)
    hidden = [
        p
        for i, p in enumerate(hidden)
        if not any(inside(p, q) for q in hidden[:i])
        or any(inside(p, t) or inside(t, p) for t, _, _ in keeps)
    ]
    return hidden, keeps


DEVICES = (
    "null",
    "zero",
    "full",
    "random",
    "urandom",
    "tty",
    "nvidia*",
    "dri",
    "kfd",
    "infiniband/uverbs*",
    "infiniband/rdma_cm",
)
"""What of the host's ``/dev`` a confined process keeps (names or patterns, at most one folder
deep), besides a ``/dev/shm`` of its own (``Confinement.shm``): the devices every program may
use, and the GPUs and RDMA adapters of
NVIDIA, AMD and InfiniBand (with the control devices of their drivers). The rest (disks,
consoles, the kernel's log, InfiniBand's management devices) is gone: a process of a worker
run as root could otherwise read a disk that root owns. They are read-only mounts: using a
device writes no inode, but changing its owner or mode would (on the host)."""

SCRATCH = ("/tmp", "/var/tmp")
"""Folders a confined process gets empty and writable, its own (what it needs of the host's
there, a kept path or its Python, goes back in): it does not reach the host's sockets there (a
terminal multiplexer's, an ssh agent's, which would run its requests as the worker's user),
and what it leaves there no process outside sees."""

RUNTIME = ("/run", "/var/run")
"""Folders of the host's running services, covered: their sockets (the service manager's, the
container engine's, the message bus's) would run a confined process's requests outside its
confinement, as the worker's user, or as root for a worker run as root. The resolver's file,
where ``/etc/resolv.conf`` leads into one of them, goes back read-only."""

RUNTIME_KEPT = ("/run/current-system", "/run/opengl-driver", "/run/opengl-driver-32")
"""What of ``RUNTIME`` goes back read-only where it is there: on NixOS, the system's programs
and the GPU driver's libraries."""


def code_folders(name: str) -> set[str]:
    """Where the top-level package or module ``name`` lies (an editable install maps it from a
    folder on no import path); empty where it cannot be found."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return set()
    if spec is not None and spec.submodule_search_locations:
        return set(spec.submodule_search_locations)
    if spec is not None and spec.origin and os.path.isabs(spec.origin):
        return {os.path.dirname(spec.origin)}
    return set()


def _python() -> list[str]:
    """Where the Python running this module has its files, and those of this package and of
    ``tessera_ml``: the process it confines is most likely the same Python, and must find them
    where they were."""
    found = {sys.prefix, sys.exec_prefix, sys.base_prefix, os.path.dirname(sys.executable)}
    found |= {p for p in sys.path if p}
    return sorted(found | code_folders("tessera_worker") | code_folders("tessera_ml"))


WRITABLE = ("/tmp", "/var/tmp", "/dev")
"""What a confined process may write besides its kept folders (of ``/dev``, only
``/dev/shm``: the rest is read-only); every other mount it sees is read-only, so that it
leaves nothing behind (a module on an import path, a start-up file) that a process outside
would run."""


def _mounts() -> list[tuple[str, set[str], str]]:
    """Each mount this process sees: its mount point, its options, its file system type."""
    mounts = []
    with open("/proc/self/mountinfo", "rb") as table:
        for line in table:
            fields = line.split()
            point, options = fields[4], fields[5]
            kind = fields[fields.index(b"-") + 1]
            # the kernel writes space, tab, newline and backslash as octal escapes
            point = re.sub(rb"\\([0-7]{3})", lambda m: bytes([int(m.group(1), 8)]), point)
            mounts.append((os.fsdecode(point), set(options.decode().split(",")), kind.decode()))
    return mounts


_OPTIONS = {
    "nosuid": _MS_NOSUID,
    "nodev": _MS_NODEV,
    "noexec": _MS_NOEXEC,
    "noatime": _MS_NOATIME,
    "nodiratime": _MS_NODIRATIME,
    "relatime": _MS_RELATIME,
}


def _locked_flags(options: set[str]) -> int:
    """The flags of a mount that a remount in a user namespace must keep."""
    return sum(flag for name, flag in _OPTIONS.items() if name in options)


def _options_at(point: str) -> set[str]:
    """The options of the mount on top at ``point``."""
    return next(options for at, options, _ in reversed(_mounts()) if at == point)


def _seal_the_rest(libc: ctypes.CDLL, writable: list[str]) -> None:
    """Remount read-only every mount but those at or under ``writable``. Read from the mount
    table, not from the paths: an automount point is left untouched, never set off."""
    for point, options, kind in sorted(_mounts(), key=lambda mount: len(mount[0])):
        if any(point == w or inside(point, w) for w in writable):
            continue
        if "ro" in options or kind == "autofs":
            continue
        flags = _MS_BIND | _MS_REMOUNT | _MS_RDONLY | _locked_flags(options)
        if libc.mount(None, os.fsencode(point), None, flags, None) != 0:
            code = ctypes.get_errno()
            if code in (errno.ENOENT, errno.ENOTDIR):  # under a cover, or gone
                continue
            # under a mount made since (the namespace's /proc over the host's binfmt_misc,
            # a cover over a folder of the home on a disk of its own): out of sight already
            if code == errno.EINVAL and not os.path.ismount(point):
                continue
            _call(-1, "make read-only", point)


def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mount.argtypes = [ctypes.c_char_p] * 3 + [ctypes.c_ulong, ctypes.c_char_p]
    return libc


def _unshare(libc: ctypes.CDLL) -> None:
    """Enter new user and mount namespaces, with mounts private to them, and have the next
    child start a new process-id namespace."""
    uid, gid = os.geteuid(), os.getegid()
    flags = _CLONE_NEWUSER | _CLONE_NEWNS | _CLONE_NEWPID
    _call(libc.unshare(flags), "unshare the user, mount and process-id namespaces")
    _write("/proc/self/setgroups", "deny")
    _write("/proc/self/uid_map", f"{uid or _NOBODY} {uid} 1")
    _write("/proc/self/gid_map", f"{gid or _NOBODY} {gid} 1")
    _call(libc.mount(None, b"/", None, _MS_REC | _MS_PRIVATE, None), "make private", "/")


def _own_proc(libc: ctypes.CDLL) -> bool:
    """Mount a ``/proc`` of this process's namespace over the host's, so that no other
    process's files (a command line, say) show; False where the host refuses it (a container
    whose ``/proc`` is partly masked), leaving the host's, whose processes stay out of reach."""
    flags = _MS_NOSUID | _MS_NODEV | _MS_NOEXEC
    return libc.mount(b"proc", b"/proc", b"proc", flags, None) == 0


def _cover(libc: ctypes.CDLL, plan: Confinement) -> None:
    """Hide and keep as ``plan`` says, give this process its own ``SCRATCH``, cover
    ``RUNTIME``, then make the rest read-only, in this mount namespace."""
    scratch = sorted({os.path.realpath(p) for p in SCRATCH if os.path.isdir(p)})
    runtime = sorted({os.path.realpath(p) for p in RUNTIME if os.path.isdir(p)} - set(scratch))
    resolver = os.path.realpath("/etc/resolv.conf")
    plan = Confinement(
        hide=(*plan.hide, *scratch, *runtime),
        keep=plan.keep,
        readonly=(*plan.readonly, *_python(), *RUNTIME_KEPT, resolver),
    )
    private = set(scratch)
    hidden, keeps = _targets(plan)
    folders = [p for p in hidden if os.path.isdir(p)]
    files = [p for p in hidden if not os.path.isdir(p)]
    # opened in this namespace, before the folders holding them are covered
    sources = [os.open(path, os.O_PATH) for _, path, _ in keeps]
    # a folder with kept paths inside is covered before they go back in; the others after
    # every bind, so that a recursive bind of a kept path does not carry their covers along
    holding = [f for f in folders if any(inside(t, f) for t, _, _ in keeps)]
    steps = sorted(
        [
            *((len(f), 0, f, -1) for f in holding),
            *((len(t), 1, t, i) for i, (t, _, _) in enumerate(keeps)),
        ]
    )
    steps += [(0, 0, f, -1) for f in folders if f not in holding]

    mount = functools.partial(_mount, libc)

    try:
        for _, _, path, index in steps:
            if index < 0:
                # under a scratch folder covered before it, it is to be made again
                os.makedirs(path, exist_ok=True)
                mode = "1777" if path in private else "0755"
                mount("tmpfs", path, _MS_NOSUID | _MS_NODEV, "cover", tmpfs=True, mode=mode)
                continue
            source = f"/proc/self/fd/{sources[index]}"
            if os.path.isdir(source):
                os.makedirs(path, exist_ok=True)
            elif not os.path.exists(path):
                os.makedirs(os.path.dirname(path), exist_ok=True)
                Path(path).touch()
            mount(source, path, _MS_BIND | _MS_REC, "keep")
            if keeps[index][2]:
                readonly = _MS_BIND | _MS_REMOUNT | _MS_RDONLY | _locked_flags(_options_at(path))
                mount(None, path, readonly, "keep read-only")
        for path in files:
            mount("/dev/null", path, _MS_BIND, "cover")
        for folder in folders:
            if folder not in private:
                mount(None, folder, _MS_REMOUNT | _MS_RDONLY | _MS_NOSUID | _MS_NODEV, "seal")
        writable = [t for t, _, readonly in keeps if not readonly]
        for path in WRITABLE:  # on a mount of their own, so that they stay writable
            if os.path.isdir(path) and not os.path.ismount(path):
                mount(path, path, _MS_BIND | _MS_REC, "keep")
        _seal_the_rest(libc, [*WRITABLE, *writable])
    finally:
        for fd in sources:
            os.close(fd)
    try:  # the same folder, seen through the new mounts; "/" if it is hidden now
        os.chdir(os.getcwd())
    except OSError:
        os.chdir("/")


_DEV_LINKS = {
    "fd": "/proc/self/fd",
    "stdin": "/proc/self/fd/0",
    "stdout": "/proc/self/fd/1",
    "stderr": "/proc/self/fd/2",
}


def _mount(
    libc: ctypes.CDLL,
    source: str | None,
    target: str,
    flags: int,
    what: str,
    tmpfs: bool = False,
    mode: str = "0755",
) -> None:
    kind, data = (b"tmpfs", f"mode={mode}".encode()) if tmpfs else (None, None)
    encoded = None if source is None else os.fsencode(source)
    _call(libc.mount(encoded, os.fsencode(target), kind, flags, data), what, target)


def _devices() -> list[str]:
    """The entries of ``/dev`` that ``DEVICES`` names, outermost first."""
    found = []
    for pattern in DEVICES:
        folder, _, name = pattern.rpartition("/")
        where = os.path.join("/dev", folder)
        if os.path.isdir(where):
            found += [os.path.join(folder, n) for n in os.listdir(where) if fnmatch(n, name)]
    return sorted(set(found), key=lambda entry: (entry.count("/"), entry))


def _shared_memory(folder: str) -> int:
    """An ``O_PATH`` descriptor of ``folder`` in the host's ``/dev/shm``, which the launcher
    made (not made here: a namespace still starting after its task was swept would leave one
    behind); refused unless it is a folder of this user's that no one else may enter."""
    try:
        fd = os.open(folder, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError as exc:
        raise ConfineError(exc.errno or 0, f"shared memory {folder}: {exc.strerror}") from exc
    found = os.fstat(fd)
    if found.st_uid != os.geteuid() or found.st_mode & 0o077:
        os.close(fd)
        raise ConfineError(errno.EPERM, f"shared memory {folder}: not this user's alone")
    return fd


def _own_dev(libc: ctypes.CDLL, shm: str | None) -> None:
    """Replace ``/dev`` by a read-only folder holding only ``DEVICES``, as they are, and a
    ``/dev/shm``: ``shm`` if given, else an empty one of its own."""
    if not os.path.isdir("/dev"):
        return
    entries = _devices()
    sources = {entry: os.open(f"/dev/{entry}", os.O_PATH) for entry in entries}
    if shm is not None:
        sources["shm"] = _shared_memory(shm)
    sealed = _MS_NOSUID | _MS_NODEV | _MS_NOEXEC
    try:
        _mount(libc, "tmpfs", "/dev", sealed, "cover", tmpfs=True)
        for entry, fd in sources.items():
            source, target = f"/proc/self/fd/{fd}", f"/dev/{entry}"
            os.makedirs(os.path.dirname(target), exist_ok=True)
            if os.path.isdir(source):
                os.mkdir(target)
            else:
                Path(target).touch()
            _mount(libc, source, target, _MS_BIND | _MS_REC, "keep")
            if entry != "shm":
                readonly = _MS_BIND | _MS_REMOUNT | _MS_RDONLY | _locked_flags(_options_at(target))
                _mount(libc, None, target, readonly, "keep read-only")
        if shm is None:
            os.mkdir("/dev/shm")
            _mount(libc, "tmpfs", "/dev/shm", _MS_NOSUID | _MS_NODEV, "cover", True, "1777")
        for name, target in _DEV_LINKS.items():
            os.symlink(target, f"/dev/{name}")
        _mount(libc, None, "/dev", _MS_REMOUNT | _MS_RDONLY | sealed, "seal")
    finally:
        for fd in sources.values():
            os.close(fd)


def _forward(to: int) -> None:
    """Pass each of ``FORWARDED`` on to the process ``to``."""

    def passing(sig: int, _frame: object) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(to, sig)

    for sig in FORWARDED:
        signal.signal(sig, passing)


def _init(
    libc: ctypes.CDLL, plan: Confinement, argv: Sequence[str], report: int, lifeline: int
) -> int:
    """The namespace's first process: confine, start ``argv``, pass signals on, reap every
    process the namespace leaves it, and write ``argv``'s wait status to ``report``. It starts
    with ``FORWARDED`` blocked, so that none is lost before it can pass them on."""
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)  # the helper outside is gone: so is this
    if select.select([lifeline], [], [], 0)[0]:  # it went before that was asked (end of file)
        return EXIT_CODE
    os.close(lifeline)
    # a session and process group of its own: a signal to its group (kill(0, ...)) from
    # inside reaches no process outside, not even the helper
    os.setsid()
    try:
        _own_proc(libc)
        _own_dev(libc, plan.shm)
        _cover(libc, plan)
    except OSError as exc:
        print(f"{SAYS}cannot confine the rank: {exc}", file=sys.stderr, flush=True)
        return EXIT_CODE
    child = os.fork()
    if child == 0:
        for sig in (*FORWARDED, signal.SIGPIPE, signal.SIGXFSZ):  # Python ignores the last two
            signal.signal(sig, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, FORWARDED)
        try:
            os.execv(argv[0], list(argv))
        except OSError as exc:
            print(f"{SAYS}cannot run {argv[0]}: {exc.strerror}", file=sys.stderr, flush=True)
        os._exit(EXIT_CODE)
    _forward(child)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, FORWARDED)
    while True:
        pid, status = os.waitpid(-1, 0)
        if pid == child:
            signal.pthread_sigmask(signal.SIG_BLOCK, FORWARDED)  # its id is free again
            os.write(report, str(status).encode())
            return 0


def run(plan: Confinement, argv: Sequence[str]) -> int:
    """Run ``argv`` confined as ``plan`` says; end as it ended. Signals of ``FORWARDED`` that
    this helper gets reach ``argv`` once, through the namespace's init; a SIGKILL ends the
    helper and, with it, the namespace."""
    die_with_parent()  # the helper dies with its launcher, and the namespace with the helper
    libc = _libc()
    _unshare(libc)
    signal.pthread_sigmask(signal.SIG_BLOCK, FORWARDED)  # queued until they can be passed on
    reading, report = os.pipe()
    lifeline, holding = os.pipe()  # the init reads its end's close as this helper's death
    init = os.fork()
    if init == 0:
        os.close(reading)
        os.close(holding)
        code = 1
        try:
            code = _init(libc, plan, argv, report, lifeline)
        finally:
            os._exit(code)
    os.close(report)
    os.close(lifeline)
    _forward(init)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, FORWARDED)
    os.waitid(os.P_PID, init, os.WEXITED | os.WNOWAIT)
    signal.pthread_sigmask(signal.SIG_BLOCK, FORWARDED)  # once reaped, its id is free again
    _, status = os.waitpid(init, 0)
    os.close(holding)
    with os.fdopen(reading, "rb") as said:
        reported = said.read()
    if reported:
        status = int(reported)
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        with contextlib.suppress(OSError, ValueError):  # SIGKILL's, the C library's: cannot
            signal.signal(sig, signal.SIG_DFL)
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # the rank's fault, not this core's
        signal.pthread_sigmask(signal.SIG_UNBLOCK, [sig])
        os.kill(os.getpid(), sig)
        return 128 + sig
    return os.waitstatus_to_exitcode(status)


@dataclass(frozen=True)
class Probe:
    """What this host allows: ``problem``, why it cannot confine ranks (None if it can), and
    ``own_proc``, whether a confined process gets a ``/proc`` of its own (where not, it lists
    every process of the host, with its command line)."""

    problem: str | None
    own_proc: bool


def probe(python: str = sys.executable, timeout_s: float = 30.0) -> Probe:
    """What this host allows, as a confined child process finds it."""
    with tempfile.TemporaryDirectory(prefix="tessera-confine-") as folder:
        secret = Path(folder, "hidden", "secret")
        secret.parent.mkdir()
        secret.write_text("x")
        kept = Path(folder, "hidden", "kept")
        kept.mkdir()
        plan = Confinement(hide=(str(secret.parent),), keep=(str(kept),))
        check = (
            "import importlib.util, os, sys; "
            # the code a rank runs is in its sight (an editable install maps it from a folder
            # on no import path, maybe in a scratch folder)
            "open(importlib.util.find_spec('tessera_worker.rank').origin).close(); "
            "own = sorted(int(p) for p in os.listdir('/proc') if p.isdigit()) == [1, os.getpid()]; "
            "print('own /proc' if own else 'shared /proc'); "
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
            return Probe(str(exc), own_proc=False)
    if done.returncode == 0:
        return Probe(None, own_proc=done.stdout.strip() == "own /proc")
    said = done.stderr.strip().splitlines()
    if not said:
        return Probe(f"the confined process ended with code {done.returncode}", own_proc=False)
    return Probe(said[-1].removeprefix(SAYS), own_proc=False)


def unavailable(python: str = sys.executable, timeout_s: float = 30.0) -> str | None:
    """Why this host cannot confine ranks (a child process tries), or None if it can."""
    return probe(python, timeout_s).problem


PLAN_FD = "--plan-fd"


def _hand_over(text: str, argv: Sequence[str]) -> None:
    """Execute this module again (same process) with the plan in a memory file, not on the
    command line, which any process may read: the namespace's init, a fork of this process,
    would show the rank every path the plan hides."""
    fd = os.memfd_create("tessera-confinement-plan", 0)
    os.set_inheritable(fd, True)
    os.write(fd, text.encode())
    os.lseek(fd, 0, os.SEEK_SET)
    module = [sys.executable, "-I", "-m", "tessera_worker.confine"]
    os.execv(sys.executable, [*module, PLAN_FD, str(fd), *argv])


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    handed_over = len(args) > 1 and args[0] == PLAN_FD
    if len(args) < (3 if handed_over else 2):
        print("usage: python -m tessera_worker.confine PLAN ARGV...", file=sys.stderr)
        return 2
    try:
        if handed_over:
            with os.fdopen(int(args[1]), "rb") as held:
                text, command = held.read().decode(), args[2:]
        else:
            text, command = args[0], args[1:]
        plan = Confinement.from_json(text)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        print(f"{SAYS}not a confinement plan: {exc}", file=sys.stderr, flush=True)
        return EXIT_CODE
    try:
        if not handed_over:
            _hand_over(text, command)
        return run(plan, command)
    except OSError as exc:
        print(f"{SAYS}cannot confine the rank: {exc}", file=sys.stderr, flush=True)
        return EXIT_CODE


if __name__ == "__main__":
    raise SystemExit(main())
