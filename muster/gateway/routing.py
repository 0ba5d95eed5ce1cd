"""Which replica gets a request: the load-balancing strategies of ``spec.loadBalancing``.

Every strategy picks among the replicas that are ready, not draining and below
``containerConcurrency``; it sees each one's in-flight requests as counted at the gateway.

* ``LeastLoad`` (KubeAI's default): fewest in-flight requests; ties go round the replicas.
* ``PrefixHash`` (KubeAI's CHWBL): the request's key (the first ``prefixCharLength`` characters
  of the first user message, or of the prompt) is hashed onto a ring holding ``replication``
  points per replica; walking clockwise from it, the first replica whose load stays within
  ``meanLoadFactor`` percent of the mean, ``(load + 1) <= factor * (total + 1) / replicas``,
  takes it; if none does, the first one on the ring.
* ``PrefixLoad`` (Muster's default): one estimate of the work ahead of the request on each
  replica, in prompt characters: the part of its prompt the replica has not seen (the gateway
  remembers, per replica, the 64-character blocks of the prompts it sent there, chained-hashed
  as the engines' prefix caches name them, least recently used forgotten) plus, for every
  request the replica is already busy with, the uncached work a request has needed lately.
  The cheapest replica wins: affinity while the cache saves more than the queue costs, the
  shorter queue once it does not.
* ``RoundRobin``: in turn (the baseline of the benchmarks).
"""

from __future__ import annotations

import bisect
import hashlib
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

__all__ = [
    "PREFIX_BLOCK",
    "Chwbl",
    "Replica",
    "RequestKey",
    "Router",
    "prefix_blocks",
    "request_key",
]

PREFIX_BLOCK = 64  # characters per block of the gateway's prefix index (about 16 tokens)
_MAX_BLOCKS = 256
_INDEX_BLOCKS = 16384  # blocks remembered per replica
_EWMA = 0.1


class Replica(Protocol):
    """What routing needs to know of a replica."""

    name: str
    inflight: int


@dataclass(frozen=True)
class RequestKey:
    """The parts of a request routing looks at: the text the engine will see first (the prompt,
    or the chat messages in order) and the CHWBL hash key."""

    text: str = ""
    hash_key: str = ""


def request_key(body: dict[str, Any], prefix_chars: int, adapter: str = "") -> RequestKey:
    """The routing key of an OpenAI request body (completions, chat, embeddings)."""
    messages = body.get("messages")
    if isinstance(messages, list):
        parts, first_user = [], ""
        for m in messages:
            if not isinstance(m, dict):
                continue
            content = _content(m.get("content"))
            parts.append(f"{m.get('role', '')}:{content}\n")
            if not first_user and m.get("role") == "user":
                first_user = content
        return RequestKey("".join(parts), adapter + first_user[:prefix_chars])
    prompt = body.get("prompt", body.get("input", ""))
    if isinstance(prompt, list):
        prompt = prompt[0] if prompt and isinstance(prompt[0], str) else ""
    text = prompt if isinstance(prompt, str) else ""
    return RequestKey(text, adapter + text[:prefix_chars])


def prefix_blocks(text: str) -> list[bytes]:
    """Chained hashes of the text's whole 64-character blocks (at most 256)."""
    out: list[bytes] = []
    h = b""
    data = text.encode("utf-8", errors="replace")
    step = PREFIX_BLOCK
    for i in range(0, min(len(data) - len(data) % step, step * _MAX_BLOCKS), step):
        h = hashlib.blake2b(h + data[i : i + step], digest_size=8).digest()
        out.append(h)
    return out


class Chwbl:
    """Consistent hashing with bounded loads over a fixed set of replica names."""

    def __init__(self, names: Sequence[str], replication: int = 256, load_factor: float = 1.25) -> None:
        self.load_factor = load_factor
        points = [(_hash(f"{name}#{i}"), name) for name in names for i in range(replication)]
        points.sort()
        self._hashes = [p[0] for p in points]
        self._names = [p[1] for p in points]
        self.names = tuple(names)

    def pick(self, key: str, replicas: Sequence[Replica]) -> Replica | None:
        if not replicas or not self._hashes:
            return None
        by_name = {r.name: r for r in replicas}
        total = sum(r.inflight for r in replicas)
        bound = self.load_factor * (total + 1) / len(replicas)
        start = bisect.bisect(self._hashes, _hash(key)) % len(self._hashes)
        first: Replica | None = None
        seen: set[str] = set()
        for i in range(len(self._hashes)):
            name = self._names[(start + i) % len(self._names)]
            if name in seen:
                continue
            seen.add(name)
            replica = by_name.get(name)
            if replica is None:
                continue
            if first is None:
                first = replica
            if total == 0 or replica.inflight + 1 <= bound:
                return replica
            if len(seen) == len(self.names):
                break
        return first


