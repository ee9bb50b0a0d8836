"""The network testbed: placement of ranks, shaped links, interface counters, cleanup."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest
import torch

from tessera_ml.comm.base import Communicator
from tessera_ml.netns import NETNS_DIR, Testbed, cleanup_stale, own_link_bytes
from tessera_ml.worlds import run_world
from tests.ml.conftest import MakeTestbed

pytestmark = pytest.mark.netns

MB = 1 << 20


def _transfers(comm: Communicator, peer_same_host: int, peer_other_host: int) -> dict[str, float]:
    payload = torch.ones(MB // 4)  # 1 MiB of float32
    before = own_link_bytes()
    comm.barrier()
    if comm.rank == 0:
        comm.send(payload, peer_same_host)
    elif comm.rank == peer_same_host:
        comm.recv(torch.empty_like(payload), 0)
    comm.barrier()
    after_local = own_link_bytes()
    start = time.perf_counter()
    if comm.rank == 0:
        comm.send(torch.cat([payload] * 2), peer_other_host)
    elif comm.rank == peer_other_host:
        comm.recv(torch.empty(2 * payload.numel()), 0)
    comm.barrier()
    return {
        "local_sent": after_local.sent - before.sent,
        "remote_sent": own_link_bytes().sent - after_local.sent,
        "remote_s": time.perf_counter() - start,
    }


def test_ranks_of_one_host_skip_the_link_and_other_hosts_cross_it(
    make_testbed: MakeTestbed,
) -> None:
    testbed = make_testbed(2, rate_mbit=[16.0, 1000.0])
    shaping = [
        subprocess.run(
            ["tc", "-n", ns, "qdisc", "show", "dev", "eth0"], capture_output=True, text=True
        ).stdout
        for ns in testbed.namespaces
    ]
    assert "rate 16Mbit" in shaping[0] and "rate 1Gbit" in shaping[1]
    results = run_world(_transfers, 3, 1, 2, hosts=[0, 0, 1], testbed=testbed)
    rank0 = results[0]
    assert rank0["local_sent"] < 64 * 1024  # only barrier chatter, not the 1 MiB
    assert rank0["remote_sent"] >= 2 * MB
    # 2 MiB out of host 0's 16 Mbit/s bucket cannot take less than ~1 s (burst aside)
    assert results[2]["remote_s"] > 0.8
    links = testbed.link_bytes()
    assert links[0].sent >= 2 * MB and links[1].received >= 2 * MB
    assert testbed.inter_host_bytes() >= links[0].sent


def _fail(comm: Communicator) -> None:
    raise RuntimeError("boom")


def test_testbed_cleans_up_after_a_failure() -> None:
    testbed = Testbed(2, rate_mbit=100.0)
    with pytest.raises(RuntimeError, match="boom"), testbed:
        names = [testbed.router, *testbed.namespaces]
        assert all((NETNS_DIR / n).exists() for n in names)
        raise RuntimeError("boom")
    assert not any((NETNS_DIR / n).exists() for n in names)
    assert not [n for n in os.listdir(NETNS_DIR) if n.startswith(f"tsr-{os.getpid()}-")]


def test_hosts_must_fit_the_testbed(testbed: Testbed) -> None:
    with pytest.raises(ValueError, match="not on a testbed of 2 hosts"):
        run_world(_fail, 2, hosts=[0, 5], testbed=testbed)
    with pytest.raises(ValueError, match="pass testbed"):
        run_world(_fail, 2, hosts=[0, 1])


def test_namespaces_of_a_dead_process_are_removed(testbed: Testbed) -> None:
    stale_pid = _dead_pid()
    name = f"tsr-{stale_pid}-0-r"
    subprocess.run(["ip", "netns", "add", name], check=True)
    removed = cleanup_stale()
    assert name in removed and not (NETNS_DIR / name).exists()
    assert all((NETNS_DIR / n).exists() for n in testbed.namespaces)


def _dead_pid() -> int:
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


def test_without_root_the_testbed_says_why(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from tessera_ml.bench.cli import main
    from tessera_ml.netns import TestbedUnavailable, unavailable_reason

    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert unavailable_reason() == "network namespaces need root"
    with pytest.raises(TestbedUnavailable, match="need root"):
        Testbed(2).start()
    assert main(["ddp", "--quick", "--netns"]) == 3
    assert "--netns is not possible here: network namespaces need root" in capsys.readouterr().err


ENDS_WITHIN_S = 120
"""Generous: it ends in well under a second, and a loaded machine that stalls the process must
not fail the test."""


HOLD_TESTBED = """
import signal, sys, time
from tessera_ml.netns import Testbed
# Ctrl-C as under a terminal, also when the tests were started in the background (which
# leaves SIGINT ignored in every child)
signal.signal(signal.SIGINT, signal.default_int_handler)
with Testbed(2) as testbed:
    print(" ".join([testbed.router, *testbed.namespaces]), flush=True)
    time.sleep({hold_s})  # ends early only through Ctrl-C
"""


def test_ctrl_c_removes_the_testbed(make_testbed: MakeTestbed) -> None:
    import signal
    import sys

    child = subprocess.Popen(
        [sys.executable, "-c", HOLD_TESTBED.format(hold_s=10 * ENDS_WITHIN_S)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    names = child.stdout.readline().split()
    assert len(names) == 3 and all((NETNS_DIR / n).exists() for n in names)
    child.send_signal(signal.SIGINT)
    try:
        child.wait(timeout=ENDS_WITHIN_S)
    except subprocess.TimeoutExpired:
        state = _signal_state(child.pid)
        child.kill()
        child.wait()
        cleanup_stale()  # what the killed process held
        pytest.fail(
            f"the process holding the testbed still ran {ENDS_WITHIN_S} s after Ctrl-C: {state}"
        )
    assert not any((NETNS_DIR / n).exists() for n in names)


def _signal_state(pid: int) -> str:
    """What the kernel says of a process and its signals, for a failure message."""
    try:
        status = Path(f"/proc/{pid}/status").read_text().splitlines()
        wchan = Path(f"/proc/{pid}/wchan").read_text()
    except OSError as exc:
        return f"cannot read /proc/{pid}: {exc}"
    keys = ("State", "SigPnd", "ShdPnd", "SigBlk", "SigIgn", "SigCgt")
    return "; ".join([line for line in status if line.startswith(keys)] + [f"wchan {wchan}"])
