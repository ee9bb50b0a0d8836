"""Communicators: the interface, the torch.distributed implementation, byte accounting."""

from tessera_ml.comm.base import ByteStats, Communicator, Group, Work, nbytes
from tessera_ml.comm.local import LocalCommunicator, LocalWorld, run_local

__all__ = [
    "ByteStats",
    "Communicator",
    "Group",
    "LocalCommunicator",
    "LocalWorld",
    "Work",
    "nbytes",
    "run_local",
]
