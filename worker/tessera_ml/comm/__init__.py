"""Communicators: the interface, the torch.distributed implementation, byte accounting."""

from tessera_ml.comm.base import ByteStats, Communicator, Group, Work, nbytes

__all__ = ["ByteStats", "Communicator", "Group", "Work", "nbytes"]
