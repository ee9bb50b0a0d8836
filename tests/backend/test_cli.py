"""The ``tessera`` command's own dispatch: what it says before any subcommand runs."""

from __future__ import annotations

import pytest

from tessera_api.cli import COMMANDS, main


def test_no_command_is_a_usage_error_naming_every_command(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main([]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert "a command is required" in err
    for name in COMMANDS:
        assert f"  {name} " in err


def test_help_is_printed_on_stdout_and_succeeds(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("usage: tessera COMMAND") and err == ""


def test_an_unknown_command_is_named(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve"]) == 2
    assert "unknown command 'serve'" in capsys.readouterr().err
