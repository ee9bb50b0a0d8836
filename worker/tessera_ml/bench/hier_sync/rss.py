"""Peak resident memory of this process over a stretch of work (Linux): ``reset_peak_rss``
lowers the kernel's high-water mark to the current resident size, ``peak_rss_bytes`` reads it.

Freed tensors only leave the resident size if the allocator returns them to the kernel; the
benchmark's ranks run with a fixed ``mmap`` threshold (``MALLOC_ENV``) so large tensors do.
"""

from __future__ import annotations

from pathlib import Path

MALLOC_ENV = {"MALLOC_MMAP_THRESHOLD_": str(128 * 1024)}


def reset_peak_rss() -> int:
    """Lower the high-water mark to the resident size now, and return that size."""
    Path("/proc/self/clear_refs").write_text("5")
    return _status_bytes("VmRSS:")


def peak_rss_bytes() -> int:
    return _status_bytes("VmHWM:")


def _status_bytes(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {field} in /proc/self/status")
