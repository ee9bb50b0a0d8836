"""What this machine offers: CPUs, memory and each GPU's total and free memory."""

from __future__ import annotations

import fcntl
import os
import shutil
import socket
import struct
import subprocess
from importlib import metadata
from pathlib import Path
from typing import Any

MIB = 1024 * 1024


def memory_bytes() -> int:
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return 0


def cpu_count() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def _from_nvidia_smi() -> list[dict[str, Any]] | None:
    """GPUs as the driver sees them, without creating a CUDA context in this process."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return None
    query = "--query-gpu=name,memory.total,memory.free"
    try:
        out = subprocess.run(
            [smi, query, "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    gpus = []
    for line in out.strip().splitlines():
        name, total, free = (part.strip() for part in line.rsplit(",", 2))
        gpus.append({"name": name, "total_memory": _bytes(total), "free_memory": _bytes(free)})
    return gpus


def _bytes(mib: str) -> int:
    """A memory size nvidia-smi gave in MiB; 0 when it has none (``[N/A]``)."""
    return int(mib) * MIB if mib.isdigit() else 0


def _from_torch() -> list[dict[str, Any]]:
    if not Path("/dev/nvidia0").exists() and not Path("/dev/nvidiactl").exists():
        return []  # no driver: no CUDA device, and no need to import torch to say so
    import torch

    if not torch.cuda.is_available():
        return []
    gpus = []
    for index in range(torch.cuda.device_count()):
        free, total = torch.cuda.mem_get_info(index)
        name = torch.cuda.get_device_name(index)
        gpus.append({"name": name, "total_memory": int(total), "free_memory": int(free)})
    return gpus


def accelerators() -> list[dict[str, Any]]:
    """One entry per CUDA device visible to ranks started from this process."""
    if os.environ.get("CUDA_VISIBLE_DEVICES", None) == "":
        return []
    found = _from_nvidia_smi()
    if found is None:
        return _from_torch()
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible:
        indices = [int(i) for i in visible.split(",") if i.strip().isdigit()]
        found = [found[i] for i in indices if i < len(found)]
    return found


def torch_version() -> str:
    """The installed torch's version, read from its metadata (importing torch takes seconds)."""
    try:
        return metadata.version("torch")
    except metadata.PackageNotFoundError:
        return "not installed"


def describe(hostname: str, address: str) -> dict[str, Any]:
    """The registration body of ``POST /api/v1/workers``."""
    return {
        "hostname": hostname,
        "address": address,
        "cpu_count": cpu_count(),
        "memory_bytes": memory_bytes(),
        "torch_version": torch_version(),
        "accelerators": accelerators(),
    }


def interface_of(address: str) -> str | None:
    """The name of the local network interface that holds ``address`` (IPv4), if any."""
    try:
        packed = socket.inet_aton(socket.gethostbyname(address))
    except OSError:
        return None
    for _, name in socket.if_nameindex():
        try:
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
                request = struct.pack("256s", name.encode()[:15])
                reply = fcntl.ioctl(s.fileno(), _SIOCGIFADDR, request)
        except OSError:
            continue
        if reply[20:24] == packed:
            return name
    return None


_SIOCGIFADDR = 0x8915
