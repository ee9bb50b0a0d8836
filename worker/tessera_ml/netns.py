"""A network testbed: simulated hosts as Linux network namespaces with rate-limited links.

Every host is a namespace with one interface ``eth0`` (address ``10.213.0.<host + 1>``), joined
by a veth pair to a bridge in a router namespace. Each link is shaped in both directions by a
token bucket (``tc qdisc … tbf``). Ranks of one host talk over their own address (the kernel
routes that over loopback); ranks of different hosts cross two shaped links. The bytes that
crossed each link are read from the kernel's own interface counters, so no algorithm can
under-report them.

Needs root and ``ip``/``tc`` (iproute2). ``unavailable_reason()`` says why not, when not.

    with Testbed(2, rate_mbit=100) as testbed:
        run_world(fn, 4, hosts=[0, 0, 1, 1], testbed=testbed)
        print(testbed.link_bytes())
"""

from __future__ import annotations

import atexit
import ctypes
import itertools
import os
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING

from tessera_ml.harness import LinkBytes

if TYPE_CHECKING:
    from tessera_ml.netcapture import LinkCapture

PREFIX = "tsr"
INTERFACE = "eth0"
SUBNET = "10.213.0"
NETNS_DIR = Path("/var/run/netns")
HOST_ENV = "TESSERA_TESTBED_HOST"
CLONE_NEWNET = 0x40000000
_counter = itertools.count()


class TestbedUnavailable(RuntimeError):
    """Namespaces cannot be created here (not root, no iproute2, or not permitted)."""

    __test__ = False
    code = "netns_unavailable"

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _run(*cmd: str) -> str:
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed: {done.stderr.strip() or done.returncode}")
    return done.stdout


def _sh(command: str) -> str:
    """Run a command line made of names this module generated (no quoting needed)."""
    return _run(*command.split())


def unavailable_reason() -> str | None:
    """None when testbeds can be built here, else why not (for a skip message)."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return "network namespaces need root"
    for tool in ("ip", "tc"):
        if shutil.which(tool) is None:
            return f"{tool} (iproute2) is not installed"
    probe = f"{PREFIX}-{os.getpid()}-probe"
    try:
        _run("ip", "netns", "add", probe)
    except RuntimeError as exc:
        return f"cannot create network namespaces: {exc}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True, check=False)
    return None


def enter_namespace(name: str) -> None:
    """Move the calling thread (and threads it starts later) into a named network namespace.

    Call it in a fresh process before any socket exists; Python 3.11 has no ``os.setns``.
    """
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(NETNS_DIR / name, os.O_RDONLY)
    try:
        if libc.setns(fd, CLONE_NEWNET) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"setns into {name}: {os.strerror(err)}")
    finally:
        os.close(fd)


def own_link_bytes(interface: str = INTERFACE) -> LinkBytes:
    """This process's namespace's counters for ``interface`` (from ``/proc/net/dev``)."""
    for line in Path("/proc/self/net/dev").read_text().splitlines()[2:]:
        name, _, fields = line.partition(":")
        if name.strip() == interface:
            values = fields.split()
            return LinkBytes(sent=int(values[8]), received=int(values[0]))
    raise RuntimeError(f"no interface {interface} in this network namespace")


def testbed_link_bytes() -> LinkBytes | None:
    """Inside a testbed host (``TESSERA_TESTBED_HOST`` set): its link's counters; else None."""
    if os.environ.get(HOST_ENV) is None:
        return None
    return own_link_bytes()


def cleanup_stale() -> list[str]:
    """Delete testbed namespaces whose creating process is gone; returns their names."""
    removed = []
    for name in _listed_namespaces():
        parts = name.split("-")
        if len(parts) < 3 or parts[0] != PREFIX or not parts[1].isdigit():
            continue
        if not _alive(int(parts[1])):
            subprocess.run(["ip", "netns", "del", name], capture_output=True, check=False)
            removed.append(name)
    return removed


