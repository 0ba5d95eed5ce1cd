"""A tiny decoder-only transformer with random weights, a byte tokenizer, a KV prefix cache and
an engine that interleaves requests one step at a time.

* Tokens are the prompt's UTF-8 bytes, so any text works and nothing is downloaded. Output is
  sampled from the printable ASCII range so that replies are readable (if meaningless).
* The weights come from a fixed seed: every replica of a service computes the same function.
* The prefix cache keeps the keys and values of every full block of :data:`BLOCK` tokens it
  computed, named by a chained hash of the tokens up to the block's end (as vLLM's automatic
  prefix caching does), least recently used first out. A prompt whose first blocks are cached
  computes only the rest: that is what prefix-aware routing buys.
* The engine runs on one thread and gives each running request one step in turn (the whole
  prefill, then one token), up to ``max_running`` at once; the others wait in FIFO order. Its
  counters are the ``vllm:*`` gauges a router reads.
"""

from __future__ import annotations

import hashlib
import queue
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from muster.serving.engine import EOS, EngineStats, GenRequest, detokenize, tokenize

__all__ = ["BLOCK", "Engine", "ModelConfig", "PrefixCache", "TinyLM"]

BLOCK = 16  # tokens per prefix-cache block
_PRINTABLE = torch.arange(32, 127)
_NOTHING: Any = object()


@dataclass(frozen=True)
class ModelConfig:
    layers: int = 4
    d_model: int = 128
    heads: int = 4
    d_ff: int = 512
    max_context: int = 4096
    vocab: int = 257  # 256 bytes + EOS
    seed: int = 0


# KV of one sequence: per layer a (keys, values) pair, each [heads, tokens, head_dim].
KV = list[tuple[torch.Tensor, torch.Tensor]]


