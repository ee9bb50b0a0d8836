"""Imports go one way: the worker never reaches into the control plane, an algorithm's package
never into another's (shared pieces live in ``tessera_ml`` itself), and algorithm code never
into the measuring tools: a platform job runs exactly the code a benchmark measures."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WORKER = ROOT / "worker" / "tessera_worker"
ALGORITHMS = ROOT / "worker" / "tessera_ml" / "algorithms"


def imported(path: Path) -> Iterator[tuple[int, str]]:
    """Every module ``path`` imports, anywhere in it (functions included), with its line."""
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            # ``from tessera_ml.algorithms import ddp`` names the package in the alias
            yield node.lineno, node.module
            for alias in node.names:
                yield node.lineno, f"{node.module}.{alias.name}"


def offences(folder: Path, refused: str) -> list[str]:
    """``file:line`` of each import of ``refused`` (or of a module under it) in ``folder``."""
    found = {
        (path, line)
        for path in folder.rglob("*.py")
        for line, name in imported(path)
        if name == refused or name.startswith(refused + ".")
    }
    return [f"{path}:{line}" for path, line in sorted(found)]


def test_the_worker_never_imports_the_control_plane() -> None:
    assert offences(WORKER, "tessera_api") == []


def test_no_algorithm_imports_another() -> None:
    packages = sorted(p for p in ALGORITHMS.iterdir() if (p / "__init__.py").exists())
    assert len(packages) >= 6
    found = [
        offence
        for package in packages
        for other in packages
        if other != package
        for offence in offences(package, f"tessera_ml.algorithms.{other.name}")
    ]
    assert found == []


MEASURING_TOOLS = (
    "tessera_ml.bench",
    "tessera_ml.netns",
    "tessera_ml.netcapture",
    "tessera_ml.pace",
    "tessera_ml.worlds",
)


def test_algorithm_code_imports_no_measuring_tool_and_reads_no_setting() -> None:
    found = [offence for tool in MEASURING_TOOLS for offence in offences(ALGORITHMS, tool)]
    assert found == []
    settings = [
        f"{path}:{node.lineno}"
        for path in sorted(ALGORITHMS.rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and node.value.startswith("TESSERA_")
    ]
    assert settings == []


def test_the_checks_see_imports_inside_functions(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("def f():\n    from tessera_api.models import Party\n    import os\n")
    assert offences(tmp_path, "tessera_api") == [f"{module}:2"]
    assert offences(tmp_path, "tessera_ap") == []