class Router:
    """Picks replicas for one revision of a service with one strategy."""

    def __init__(
        self,
        strategy: str,
        replication: int = 256,
        mean_load_factor: int = 125,
        index_blocks: int = _INDEX_BLOCKS,
    ) -> None:
        self.strategy = strategy
        self.replication = replication
        self.load_factor = mean_load_factor / 100.0
        self.index_blocks = index_blocks
        self._turn = 0
        self._ring: Chwbl | None = None
        self._index: dict[str, OrderedDict[bytes, None]] = {}
        self.work_per_request = float(PREFIX_BLOCK)  # EWMA of uncached characters per request

    def pick(self, key: RequestKey, replicas: Sequence[Replica]) -> Replica | None:
        """The replica for a request among ``replicas`` (all able to take it now), or None."""
        if not replicas:
            return None
        if len(replicas) == 1:
            chosen = replicas[0]
            if self.strategy == "PrefixLoad":
                self._remember(chosen.name, key, prefix_blocks(key.text))
            return chosen
        if self.strategy == "RoundRobin":
            self._turn += 1
            return replicas[self._turn % len(replicas)]
        if self.strategy == "PrefixHash":
            if self._ring is None or not {r.name for r in replicas} <= set(self._ring.names):
                self.set_members([r.name for r in replicas])
            assert self._ring is not None
            return self._ring.pick(key.hash_key, replicas)
        if self.strategy == "PrefixLoad":
            return self._prefix_load(key, replicas)
        return self._least_load(replicas)

    def set_members(self, names: Sequence[str]) -> None:
        """The replicas in routing (ready, whether busy or not): PrefixHash's ring holds these, so
        a replica at its concurrency limit is skipped on the walk rather than moving the keys."""
        members = tuple(sorted(names))
        if self._ring is None or self._ring.names != members:
            self._ring = (
                Chwbl(members, self.replication, self.load_factor) if self.strategy == "PrefixHash" else None
            )

    def forget(self, name: str) -> None:
        """A replica left: drop what was remembered about it."""
        self._index.pop(name, None)
        if self._ring is not None and name in self._ring.names:
            self._ring = None

    def cached_chars(self, name: str, key: RequestKey) -> int:
        """How much of the request's text the gateway believes replica ``name`` has cached."""
        return self._matched(name, prefix_blocks(key.text)) * PREFIX_BLOCK

    # -- strategies ------------------------------------------------------------------------------

    def _least_load(self, replicas: Sequence[Replica]) -> Replica:
        self._turn += 1
        n = len(replicas)
        best = replicas[self._turn % n]
        for i in range(1, n):
            r = replicas[(self._turn + i) % n]
            if r.inflight < best.inflight:
                best = r
        return best

    def _prefix_load(self, key: RequestKey, replicas: Sequence[Replica]) -> Replica:
        blocks = prefix_blocks(key.text)
        length = len(key.text)
        self._turn += 1
        n = len(replicas)
        best: Replica | None = None
        best_cost = best_uncached = 0.0
        for i in range(n):
            r = replicas[(self._turn + i) % n]
            uncached = max(0, length - self._matched(r.name, blocks) * PREFIX_BLOCK)
            cost = uncached + r.inflight * self.work_per_request
            if best is None or cost < best_cost or (cost == best_cost and r.inflight < best.inflight):
                best, best_cost, best_uncached = r, cost, uncached
        assert best is not None
        self.work_per_request += _EWMA * (max(best_uncached, PREFIX_BLOCK) - self.work_per_request)
        self._remember(best.name, key, blocks)
        return best

    def _matched(self, name: str, blocks: list[bytes]) -> int:
        index = self._index.get(name)
        if not index:
            return 0
        matched = 0
        for h in blocks:
            if h not in index:
                break
            matched += 1
        return matched

    def _remember(self, name: str, key: RequestKey, blocks: list[bytes]) -> None:
        if self.strategy != "PrefixLoad" or not blocks:
            return
        index = self._index.setdefault(name, OrderedDict())
        for h in blocks:
            if h in index:
                index.move_to_end(h)
            else:
                index[h] = None
        while len(index) > self.index_blocks:
            index.popitem(last=False)


def _hash(text: str) -> int:
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big")


def _content(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""
