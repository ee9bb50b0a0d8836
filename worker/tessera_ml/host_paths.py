"""Files that a job's configuration names on a party's host.

A job's configuration comes from whoever created the job, possibly another party. On a worker,
a file it names must therefore lie in a folder that the worker's operator set aside for jobs:
the data root, and for weights also the checkpoints folder. A relative path is taken under the
first of these folders. Outside a worker (a library call, a benchmark's world without a data
root) a path is taken as given.

Imports without torch.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from tessera_ml.errors import CodedError


def host_path(
    target: str,
    roots: Sequence[Path],
    what: str,
    error: type[CodedError] = CodedError,
) -> Path:
    """``target`` as a file of this host, for the ``what`` of a job. With ``roots`` it must lie
    inside one of them, named without ``..``; the check is on the name, so a link that the
    operator put inside a root may lead elsewhere. Refusals are ``error`` with the code
    ``path_outside_root`` (or ``no_data_root`` for a relative path without roots)."""
    path = Path(target)
    if not roots:
        path = path.expanduser()
        if not path.is_absolute():
            raise error("no_data_root", f"{what}: relative path {target!r} needs a data root")
        return path
    folders = [Path(os.path.abspath(root)) for root in roots]
    if ".." in path.parts:
        raise error("path_outside_root", f"{what}: {target!r} may not name a parent folder (..)")
    if not path.is_absolute():
        return folders[0] / path
    path = Path(os.path.abspath(path))
    if any(path.is_relative_to(folder) for folder in folders):
        return path
    raise error("path_outside_root", f"{what}: {target!r} is outside the folders this worker reads")
