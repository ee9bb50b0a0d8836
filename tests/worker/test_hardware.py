"""What a worker registers about its machine."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tessera_worker import hardware


def test_registration_describes_this_machine_without_importing_torch() -> None:
    code = (
        "import json, sys; from tessera_worker import hardware; "
        "print(json.dumps(hardware.describe('h', '127.0.0.1'))); "
        "print('torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    described, torch_loaded = out.stdout.strip().splitlines()

    import json

    import torch

    info = json.loads(described)
    assert info["cpu_count"] == len(os.sched_getaffinity(0))
    assert info["memory_bytes"] > 2**28
    assert info["torch_version"] == torch.__version__
    assert len(info["accelerators"]) == torch.cuda.device_count()
    assert torch_loaded == "False" or torch.cuda.is_available()


def test_the_interface_of_an_address_is_found() -> None:
    assert hardware.interface_of("127.0.0.1") == "lo"
    assert hardware.interface_of("203.0.113.254") is None


def test_gpus_are_read_from_nvidia_smi_even_without_every_number(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    smi = tmp_path / "nvidia-smi"
    smi.write_text(
        "#!/bin/sh\necho 'NVIDIA H200, 143771, 143000'\necho 'NVIDIA A100, 81920, [N/A]'\n"
    )
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)

    assert hardware.accelerators() == [
        {"name": "NVIDIA H200", "total_memory": 143771 * 2**20, "free_memory": 143000 * 2**20},
        {"name": "NVIDIA A100", "total_memory": 81920 * 2**20, "free_memory": 0},
    ]