class Testbed:
    """``hosts`` simulated hosts; links shaped to ``rate_mbit`` each way (see module doc).

    ``rate_mbit`` is one rate for every link, or one per host (a slow party, a fast one).
    """

    __test__ = False

    def __init__(
        self,
        hosts: int,
        *,
        rate_mbit: float | Sequence[float] = 1000.0,
        burst_bytes: int | None = None,
        latency_ms: float = 100.0,
    ) -> None:
        if hosts < 1 or hosts > 250:
            raise ValueError(f"a testbed has 1 to 250 hosts, got {hosts}")
        rates = (
            [float(rate_mbit)] * hosts if isinstance(rate_mbit, int | float) else list(rate_mbit)
        )
        if len(rates) != hosts:
            raise ValueError(f"{len(rates)} link rates for {hosts} hosts")
        if any(r <= 0 for r in rates):
            raise ValueError(f"rates must be positive, got {rates} Mbit/s")
        self.num_hosts = hosts
        self.rates_mbit = rates
        self.rate_mbit = min(rates)
        # at least 64 KiB so that offloaded (GSO) packets pass; else 4 ms worth of rate
        self.burst_bytes = burst_bytes or max(64 * 1024, int(max(rates) * 1e6 / 8 / 250))
        self.latency_ms = latency_ms
        tag = f"{PREFIX}-{os.getpid()}-{next(_counter)}"
        self.router = f"{tag}-r"
        self.namespaces = [f"{tag}-h{i}" for i in range(hosts)]
        self._created: list[str] = []
        self._base: dict[int, LinkBytes] = {}

    def address(self, host: int) -> str:
        return f"{SUBNET}.{host + 1}"

    def namespace(self, host: int) -> str:
        return self.namespaces[host]

    def start(self) -> Testbed:
        reason = unavailable_reason()
        if reason is not None:
            raise TestbedUnavailable(reason)
        cleanup_stale()
        atexit.register(self.close)
        try:
            self._add_namespace(self.router)
            _run("ip", "-n", self.router, "link", "add", "br0", "type", "bridge")
            _run("ip", "-n", self.router, "link", "set", "br0", "up")
            for host in range(self.num_hosts):
                self._add_host(host)
        except BaseException:
            self.close()
            raise
        self._base = self._read_counters()
        return self

    def _add_namespace(self, name: str) -> None:
        _run("ip", "netns", "add", name)
        self._created.append(name)
        _run("ip", "-n", name, "link", "set", "lo", "up")

    def _add_host(self, host: int) -> None:
        ns, port, router = self.namespaces[host], f"h{host}", self.router
        self._add_namespace(ns)
        _sh(f"ip -n {router} link add {port} type veth peer name {INTERFACE} netns {ns}")
        _sh(f"ip -n {router} link set {port} master br0")
        _sh(f"ip -n {router} link set {port} up")
        _sh(f"ip -n {ns} addr add {self.address(host)}/24 dev {INTERFACE}")
        _sh(f"ip -n {ns} link set {INTERFACE} up")
        shape = (
            f"root tbf rate {self.rates_mbit[host]}mbit burst {self.burst_bytes} "
            f"latency {self.latency_ms}ms"
        )
        _sh(f"tc -n {ns} qdisc add dev {INTERFACE} {shape}")
        _sh(f"tc -n {router} qdisc add dev {port} {shape}")

    def _read_counters(self) -> dict[int, LinkBytes]:
        # the router's end of host i's link: what it receives, host i sent
        script = (
            "for d in /sys/class/net/h*; do "
            'echo "${d##*/h} $(cat $d/statistics/rx_bytes) $(cat $d/statistics/tx_bytes)"; done'
        )
        out = _run("ip", "netns", "exec", self.router, "sh", "-c", script)
        counters = {}
        for line in out.splitlines():
            host, rx, tx = line.split()
            counters[int(host)] = LinkBytes(sent=int(rx), received=int(tx))
        return counters

    def link_bytes(self) -> dict[int, LinkBytes]:
        """Per host: bytes it sent into and received from its link since ``start``."""
        now = self._read_counters()
        zero = LinkBytes(0, 0)
        return {
            h: LinkBytes(
                c.sent - self._base.get(h, zero).sent, c.received - self._base.get(h, zero).received
            )
            for h, c in sorted(now.items())
        }

    def capture(self, host: int, folder: Path) -> LinkCapture:
        """Start recording every frame on ``host``'s link (see ``tessera_ml.netcapture``)."""
        from tessera_ml.netcapture import LinkCapture

        return LinkCapture(self.router, f"h{host}", folder)

    def inter_host_bytes(self) -> int:
        """Bytes that left any host over its link (each crossing counted once)."""
        return sum(c.sent for c in self.link_bytes().values())

    def close(self) -> None:
        """Delete every namespace this testbed made; safe to call twice."""
        for name in reversed(self._created):
            subprocess.run(["ip", "netns", "del", name], capture_output=True, check=False)
        self._created.clear()
        atexit.unregister(self.close)

    def __enter__(self) -> Testbed:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def _listed_namespaces() -> list[str]:
    if not NETNS_DIR.is_dir():
        return []
    return [p.name for p in NETNS_DIR.iterdir()]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
