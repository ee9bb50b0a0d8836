"""``tessera worker`` answers bad input with a message and exit code 2."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tessera_worker import cli
from tessera_worker.agent import Agent
from tessera_worker.client import ControlPlane
from tests.worker.plane import ADMIN, Plane


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--token", "t"], "--party is required"),
        (["--party", "Bob!", "--token", "t"], "'Bob!' is not a party slug"),
        (["--party", "bob"], "a party token is required"),
        (["--party", "bob", "--token-file", "/nonexistent"], "cannot read --token-file"),
        (["--party", "bob", "--token", "t", "--allow-custom", "os;rm"], "--allow-custom 'os;rm'"),
        (["--party", "bob", "--token", "t", "--api", "ftp://x"], "--api must be an http(s) URL"),
        (["--party", "bob", "--token", "t", "--api", "http://"], "--api must be an http(s) URL"),
        (["--party", "bob", "--token", "t", "--api", "http://[::1"], "is not a URL"),
        (
            ["--party", "bob", "--token", "t", "--api", "https://u:pw@cp:8443"],
            "--api must not hold a user or password",
        ),
        (
            ["--party", "bob", "--token", "t", "--api", "http://cp.example.org:8000"],
            "plain http to another host, which would send the party token in clear",
        ),
        (["--party", "bob", "--token", "t", "--rendezvous-timeout", "-5"], "must be positive"),
        (
            ["--party", "bob", "--token", "t", "--broker", "nonsense"],
            "--broker must be a URL such as redis://",
        ),
    ],
)
def test_worker_rejects_bad_arguments(
    argv: list[str],
    message: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("TESSERA_PARTY", "TESSERA_PARTY_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("tessera worker: ") and message in err


@pytest.mark.parametrize(
    "api",
    [
        "http://127.0.0.1:8000",
        "http://127.0.0.2:8000",
        "http://localhost:8000",
        "http://[::1]:8000",
        "https://cp.example.org",
    ],
)
def test_plain_http_is_taken_only_within_the_host_or_when_asked_for(api: str) -> None:
    args = cli.parser().parse_args(["--party", "bob", "--token", "t", "--api", api])
    cli.check(args)
    remote = ["--party", "bob", "--token", "t", "--api", "http://10.0.0.5:8000"]
    cli.check(cli.parser().parse_args([*remote, "--plain-http"]))
    with pytest.raises(cli.UsageError, match="use https"):
        cli.check(cli.parser().parse_args(remote))


def test_worker_says_when_the_control_plane_is_unreachable(
    capsys: pytest.CaptureFixture[str],
) -> None:
    args = cli.parser().parse_args(
        ["--party", "bob", "--token", "t", "--api", "http://127.0.0.1:9"]
    )
    runtime = cli.build_runtime(args, confine_ranks=False)
    with pytest.raises(cli.UsageError, match="cannot reach the control plane"):
        cli.register(runtime.agent, args.api, "bob", wait_s=0)


def test_broker_passwords_stay_out_of_messages() -> None:
    from tessera_worker.broker import redact

    assert redact("redis://:s3cret@redis:6379/0") == "redis://:***@redis:6379/0"
    assert redact("redis://user:s3cret@redis:6379/0") == "redis://user:***@redis:6379/0"
    assert redact("filesystem://") == "filesystem://"


def test_a_token_of_another_party_is_refused_before_registering(plane: Plane) -> None:
    """A worker started for bob with alice's token would register as alice's and consume bob's
    queue, where nothing is ever sent: it stops at once instead, registering nothing."""
    api = ControlPlane(str(plane.client.base_url), plane.tokens["alice"], http=plane.client)
    agent = Agent(api, describe=lambda: {}, accelerators=list)
    with pytest.raises(cli.UsageError, match="the token is 'alice''s, not party 'bob''s"):
        cli.register(agent, "http://control-plane", "bob", wait_s=0)
    listed = plane.client.get("/api/v1/workers", headers=ADMIN).json()
    assert listed["count"] == 0


def test_a_broker_that_cannot_be_reached_is_named_without_its_password() -> None:
    from tessera_worker.broker import broker_problem

    said: list[str] = []
    problem = broker_problem("redis://:s3cret@127.0.0.1:1/0", wait_s=1.5, say=said.append)
    assert problem is not None and "cannot use the broker at redis://:***@127.0.0.1:1/0" in problem
    assert said and said[0].startswith("waiting for the broker at redis://:***@127.0.0.1:1/0")
    assert "s3cret" not in problem + "".join(said)
    assert broker_problem("filesystem://") is None


def test_a_bad_confinement_setting_in_the_environment_is_named(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TESSERA_CONFINE_RANKS", "sometimes")
    assert cli.main(["--party", "bob", "--token", "t"]) == 2
    assert "TESSERA_CONFINE_RANKS) is auto, required or off, not 'sometimes'" in (
        capsys.readouterr().err
    )


def test_ranks_are_confined_unless_the_operator_turns_it_off(tmp_path: Path) -> None:
    token = tmp_path / "bob.token"
    token.write_text("t")
    argv = ["--party", "bob", "--token-file", str(token), "--hide-from-ranks", "secrets/db"]
    args = cli.parser().parse_args(argv)
    assert args.confine_ranks == "auto"
    runtime = cli.build_runtime(args, confine_ranks=cli.ranks_confined(args.confine_ranks))
    assert runtime.launch.confine  # this host allows it
    assert runtime.launch.hidden == (str(token), str(Path("secrets/db").absolute()))
    assert not cli.ranks_confined("off")


def test_a_worker_run_as_root_says_what_confinement_leaves_its_ranks(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert cli.ranks_confined("auto")
    said = capsys.readouterr().err
    if os.geteuid() == 0:
        assert "runs as root: its confined ranks still own root's files" in said
        with pytest.raises(cli.UsageError, match="--confine-ranks required, but this worker"):
            cli.ranks_confined("required")
    else:
        assert said == ""
        assert cli.ranks_confined("required")


def test_a_host_that_gives_confined_ranks_no_proc_of_their_own_is_named(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # a host that would not mount a /proc for the namespace (a container whose /proc is
    # partly masked) is not this one: what the probe would find there
    monkeypatch.setattr(cli.confine, "probe", lambda: cli.confine.Probe(None, own_proc=False))
    assert cli.ranks_confined("auto")
    said = capsys.readouterr().err
    assert "would not mount a /proc of their own for confined ranks" in said
    assert "--token-file" in said