class _Block(nn.Module):
    def __init__(self, c: ModelConfig) -> None:
        super().__init__()
        self.heads = c.heads
        self.norm1 = nn.LayerNorm(c.d_model)
        self.qkv = nn.Linear(c.d_model, 3 * c.d_model)
        self.out = nn.Linear(c.d_model, c.d_model)
        self.norm2 = nn.LayerNorm(c.d_model)
        self.ff = nn.Sequential(nn.Linear(c.d_model, c.d_ff), nn.GELU(), nn.Linear(c.d_ff, c.d_model))

    def forward(
        self, x: torch.Tensor, past: tuple[torch.Tensor, torch.Tensor] | None
    ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        n, d = x.shape
        hd = d // self.heads
        q, k, v = self.qkv(self.norm1(x)).split(d, dim=-1)
        q, k, v = (t.view(n, self.heads, hd).transpose(0, 1) for t in (q, k, v))
        if past is not None:
            k = torch.cat([past[0], k], dim=1)
            v = torch.cat([past[1], v], dim=1)
        total = k.shape[1]
        # causal over the new tokens; every cached token is visible to all of them
        mask = torch.ones(n, total, dtype=torch.bool).tril(diagonal=total - n)
        att = nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        x = x + self.out(att.transpose(0, 1).reshape(n, d))
        x = x + self.ff(self.norm2(x))
        return x, (k, v)


class TinyLM(nn.Module):
    def __init__(self, c: ModelConfig) -> None:
        super().__init__()
        torch.manual_seed(c.seed)
        self.config = c
        self.embed = nn.Embedding(c.vocab, c.d_model)
        self.pos = nn.Embedding(c.max_context, c.d_model)
        self.blocks = nn.ModuleList(_Block(c) for _ in range(c.layers))
        self.norm = nn.LayerNorm(c.d_model)
        self.head = nn.Linear(c.d_model, c.vocab)
        self.eval()

    @torch.inference_mode()
    def forward(self, tokens: list[int], past: KV | None) -> tuple[torch.Tensor, torch.Tensor, KV]:
        """Logits of the last token, the final hidden states and the KV of everything so far."""
        start = past[0][0].shape[1] if past else 0
        if start + len(tokens) > self.config.max_context:
            raise ValueError(f"context of {start + len(tokens)} tokens exceeds {self.config.max_context}")
        ids = torch.tensor(tokens)
        x = self.embed(ids) + self.pos(torch.arange(start, start + len(tokens)))
        kv: KV = []
        for i, block in enumerate(self.blocks):
            x, layer_kv = block(x, past[i] if past else None)
            kv.append(layer_kv)
        hidden = self.norm(x)
        return self.head(hidden[-1]), hidden, kv


class PrefixCache:
    """KV blocks of computed prompts by chained block hash, least recently used evicted."""

    def __init__(self, capacity_blocks: int) -> None:
        self.capacity = capacity_blocks
        self._blocks: OrderedDict[bytes, KV] = OrderedDict()

    @staticmethod
    def hashes(tokens: list[int]) -> list[bytes]:
        out, h = [], b""
        for i in range(0, len(tokens) - len(tokens) % BLOCK, BLOCK):
            h = hashlib.blake2b(h + bytes(tokens[i : i + BLOCK]), digest_size=16).digest()
            out.append(h)
        return out

    def lookup(self, hashes: list[bytes]) -> tuple[int, KV | None]:
        """Cached blocks matching the prompt's first ``n`` blocks: (n, their KV joined)."""
        found: list[KV] = []
        for h in hashes:
            block = self._blocks.get(h)
            if block is None:
                break
            self._blocks.move_to_end(h)
            found.append(block)
        if not found:
            return 0, None
        layers = len(found[0])
        joined = [
            (torch.cat([b[i][0] for b in found], dim=1), torch.cat([b[i][1] for b in found], dim=1))
            for i in range(layers)
        ]
        return len(found), joined

    def insert(self, hashes: list[bytes], kv: KV, first: int) -> None:
        """Keep blocks ``first..`` of a sequence whose KV (from token 0) is ``kv``."""
        if self.capacity <= 0:
            return
        for b in range(first, len(hashes)):
            if hashes[b] in self._blocks:
                self._blocks.move_to_end(hashes[b])
                continue
            lo, hi = b * BLOCK, (b + 1) * BLOCK
            self._blocks[hashes[b]] = [(k[:, lo:hi].clone(), v[:, lo:hi].clone()) for k, v in kv]
            while len(self._blocks) > self.capacity:
                self._blocks.popitem(last=False)

    @property
    def usage(self) -> float:
        return len(self._blocks) / self.capacity if self.capacity else 0.0


class Engine:
    """The model on one thread, stepping its running requests in turn."""

    def __init__(self, model: TinyLM, cache_blocks: int = 1024, max_running: int = 8) -> None:
        self.model = model
        self.cache = PrefixCache(cache_blocks)
        self.max_running = max_running
        self.stats = EngineStats()
        self._inbox: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._waiting: list[GenRequest] = []
        self._running: list[GenRequest] = []
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._loop, name="tinylm-engine", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._inbox.put(None)
        self._thread.join(timeout=10)

    def submit(self, req: GenRequest) -> None:
        with self._lock:
            self.stats.waiting += 1
        self._inbox.put(req)

    def warm_up(self) -> None:
        """One forward pass, so the first request does not pay for lazy initialisation."""
        self.model(tokenize("warm up"), None)

    # -- the engine thread -----------------------------------------------------------------------

    def _loop(self) -> None:
        while True:
            idle = not self._running and not self._waiting
            try:
                item = self._inbox.get() if idle else self._inbox.get_nowait()
            except queue.Empty:
                item = _NOTHING
            while item is not _NOTHING:
                if item is None:
                    return
                self._waiting.append(item)
                try:
                    item = self._inbox.get_nowait()
                except queue.Empty:
                    item = _NOTHING
            while self._waiting and len(self._running) < self.max_running:
                req = self._waiting.pop(0)
                self._running.append(req)
            with self._lock:
                self.stats.running = len(self._running)
                self.stats.waiting = len(self._waiting)
            for req in list(self._running):
                try:
                    finished = self._step(req)
                except Exception as exc:  # a bad request must not stop the engine
                    req.emit("error", str(exc))
                    finished = True
                if finished:
                    self._running.remove(req)
            with self._lock:
                self.stats.running = len(self._running)
                self.stats.cache_usage = self.cache.usage

    def _step(self, req: GenRequest) -> bool:
        """One step of ``req``: its prefill (first step) or one more token; True when it is done."""
        if req.cancelled.is_set():
            req.emit("done", {"finish_reason": "abort"})
            return True
        if req.kv is None:
            self._prefill(req)
            if req.embed:
                return True
        else:
            token = req.generated[-1]
            logits, _, req.kv = self.model([token], req.kv)
            req.next_logits = logits
        token = self._sample(req)
        req.generated.append(token)
        with self._lock:
            self.stats.generation_tokens += 1
        req.emit("token", detokenize([token]))
        if len(req.generated) >= req.max_tokens:
            req.emit("done", {"finish_reason": "length", "completion_tokens": len(req.generated)})
            return True
        return False

    def _prefill(self, req: GenRequest) -> None:
        tokens = req.prompt or [EOS]
        hashes = PrefixCache.hashes(tokens)
        # at least one token is computed: its logits start the generation
        usable = [h for i, h in enumerate(hashes) if (i + 1) * BLOCK < len(tokens)]
        matched, past = self.cache.lookup(usable)
        done = matched * BLOCK
        logits, hidden, kv = self.model(tokens[done:], past)
        self.cache.insert(hashes, kv, matched)
        req.kv, req.next_logits, req.cached_tokens = kv, logits, done
        with self._lock:
            self.stats.requests += 1
            self.stats.prompt_tokens += len(tokens)
            self.stats.prefix_queries += len(tokens)
            self.stats.prefix_hits += done
        if req.embed:
            vector = hidden.mean(dim=0)
            vector = vector / (vector.norm() + 1e-9)
            req.emit(
                "done", {"embedding": vector.tolist(), "prompt_tokens": len(tokens), "cached_tokens": done}
            )

    def _sample(self, req: GenRequest) -> int:
        logits = req.next_logits
        assert logits is not None
        allowed = logits[_PRINTABLE]
        if req.temperature <= 0:
            return int(_PRINTABLE[int(allowed.argmax())])
        if req.generator is None:
            req.generator = torch.Generator()
            req.generator.manual_seed(req.seed if req.seed is not None else time.monotonic_ns() & 0xFFFFFFFF)
        probs = torch.softmax(allowed / max(req.temperature, 1e-3), dim=-1)
        return int(_PRINTABLE[int(torch.multinomial(probs, 1, generator=req.generator))])
