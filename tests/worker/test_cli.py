"""``tessera worker`` answers bad input with a message and exit code 2."""

from __future__ import annotations

import pytest

from tessera_worker import cli


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--token", "t"], "--party is required"),
        (["--party", "Bob!", "--token", "t"], "'Bob!' is not a party slug"),
        (["--party", "bob"], "a party token is required"),
        (["--party", "bob", "--token-file", "/nonexistent"], "cannot read --token-file"),
        (["--party", "bob", "--token", "t", "--allow-custom", "os;rm"], "--allow-custom 'os;rm'"),
        (["--party", "bob", "--token", "t", "--api", "ftp://x"], "--api must be an http(s) URL"),
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


def test_worker_says_when_the_control_plane_is_unreachable(
    capsys: pytest.CaptureFixture[str],
) -> None:
    args = cli.parser().parse_args(
        ["--party", "bob", "--token", "t", "--api", "http://127.0.0.1:9"]
    )
    runtime = cli.build_runtime(args)
    with pytest.raises(cli.UsageError, match="cannot reach the control plane"):
        cli.register(runtime.agent, args.api, wait_s=0)


def test_broker_passwords_stay_out_of_messages() -> None:
    from tessera_worker.broker import redact

    assert redact("redis://:s3cret@redis:6379/0") == "redis://:***@redis:6379/0"
    assert redact("redis://user:s3cret@redis:6379/0") == "redis://user:***@redis:6379/0"
    assert redact("filesystem://") == "filesystem://"
