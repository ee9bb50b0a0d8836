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


def _package(path: Path) -> list[str]:
    """The package ``path``'s module belongs to, as a list of names (relative to ``worker/``
    or the checkout)."""
    for top in (ROOT / "worker", ROOT):
        if path.is_relative_to(top):
            return list(path.relative_to(top).parent.parts)
    return list(path.parent.parts)


def imported(path: Path, package: list[str] | None = None) -> Iterator[tuple[int, str]]:
    """Every module ``path`` imports, anywhere in it (functions included), with its line:
    relative imports resolved (from ``package``, else where ``path`` lies), and names given to
    ``importlib.import_module`` or ``__import__`` as constants."""
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                within = _package(path) if package is None else package
                parent = within[: len(within) - node.level + 1]
                base = ".".join([*parent, *([node.module] if node.module else [])])
            if not base:
                continue
            # ``from tessera_ml.algorithms import ddp`` names the package in the alias
            yield node.lineno, base
            for alias in node.names:
                yield node.lineno, f"{base}.{alias.name}"
        elif (
            isinstance(node, ast.Call)
            and _called(node.func) in {"import_module", "__import__"}
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            yield node.lineno, node.args[0].value


def _called(func: ast.expr) -> str:
    if isinstance(func, ast.Attribute):
        return func.attr
    return func.id if isinstance(func, ast.Name) else ""


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


def settings_read(folder: Path) -> list[str]:
    """``file:line`` of each place in ``folder`` that names a ``TESSERA_*`` variable or reads
    the environment at all (``os.environ``, ``os.getenv``, ``os.environb``)."""
    found = []
    for path in sorted(folder.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names_setting = (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and node.value.startswith("TESSERA_")
            )
            reads_environment = (
                isinstance(node, ast.Attribute) and node.attr in {"environ", "environb", "getenv"}
            ) or (isinstance(node, ast.alias) and node.name in {"environ", "environb", "getenv"})
            if names_setting or reads_environment:
                found.append(f"{path}:{getattr(node, 'lineno', 0)}")
    return found


def test_algorithm_code_imports_no_measuring_tool_and_reads_no_setting() -> None:
    found = [offence for tool in MEASURING_TOOLS for offence in offences(ALGORITHMS, tool)]
    assert found == []
    assert settings_read(ALGORITHMS) == []


def test_the_checks_see_imports_inside_functions(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("def f():\n    from tessera_api.models import Party\n    import os\n")
    assert offences(tmp_path, "tessera_api") == [f"{module}:2"]
    assert offences(tmp_path, "tessera_ap") == []


def test_the_checks_see_relative_and_dynamic_imports(tmp_path: Path) -> None:
    sources = {
        "from ...pace import Pace\n": "tessera_ml.pace",
        "from ... import netns\n": "tessera_ml.netns",
        "from .. import ddp\n": "tessera_ml.algorithms.ddp",
        "import importlib\nimportlib.import_module('tessera_ml.bench.turns')\n": "tessera_ml.bench",
        "__import__('tessera_ml.worlds')\n": "tessera_ml.worlds",
    }
    module = tmp_path / "m.py"
    for source, refused in sources.items():
        module.write_text(source)
        # as if it lay in an algorithm's folder
        names = [name for _, name in imported(module, ["tessera_ml", "algorithms", "hier_sync"])]
        assert any(n == refused or n.startswith(refused + ".") for n in names), (source, names)
    assert _package(ALGORITHMS / "hier_sync" / "train.py") == [
        "tessera_ml",
        "algorithms",
        "hier_sync",
    ]


def test_the_checks_see_every_way_of_reading_the_environment(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    for source in (
        "import os\nos.environ.get('X')\n",
        "import os\nos.getenv('X')\n",
        "from os import environ\n",
        "x = 1\nNAME = 'TESSERA_MODE'\n",
    ):
        module.write_text(source)
        assert settings_read(tmp_path) != [], source
    module.write_text("import os\nos.path.join('a', 'b')\n")
    assert settings_read(tmp_path) == []
