"""Settings read from the environment (``MUSTER_*``) and the files under ``$MUSTER_HOME``.

Paths are computed from ``home`` on access so a test that sets ``MUSTER_HOME`` (or passes
``--home``) gets a fully separate world: database, credentials, logs, volumes, artifacts.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from muster import home
from muster.home import read_credentials

__all__ = ["Settings", "read_credentials", "read_server_file", "settings"]


class Settings(BaseSettings):
    """Client and server settings. Every field can be set as ``MUSTER_<NAME>``."""

    model_config = SettingsConfigDict(env_prefix="MUSTER_", extra="ignore")

    home: Path = Field(
        default_factory=lambda: home.home_dir(home.DEFAULT_HOME),
        description="Directory holding the database, credentials, logs, volumes and caches.",
    )
    server: str | None = Field(
        default=None, description="URL of the Muster server, e.g. http://127.0.0.1:7070."
    )
    token: str | None = Field(default=None, description="Bearer token for the server.")
    store: str | None = Field(
        default=None,
        description="SQLAlchemy URL of the store; default sqlite:///$MUSTER_HOME/muster.db.",
    )
    max_request_bytes: int = Field(
        default=3 * 1024 * 1024,
        gt=0,
        description="Largest request body the API server reads (3 MiB, as kube-apiserver); larger is a 413.",
    )
    max_object_bytes: int = Field(
        default=1536 * 1024,
        gt=0,
        description="Largest object the store keeps, as JSON (1.5 MiB, as etcd); a larger write is a 413.",
    )
    context: str | None = Field(
        default=None, description="The context of the config file to use instead of its current-context."
    )
    config: Path | None = Field(
        default=None,
        description="The client config file (contexts, servers, tokens); default $MUSTER_HOME/config.",
    )
    namespace_default_queue: str = Field(
        default="default",
        description="The ClusterQueue a new Namespace's `default` LocalQueue points at ('' for none); "
        "a Namespace's annotation muster.dev/default-cluster-queue overrides it.",
    )
    audit_retention_days: float = Field(
        default=30.0, gt=0, description="Days the server keeps audit records (older ones are deleted)."
    )
    # What a long-running server keeps (docs/operations.md, "Retention").
    event_ttl_seconds: float = Field(
        default=3600.0,
        ge=0,
        description="Seconds an Event is kept after its last occurrence (0: forever); "
        "Kubernetes' --event-ttl.",
    )
    events_per_object: int = Field(
        default=100, ge=0, description="Events kept per object, the most recent ones (0: no limit)."
    )
    finished_pod_limit: int = Field(
        default=12500,
        ge=0,
        description="Finished pods of finished jobs kept before the oldest are deleted (0: keep all); "
        "Kubernetes' --terminated-pod-gc-threshold.",
    )
    cache_mutation_detector: bool = Field(
        default=False,
        description="Keep the JSON of every object the control plane caches and log an error for one "
        "changed in place (a bug: cached objects are shared); for tests, as client-go's "
        "KUBE_CACHE_MUTATION_DETECTOR. Costs an encode per write.",
    )
    # The server's defaults for `muster doctor` (None: the doctor's own, see docs/operations.md).
    doctor_idle_threshold: float | None = Field(
        default=None, description="Percent utilisation under which an allocated GPU counts as idle (5)."
    )
    doctor_idle_minutes: float | None = Field(
        default=None, description="Minutes an allocated GPU must stay idle to be reported (10)."
    )
    doctor_pending_minutes: float | None = Field(
        default=None, description="Minutes a Workload may wait for admission before it is reported (30)."
    )
    doctor_restarts: int | None = Field(
        default=None, description="Gang restarts of an active job that make a restart loop (3)."
    )
    doctor_idle_pool_cost: float | None = Field(
        default=None, description="Idle cost per hour of a NodePool above which muster doctor reports it."
    )
    cost_retention_days: float = Field(
        default=90.0, gt=0, description="How long the cost ledger keeps a finished pod's or node's record."
    )
    python: Path | None = Field(
        default=None,
        description="The Python a local pod runs as `python`: an interpreter or a virtual environment "
        "(default: the server's own virtual environment when it runs in one); `muster up --python`.",
    )
    shim_zygote: bool = Field(
        default=True,
        description="Start container shims by forking one pre-loaded process (a zygote) instead of "
        "a Python interpreter per container (docs/runtime-local.md, 'The shim').",
    )
    pod_records: Literal["auto", "memory", "disk"] = Field(
        default="auto",
        description="Where the local runtime keeps its records of the pods it runs, which must "
        "outlive the server's process but not the machine: 'memory' (a private directory under "
        "/dev/shm), 'disk' (under the home), or 'auto': memory for root and system users, whose "
        "/dev/shm files are not removed at logout, else disk (docs/runtime-local.md, 'Files and "
        "re-adoption').",
    )

    @property
    def db_path(self) -> Path:
        return self.home / "muster.db"

    @property
    def store_url(self) -> str:
        return self.store or f"sqlite:///{self.db_path}"

    @property
    def credentials_path(self) -> Path:
        return self.home / home.CREDENTIALS

    @property
    def config_path(self) -> Path:
        """The client config file of contexts (``muster config``), mode 0600."""
        return self.config or self.home / home.CONFIG

    @property
    def server_file(self) -> Path:
        """Written by ``muster up``: the URL it listens on, so the CLI finds it."""
        return self.home / home.SERVER_FILE

    @property
    def logs_dir(self) -> Path:
        return self.home / "logs"

    @property
    def volumes_dir(self) -> Path:
        return self.home / "volumes"

    @property
    def checkpoints_dir(self) -> Path:
        return self.home / "checkpoints"

    @property
    def artifacts_dir(self) -> Path:
        return self.home / "artifacts"

    @property
    def cache_dir(self) -> Path:
        return self.home / "cache"


def settings(**overrides: object) -> Settings:
    """Fresh settings from the environment, with explicit overrides (CLI flags) on top."""
    clean = {k: v for k, v in overrides.items() if v is not None}
    return Settings(**clean)  # type: ignore[arg-type]


def read_server_file(s: Settings) -> dict[str, str] | None:
    """The ``server.json`` a running ``muster up`` wrote, or None."""
    return home.read_server_file(s.home)
