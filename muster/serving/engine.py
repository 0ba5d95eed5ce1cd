"""What an engine and the model server exchange, without torch: a generation request, the
engine's counters, and the byte tokenizer (so ``--echo`` runs without importing torch)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["EOS", "EngineStats", "GenRequest", "detokenize", "tokenize"]

EOS = 256


def tokenize(text: str) -> list[int]:
    return list(text.encode("utf-8"))


def detokenize(tokens: list[int]) -> str:
    return bytes(t for t in tokens if t < 256).decode("utf-8", errors="replace")


@dataclass
class GenRequest:
    """One generation (or embedding) asked of the engine. ``emit`` is called on the engine's
    thread with each event: ``("token", text)``, ``("done", info)`` or ``("error", message)``."""

    prompt: list[int]
    max_tokens: int
    temperature: float
    emit: Callable[[str, Any], None]
    embed: bool = False
    seed: int | None = None
    cancelled: threading.Event = field(default_factory=threading.Event)
    # the engine's state of it (its KV per layer, logits, sampler: the engine's own types)
    kv: Any = None
    generated: list[int] = field(default_factory=list)
    cached_tokens: int = 0
    next_logits: Any = None
    enqueued: float = field(default_factory=time.monotonic)
    generator: Any = None


@dataclass
class EngineStats:
    running: int = 0
    waiting: int = 0
    requests: int = 0
    prompt_tokens: int = 0
    generation_tokens: int = 0
    prefix_queries: int = 0  # prompt tokens looked up in the prefix cache
    prefix_hits: int = 0  # of those, found
    cache_usage: float = 0.0
