"""What a worker registers about its machine."""

from __future__ import annotations

import os
import subprocess
import sys

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
