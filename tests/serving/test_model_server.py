"""The tiny model server in-process: its prefix cache really skips cached prompt blocks (the
reply's cached_tokens and the vLLM-named counters say so), streaming, embeddings, KServe v2,
errors, and the echo engine."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

torch = pytest.importorskip("torch")

from muster.serving.model_server import EchoEngine, ModelServer  # noqa: E402
from muster.serving.tinylm import BLOCK, Engine, ModelConfig, PrefixCache, TinyLM  # noqa: E402


@pytest.fixture
def server():
    engine = Engine(TinyLM(ModelConfig(layers=1, d_model=32, d_ff=64)), cache_blocks=64)
    engine.start()
    app = ModelServer(["tiny"], engine)
    app.ready = True
    yield app
    engine.stop()


def call(app, method: str, path: str, body: dict | None = None) -> httpx.Response:
    async def go() -> httpx.Response:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://replica") as client:
            return await client.request(method, path, json=body)

    return asyncio.run(go())


def test_a_shared_prefix_is_served_from_the_cache(server):
    prefix = "You are a terse assistant. " * 8  # 216 bytes: 13 whole blocks
    first = call(
        server, "POST", "/v1/completions", {"model": "tiny", "prompt": prefix + "one", "max_tokens": 2}
    )
    second = call(
        server, "POST", "/v1/completions", {"model": "tiny", "prompt": prefix + "two", "max_tokens": 2}
    )
    assert first.json()["usage"]["prompt_tokens_details"]["cached_tokens"] == 0
    cached = second.json()["usage"]["prompt_tokens_details"]["cached_tokens"]
    assert cached == (len(prefix) // BLOCK) * BLOCK
    metrics = call(server, "GET", "/metrics").text
    assert f'vllm:prefix_cache_hits_total{{model_name="tiny"}} {cached}' in metrics
    assert "vllm:num_requests_waiting" in metrics and "vllm:kv_cache_usage_perc" in metrics


def test_a_cached_prompt_computes_the_same_as_an_uncached_one():
    model = TinyLM(ModelConfig(layers=2, d_model=32, d_ff=64))
    tokens = list(range(40, 90))
    full, _, _ = model(tokens, None)
    cache = PrefixCache(16)
    _, _, kv = model(tokens[:32], None)
    cache.insert(PrefixCache.hashes(tokens[:32]), kv, 0)
    matched, past = cache.lookup(PrefixCache.hashes(tokens)[:2])
    assert matched == 2
    rest, _, _ = model(tokens[32:], past)
    assert torch.allclose(full, rest, atol=1e-4)


def test_streaming_chat_embeddings_and_v2(server):
    reply = call(
        server,
        "POST",
        "/v1/chat/completions",
        {
            "model": "tiny",
            "messages": [{"role": "user", "content": "Hi"}],
            "max_tokens": 3,
            "stream": True,
            "stream_options": {"include_usage": True},
        },
    )
    events = [line[6:] for line in reply.text.split("\n") if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    assert chunks[-2]["choices"][0]["finish_reason"] == "length"
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] == 3
    emb = call(server, "POST", "/v1/embeddings", {"model": "tiny", "input": "hello"}).json()
    vector = emb["data"][0]["embedding"]
    assert len(vector) == 32 and abs(sum(v * v for v in vector) - 1) < 1e-3
    infer = {"inputs": [{"name": "text", "shape": [1], "datatype": "BYTES", "data": ["hi"]}], "id": "x"}
    out = call(server, "POST", "/v2/models/tiny/infer", infer).json()
    assert out["id"] == "x" and out["outputs"][0]["datatype"] == "BYTES"
    assert call(server, "GET", "/v2/models/tiny/ready").json() == {"ready": True}
    assert call(server, "GET", "/v2/models/other/ready").status_code == 404


def test_errors_and_readiness(server):
    missing = call(server, "POST", "/v1/completions", {"model": "gpt", "prompt": "x"})
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "model_not_found"
    assert call(server, "POST", "/v1/completions", {"model": "tiny", "max_tokens": 0}).status_code == 400
    server.ready = False
    assert call(server, "GET", "/health").status_code == 503
    loading = call(server, "POST", "/v1/completions", {"model": "tiny", "prompt": "x"})
    assert loading.status_code == 503 and loading.headers["retry-after"] == "1"


def test_the_echo_engine_answers_without_a_model():
    app = ModelServer(["echo"], EchoEngine())
    app.ready = True
    reply = call(app, "POST", "/v1/completions", {"model": "echo", "prompt": "x", "max_tokens": 3}).json()
    assert reply["choices"][0]["text"] == "aaa"
