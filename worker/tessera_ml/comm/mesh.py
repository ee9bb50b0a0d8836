"""The communicator of a platform job: gloo or NCCL inside a party, TLS between parties.

PyTorch's gloo has no encryption, and NCCL is for one organisation's GPUs, so a job whose ranks
belong to several parties is wired as:

- the ranks of one party form their own ``torch.distributed`` world (gloo, or NCCL on GPUs),
  meeting under the prefix ``party/<name>/`` in a store that only the party can reach, served
  by its lowest rank (``tessera_ml.comm.world``; the attempt's store when the job has one
  party);
- every pair of ranks of different parties is joined by two TLS 1.3 connections (one per
  direction, ``links``), each end proving with its certificate the party the plan gives it and
  the attempt;
- point-to-point messages take the party's world or the link, whichever joins the two ranks;
- a collective over a group inside one party runs on that party's world; over a group that
  spans parties it runs as a ring of point-to-point messages (reduce-scatter then all-gather),
  on the links where the ring crosses parties.

A job of one party is exactly a ``torch.distributed`` world. Byte accounting is the one of
``Communicator``: exact tensor bytes per peer, ring-model bytes per group.

The communicator's operations live in ``mesh_communicator``, how a rank builds the mesh in
``mesh_connect``; this module is where the rest of the code imports both from.
"""

from __future__ import annotations

from tessera_ml.comm.mesh_communicator import P2P_TAG, MeshCommunicator
from tessera_ml.comm.mesh_connect import HELLO, connect_mesh
from tessera_ml.comm.mesh_groups import group_tag

__all__ = ["HELLO", "P2P_TAG", "MeshCommunicator", "connect_mesh", "group_tag"]
