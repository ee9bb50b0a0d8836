"""The launch description a task receives from the control plane, and what each rank is given.

``TaskLaunch`` mirrors ``GET /api/v1/tasks/{task_id}`` (docs/worker-protocol.md); ``RankLaunch``
is the file the launcher writes for one rank process (``python -m tessera_worker.rank``).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

ID = r"^[A-Za-z0-9][A-Za-z0-9_-]*$"

TERMINAL = frozenset({"succeeded", "failed", "cancelled"})


class Rendezvous(BaseModel):
    model_config = ConfigDict(extra="ignore")

    host: str
    port: int = Field(ge=1, le=65535)
    secret: str = Field(default="", repr=False)


class HostedRank(BaseModel):
    model_config = ConfigDict(extra="ignore")

    rank: int = Field(ge=0)
    device: str = "cpu"


class ResumePoint(BaseModel):
    model_config = ConfigDict(extra="ignore")

    step: int
    uri: str


class TaskLaunch(BaseModel):
    """What one task (one party's worker in one attempt) must run."""

    model_config = ConfigDict(extra="ignore")

    # they name this host's folders of the task and the job: a name, never a path
    task_id: str = Field(pattern=ID)
    job_id: str = Field(pattern=ID)
    attempt: int = 1
    attempt_id: str = ""
    approved: bool = False
    algorithm: str
    config: dict[str, Any] = Field(default_factory=dict)
    plan: list[dict[str, Any]]
    world_size: int = Field(ge=1)
    ranks: list[HostedRank]
    backend: str = "gloo"
    rendezvous: Rendezvous | None = None
    resume_from: ResumePoint | None = None
    status: str = "pending"

    @property
    def hosts_rank_zero(self) -> bool:
        return any(r.rank == 0 for r in self.ranks)

    @property
    def hosts_whole_party(self) -> bool:
        """Whether this task runs every rank the plan gives its party."""
        if not self.ranks:
            return False
        party, here = self.party_of(self.ranks[0].rank), {r.rank for r in self.ranks}
        return all(int(s["rank"]) in here for s in self.plan if s.get("party") == party)

    def party_of(self, rank: int) -> str:
        for slot in self.plan:
            if int(slot.get("rank", -1)) == rank:
                return str(slot.get("party", "?"))
        return "?"


class RankLaunch(BaseModel):
    """Everything one rank process needs. The file holding it is readable by the worker's user
    only; it carries the task's own credentials (never the party's token), which stop working
    when the task ends."""

    rank: int
    world_size: int
    device: str
    backend: str
    store_host: str
    store_port: int
    store_fd: int | None = None
    """Rank 0's copy of the descriptor of the socket its worker bound to ``store_port`` when it
    published the port (``tessera_ml.ports.reserve_port``); the rank serves the store on it."""
    store_secret: str = Field(default="", repr=False)
    address: str = "127.0.0.1"
    """Where this rank accepts links from other parties' ranks (the worker's address)."""
    attempt_id: str = ""
    tls_dir: str | None = None
    task_token: str | None = Field(default=None, repr=False)
    spool_path: str | None = None
    """Where the rank leaves the reports the control plane did not take before it ended."""
    algorithm: str
    entry_point: str
    config: dict[str, Any]
    plan: list[dict[str, Any]]
    job_id: str
    attempt: int
    task_id: str
    api_url: str | None = None
    api_ca_file: str | None = None
    """The authority the control plane's HTTPS certificate is checked against (None: system)."""
    checkpoint_dir: str | None = None
    share_checkpoints: bool = False
    """Whether the rank uploads each checkpoint's file after recording it."""
    resume_from: str | None = None
    data_root: str | None = None
    home: str | None = None
    """The worker's home, named ``$TESSERA_HOME`` in what the rank's logs send out."""
    rendezvous_timeout_s: float = 120.0
    collective_timeout_s: float = 300.0
