"""One rank of a job: ``python -m tessera_worker.rank SPEC.json`` (the launcher runs this).

Joins the job's world through the attempt's rendezvous store (rank 0 serves it), builds the
algorithm's ``RankContext`` and calls its entry point. The rank holds only its task's own
credentials: a certificate of its party for this attempt and a token that reports this task's
metrics, logs and checkpoints. SIGTERM sets the context's stop signal; the launcher kills the
process group if the rank does not return in time. Exit code 0 means the rank finished.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import signal
import socket
import sys
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tessera_worker.gpu_watch import GpuWatch
from tessera_worker.gpu_watch import sample as gpu_sample
from tessera_worker.launch import RankLaunch
from tessera_worker.metric_watch import MetricWatch, StepTracking
from tessera_worker.output import forward_output
from tessera_worker.peer_loss import lost_a_peer
from tessera_worker.process_sample import ProcessSample
from tessera_worker.procs import die_with_parent
from tessera_worker.progress_lines import ProgressLines
from tessera_worker.redaction import HostPaths
from tessera_worker.traffic_sample import TrafficSample

SYSTEM_INTERVAL_S = 5.0
PEER_STOP_GRACE_S = 3.0
"""How long a rank whose link to a peer broke waits to be told to stop too: a peer stopped
first (a cancel reaches the parties' workers one after the other) is not a failure."""


def failure_marker(spec_path: Path) -> Path:
    """Where a failing rank notes when it failed: the earliest failure is the cause."""
    return spec_path.with_suffix(".failed")


def note_failure(spec_path: Path) -> None:
    marker = failure_marker(spec_path)
    if not marker.exists():
        marker.write_text(repr(time.time()))


def failure_text(spec_path: Path) -> Path:
    """Where a failed rank leaves what every party of the job may read of its error."""
    return spec_path.with_suffix(".error")


def _reporter(spec: RankLaunch) -> Any:
    from tessera_ml.report import MemoryReporter

    if spec.api_url is None or not spec.task_token:
        return MemoryReporter()
    from tessera_worker.client import ControlPlane
    from tessera_worker.reporter import HttpReporter

    api = ControlPlane(spec.api_url, spec.task_token, verify=spec.api_ca_file or True)
    spool = Path(spec.spool_path) if spec.spool_path else None
    return HttpReporter(
        api,
        job_id=spec.job_id,
        task_id=spec.task_id,
        rank=spec.rank,
        spool=spool,
        share_files_of=spec.attempt if spec.share_checkpoints else None,
        files_in=Path(spec.checkpoint_dir) if spec.checkpoint_dir else None,
        host_paths=HostPaths(Path(spec.home) if spec.home else None),
    )


def _credentials(spec: RankLaunch) -> Any:
    from tessera_ml.security.pki import Credentials

    if spec.tls_dir is None:
        raise RuntimeError("the launch gave this rank no TLS credentials")
    folder = Path(spec.tls_dir)
    return Credentials(folder / "key.pem", folder / "cert.pem", folder / "ca.pem")


def _entry(entry_point: str) -> Any:
    module_name, _, func_name = entry_point.partition(":")
    return getattr(importlib.import_module(module_name), func_name)


def run(
    spec: RankLaunch, reporter: StepTracking, stop: threading.Event, on_error: Callable[[], None]
) -> Any:
    """Join the world and run the entry point; ``on_error`` is called as soon as it fails
    (unless the rank was told to stop), and the caller reports what comes out of it."""
    import torch

    from tessera_ml.comm.world import join_world
    from tessera_ml.context import RankContext
    from tessera_ml.registry import get_spec
    from tessera_ml.spec import RankSlot

    torch.set_num_threads(int(os.environ.get("TESSERA_RANK_THREADS", "1")))
    algorithm = get_spec(spec.algorithm)
    config = (
        algorithm.parse_config(spec.config) if algorithm is not None else _loose_config(spec.config)
    )
    plan = [RankSlot.model_validate(s) for s in spec.plan]
    device = torch.device(spec.device)
    if device.type == "cuda":
        torch.cuda.set_device(device)
    listener = socket.socket(fileno=spec.store_fd) if spec.store_fd is not None else None
    world = join_world(
        rank=spec.rank,
        parties=[slot.party for slot in plan],
        store_address=(spec.store_host, spec.store_port),
        address=spec.address,
        credentials=_credentials(spec),
        attempt=spec.attempt_id,
        secret=bytes.fromhex(spec.store_secret),
        backend=spec.backend,
        device=device,
        timeout_s=spec.rendezvous_timeout_s,
        collective_timeout_s=spec.collective_timeout_s,
        store_listener=listener,
    )
    ctx = RankContext(
        rank=spec.rank,
        world_size=spec.world_size,
        slot=plan[spec.rank],
        plan=plan,
        config=config,
        comm=world.comm,
        device=device,
        reporter=reporter,
        stop=stop,
        checkpoint_dir=Path(spec.checkpoint_dir) if spec.checkpoint_dir else None,
        resume_from=Path(spec.resume_from) if spec.resume_from else None,
        data_root=Path(spec.data_root) if spec.data_root else None,
        job_id=spec.job_id,
        attempt=spec.attempt,
    )
    watches = contextlib.ExitStack()
    if device.type == "cuda":
        watches.enter_context(GpuWatch(reporter, lambda: gpu_sample(device)))
    traffic = TrafficSample(world.comm.stats, reporter)
    watches.enter_context(
        MetricWatch(reporter, traffic, interval_s=SYSTEM_INTERVAL_S, what="traffic")
    )
    finished = False
    try:
        with watches:
            result = _entry(spec.entry_point)(ctx)
        finished = True
        return result
    except BaseException as exc:
        if not stop.is_set() and lost_a_peer(f"{type(exc).__name__}: {exc}"):
            stop.wait(PEER_STOP_GRACE_S)
        if not stop.is_set():
            on_error()
        raise
    finally:
        # a failed or stopped attempt ends for every rank: waiting for the others to leave only
        # delays the report (and a rank that died never leaves)
        world.close(linger_s=10.0 if finished and not stop.is_set() else 0.0)


def _loose_config(raw: dict[str, Any]) -> Any:
    """The configuration of an entry point that is not a registered algorithm: kept as given."""
    from pydantic import ConfigDict

    from tessera_ml.spec import AlgorithmConfig

    class OpenConfig(AlgorithmConfig):
        model_config = ConfigDict(extra="allow")

    return OpenConfig.model_validate(raw)


def main(argv: list[str] | None = None) -> int:
    die_with_parent()
    args = sys.argv[1:] if argv is None else argv
    spec_path = Path(args[0])
    spec = RankLaunch.model_validate_json(spec_path.read_text())
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    progress = ProgressLines(_reporter(spec))
    reporter = StepTracking(progress)
    try:
        with (
            forward_output(reporter),
            MetricWatch(
                reporter, ProcessSample(), interval_s=SYSTEM_INTERVAL_S, what="process facts"
            ),
        ):
            print(f"rank {spec.rank}/{spec.world_size} of job {spec.job_id} starting", flush=True)
            started = time.monotonic()
            code = _run_reported(spec, spec_path, reporter, stop)
            progress.describe_last()
            if stop.is_set():
                print(f"rank {spec.rank} stopped: the job was cancelled", flush=True)
            elif code == 0:
                took = time.monotonic() - started
                print(f"rank {spec.rank} finished in {took:.1f} s", flush=True)
            return code
    finally:
        reporter.close()


def _run_reported(
    spec: RankLaunch, spec_path: Path, reporter: StepTracking, stop: threading.Event
) -> int:
    """Run the rank; its exit code. A failure's traceback goes to the logs as one entry."""
    try:
        run(spec, reporter, stop, on_error=lambda: note_failure(spec_path))
    except BaseException as exc:
        if stop.is_set():
            # a peer stopped first and the collective broke: the cancel, not a failure
            _local(f"(while stopping: {type(exc).__name__}: {exc})")
            return 0
        note_failure(spec_path)
        # the whole chain stays in this host's log; the job's parties read the error itself,
        # without the causes it was raised from (a reader's message quoting a row of the data)
        shared = "".join(traceback.format_exception(exc, chain=False))
        # hidden here, where the rank's own import path is known (the launcher's differs)
        shared = HostPaths(Path(spec.home) if spec.home else None).hide(shared)
        failure_text(spec_path).write_text(shared)
        reporter.log(shared.rstrip(), level="error")
        _local(traceback.format_exc())
        return 1
    return 0


def _local(text: str) -> None:
    """Write to the rank's own log file only, not to the control plane."""
    stream = sys.__stderr__
    if stream is not None:
        stream.write(text if text.endswith("\n") else text + "\n")
        stream.flush()


def exit_now(code: int) -> None:
    """End the process once its outcome is settled and reported, skipping the interpreter's
    teardown: there, native threads of torch's communication libraries that are still
    joinable can call ``std::terminate`` and turn a finished rank into a SIGABRT."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    exit_now(main())
