"""The servers of ``tessera bench api``: ``tessera api`` processes and the CPU they use."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx

from tessera_ml.ports import free_port

ADMIN_TOKEN = "load-bench-admin-token-0123456789"


class Replicas:
    """``tessera api`` processes on one database, each on its own port."""

    def __init__(self, count: int, database_url: str, home: Path, workers: int = 1) -> None:
        self.ports = [free_port() for _ in range(count)]
        self.home = home
        self.procs: list[subprocess.Popen[bytes]] = []
        env = {
            **os.environ,
            "TESSERA_HOME": str(home),
            "TESSERA_DATABASE_URL": database_url,
            "TESSERA_ADMIN_TOKEN": ADMIN_TOKEN,
        }
        for i, port in enumerate(self.ports):
            argv = [sys.executable, "-m", "tessera_api.cli", "api", "--port", str(port)]
            argv.append("--no-scheduler")
            if workers > 1:
                argv += ["--workers", str(workers)]
            # one migrates; the others skip what would be a race to the same upgrade
            if i > 0:
                argv.append("--no-migrate")
            with self.log(i).open("ab") as log:
                self.procs.append(subprocess.Popen(argv, env=env, stdout=log, stderr=log))
            self.wait_serving(i)

    def pids(self) -> list[int]:
        return [proc.pid for proc in self.procs]

    @property
    def bases(self) -> list[str]:
        return [f"http://127.0.0.1:{port}" for port in self.ports]

    def log(self, index: int) -> Path:
        return self.home / f"api-{index}.log"

    def wait_serving(self, index: int, timeout_s: float = 60) -> None:
        deadline = time.monotonic() + timeout_s
        url = f"{self.bases[index]}/api/v1/health"
        while True:
            try:
                if httpx.get(url, timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            if self.procs[index].poll() is not None or time.monotonic() > deadline:
                tail = self.log(index).read_text(errors="replace")[-3000:]
                self.stop()
                raise RuntimeError(f"tessera api did not come up:\n{tail}")
            time.sleep(0.1)

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


class CpuUse:
    """The CPU the servers and this process used over a phase, in cores (Linux only; elsewhere
    the report is empty): it shows which side ran out of CPU."""

    def __init__(self, servers: Sequence[int]) -> None:
        self.servers = list(servers)
        self.start: tuple[float, float, float] | None = None
        self.used: tuple[float, float, float] | None = None

    def __enter__(self) -> CpuUse:
        self.start = self._now()
        return self

    def __exit__(self, *_: object) -> None:
        end = self._now()
        if self.start is not None and end is not None:
            self.used = (end[0] - self.start[0], end[1] - self.start[1], end[2] - self.start[2])

    def _now(self) -> tuple[float, float, float] | None:
        try:
            servers = sum(_cpu_seconds(pid) for pid in self.servers)
        except OSError:
            return None
        mine = time.process_time()
        return time.monotonic(), servers, mine

    def report(self) -> dict[str, Any]:
        if self.used is None or self.used[0] <= 0:
            return {}
        wall, servers, mine = self.used
        return {
            "cpu_cores": {
                "servers": round(servers / wall, 2),
                "generator": round(mine / wall, 2),
                "machine": os.cpu_count(),
            }
        }


def _cpu_seconds(pid: int) -> float:
    """User and system CPU seconds of a process and of its children (a server's workers)."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # ended meanwhile
        if int(entry.name) == pid or int(fields[1]) == pid:
            total += (int(fields[11]) + int(fields[12])) / ticks
    if total == 0.0 and not Path(f"/proc/{pid}").exists():
        raise OSError(f"no process {pid}")
    return total
