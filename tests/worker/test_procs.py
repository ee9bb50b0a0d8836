"""The worker's process keeps its memory from the ranks it starts as the same user, and knows
when every process a child started is gone."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tessera_worker import procs

PROBE = """
import ctypes, subprocess, sys
from tessera_worker import procs
libc = ctypes.CDLL(None)
before = libc.prctl(3, 0, 0, 0, 0)
made = procs.keep_memory_private()
after = libc.prctl(3, 0, 0, 0, 0)
child = subprocess.run(
    [sys.executable, "-c", "import ctypes; print(ctypes.CDLL(None).prctl(3, 0, 0, 0, 0))"],
    capture_output=True, text=True, check=True,
).stdout.strip()
print(before, made, after, child)
"""


def test_the_worker_is_undumpable_and_the_ranks_it_starts_are_not() -> None:
    said = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, check=True
    ).stdout.split()
    assert said == ["1", "True", "0", "1"]


# starts a grandchild in a session of its own (out of reach of its group's signals) that keeps
# what it inherited, and says its id
PARENT = """
import subprocess, sys
child = subprocess.Popen(
    [sys.executable, "-c", "import time; time.sleep(600)"],
    start_new_session=True, close_fds=False, stdout=subprocess.DEVNULL,
)
print(child.pid, flush=True)
import time; time.sleep(600)
"""


def test_a_lifeline_ends_only_when_every_process_holding_it_is_gone(tmp_path: Path) -> None:
    watching, held = procs.lifeline()
    parent = procs.spawn(
        [sys.executable, "-c", PARENT],
        env=dict(os.environ),
        log_path=tmp_path / "out.log",
        pass_fds=(held,),
    )
    os.close(held)
    deadline = time.monotonic() + 30
    while not (tmp_path / "out.log").read_text().strip():
        assert time.monotonic() < deadline and parent.poll() is None
        time.sleep(0.05)
    grandchild = int((tmp_path / "out.log").read_text().split()[0])
    try:
        procs.kill_all([parent])
        assert parent.returncode == -signal.SIGKILL
        copy = os.dup(watching)  # wait_closed closes what it is given
        assert not procs.wait_closed([copy], timeout_s=0.5)  # the grandchild still holds it
    finally:
        os.kill(grandchild, signal.SIGKILL)
    assert procs.wait_closed([watching], timeout_s=10)


def test_exit_codes_are_read_without_reaping_and_kill_all_reaps(tmp_path: Path) -> None:
    def start(code: str) -> subprocess.Popen[bytes]:
        argv = [sys.executable, "-c", code]
        return procs.spawn(argv, env=dict(os.environ), log_path=tmp_path / "out.log")

    ended, running = start("raise SystemExit(3)"), start("import time; time.sleep(600)")
    deadline = time.monotonic() + 30
    while procs.exit_code(ended) is None and time.monotonic() < deadline:
        time.sleep(0.02)
    stat = Path(f"/proc/{ended.pid}/stat").read_text()
    assert procs.exit_code(ended) == 3 and ended.returncode is None
    assert stat.rsplit(")", 1)[1].split()[0] == "Z"  # its id is still its own
    assert procs.exit_code(running) is None

    procs.kill_all([ended, running])

    assert (ended.returncode, running.returncode) == (3, -signal.SIGKILL)
    assert (procs.exit_code(ended), procs.exit_code(running)) == (3, -signal.SIGKILL)
