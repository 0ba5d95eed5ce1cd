"""CacheEntry: the recorded outputs of one successful workflow task run (DESIGN §8, step caching).

The Workflow controller writes one per cache key (SHA-256 over the task definition, its input
parameter values, its input artifacts' content hashes and ``cache.version``), named by the key
in the workflow's namespace, and reads it back to reuse the outputs of an identical run. Like
Argo's memoization ConfigMaps they are ordinary objects: they survive restarts with the rest of
the store, ``muster get cacheentries`` lists them and deleting one invalidates it.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from muster.api.base import MusterModel, Object
from muster.api.workflow import TaskOutputs

__all__ = ["CacheEntry", "CacheEntrySpec"]


class CacheEntrySpec(MusterModel):
    task: str = Field(min_length=1, description="The run that was recorded, as <workflow>/<task node>.")
    version: str = Field(default="", description="The task's cache.version when it was recorded.")
    saved_at: str = Field(description="When it was recorded (UTC); cache.maxAge counts from here.")
    outputs: TaskOutputs = Field(
        default_factory=TaskOutputs, description="Output parameters and artifacts (content digests)."
    )


class CacheEntry(Object):
    """The outputs of a successful task run, reused by identical runs (named by its cache key)."""

    KIND: ClassVar[str] = "CacheEntry"
    kind: Literal["CacheEntry"] = Field(default="CacheEntry", description="Always CacheEntry.")
    spec: CacheEntrySpec = Field(description="What was recorded.")
