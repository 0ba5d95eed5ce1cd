"""``python -m muster.serving.model_server``: the tiny model behind an OpenAI-compatible API.

Endpoints (the subset vLLM's server offers that Muster's gateway routes, plus KServe v2):

* ``POST /v1/completions``, ``POST /v1/chat/completions`` (``stream: true`` sends server-sent
  events, one per token, then ``data: [DONE]``; ``stream_options.include_usage`` adds a usage
  chunk), ``POST /v1/embeddings``, ``GET /v1/models``;
* ``GET /health`` (200 once the model is loaded), ``GET /metrics`` (Prometheus text with
  vLLM's gauge names, which routers read: ``vllm:num_requests_running``,
  ``vllm:num_requests_waiting``, ``vllm:kv_cache_usage_perc``, and the prefix-cache counters
  ``vllm:prefix_cache_queries_total`` / ``vllm:prefix_cache_hits_total`` in tokens);
* KServe v2: ``GET /v2``, ``/v2/health/live``, ``/v2/health/ready``, ``/v2/models/{name}``,
  ``/v2/models/{name}/ready``, ``POST /v2/models/{name}/infer`` (a BYTES input ``text`` in, a
  BYTES output ``text`` out).

Usage reports ``prompt_tokens_details.cached_tokens``: the prompt tokens the prefix cache had.
The port comes from ``--port``, else ``$PORT`` (Muster sets it per replica), else 8080; the
host from ``--host``, else ``$HOST``, else 127.0.0.1. ``--load-seconds`` waits that long before
reporting ready, to stand in for loading a large model.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time
import uuid
from typing import Any

from muster.gateway.asgi import (
    Receive,
    Scope,
    Send,
    read_body,
    run_lifespan,
    send_bytes,
    send_error,
    send_json,
    start_response,
)

__all__ = ["ModelServer", "main"]

_SSE_HEADERS = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]


class ModelServer:
    """The ASGI application (built around an :class:`~muster.serving.tinylm.Engine`)."""

    def __init__(self, names: list[str], engine: Any, load_seconds: float = 0.0) -> None:
        self.names = names
        self.engine = engine
        self.load_seconds = load_seconds
        self.ready = False
        self.created = int(time.time())
        self.started = time.monotonic()
        self.failed = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await run_lifespan(receive, send, self._startup, self._shutdown)
            return
        if scope["type"] != "http":
            return
        path, method = scope["path"], scope["method"]
        try:
            if method == "GET":
                await self._get(path, send)
            elif method == "POST":
                await self._post(path, scope, receive, send)
            else:
                await send_error(send, 405, f"{method} is not allowed here")
        except (ValueError, KeyError, TypeError) as exc:
            await send_error(send, 400, f"bad request: {exc}")

    async def _startup(self) -> None:
        self.engine.start()
        await asyncio.get_running_loop().run_in_executor(None, self.engine.warm_up)
        if self.load_seconds:
            asyncio.get_running_loop().call_later(self.load_seconds, self._set_ready)
        else:
            self._set_ready()

    async def _shutdown(self) -> None:
        self.engine.stop()

    def _set_ready(self) -> None:
        self.ready = True
        # wall-clock time too: a benchmark sets it against the process's start as the runtime saw it
        print(f"ready after {time.monotonic() - self.started:.3f}s at {time.time():.6f}", flush=True)

    # -- GET ------------------------------------------------------------------------------------

    async def _get(self, path: str, send: Send) -> None:
        if path in ("/health", "/v2/health/ready"):
            status = 200 if self.ready else 503
            await send_json(send, status, {"ready": self.ready} if path.startswith("/v2") else {})
        elif path == "/v2/health/live":
            await send_json(send, 200, {"live": True})
        elif path == "/metrics":
            await send_bytes(
                send, 200, self._metrics().encode(), [(b"content-type", b"text/plain; version=0.0.4")]
            )
        elif path == "/v1/models":
            data = [
                {"id": n, "object": "model", "created": self.created, "owned_by": "muster"}
                for n in self.names
            ]
            await send_json(send, 200, {"object": "list", "data": data})
        elif path == "/v2":
            await send_json(send, 200, {"name": "muster-tinylm", "version": "1", "extensions": []})
        elif path.startswith("/v2/models/"):
            name, _, rest = path[len("/v2/models/") :].partition("/")
            if name not in self.names:
                await send_json(send, 404, {"error": f"model {name!r} is not served here"})
            elif rest == "ready":
                await send_json(send, 200 if self.ready else 503, {"ready": self.ready})
            else:
                await send_json(send, 200, _v2_metadata(name))
        else:
            await send_error(send, 404, f"no route {path}")

    def _metrics(self) -> str:
        s = self.engine.stats
        model = self.names[0]
        lines = []
        for name, kind, value in (
            ("vllm:num_requests_running", "gauge", s.running),
            ("vllm:num_requests_waiting", "gauge", s.waiting),
            ("vllm:kv_cache_usage_perc", "gauge", s.cache_usage),
            ("vllm:prefix_cache_queries_total", "counter", s.prefix_queries),
            ("vllm:prefix_cache_hits_total", "counter", s.prefix_hits),
            ("vllm:prompt_tokens_total", "counter", s.prompt_tokens),
            ("vllm:generation_tokens_total", "counter", s.generation_tokens),
            ("vllm:request_success_total", "counter", s.requests),
        ):
            lines.append(f"# TYPE {name} {kind}")
            lines.append(f'{name}{{model_name="{model}"}} {value}')
        return "\n".join(lines) + "\n"

    # -- POST -----------------------------------------------------------------------------------

    async def _post(self, path: str, scope: Scope, receive: Receive, send: Send) -> None:
        body = await read_body(receive)
        if path.startswith("/v2/models/") and path.endswith("/infer"):
            await self._v2_infer(path[len("/v2/models/") : -len("/infer")], body, send)
            return
        if path not in ("/v1/completions", "/v1/chat/completions", "/v1/embeddings"):
            await send_error(send, 404, f"no route {path}")
            return
        try:
            req = json.loads(body)
        except ValueError:
            await send_error(send, 400, "the body is not JSON")
            return
        if not isinstance(req, dict):
            await send_error(send, 400, "the body must be a JSON object")
            return
        model = req.get("model")
        if model not in self.names:
            await send_error(
                send, 404, f"the model {model!r} does not exist", "model_not_found", param="model"
            )
            return
        if not self.ready:
            await send_error(send, 503, "the model is still loading", retry_after=1)
            return
        if path == "/v1/embeddings":
            await self._embeddings(req, send)
        else:
            await self._generate(req, path == "/v1/chat/completions", send)

    async def _generate(self, req: dict[str, Any], chat: bool, send: Send) -> None:
        if bool(req.get("stream")):
            gen, events, base = self._submit(req, chat)
            try:
                await self._stream(base, chat, gen, events, send, req)
            except BaseException:
                gen.cancelled.set()  # the client went away: stop generating for it
                raise
            return
        try:
            out = await self.complete(req, chat)
        except ValueError as exc:
            await send_error(send, 400, str(exc))
            return
        except RuntimeError as exc:
            await send_error(send, 500, str(exc))
            return
        await send_json(send, 200, out)

    async def complete(self, req: dict[str, Any], chat: bool = False) -> dict[str, Any]:
        """A whole (not streamed) completion or chat completion: the reply's JSON object. Raises
        ValueError for a bad request, RuntimeError when the engine fails. (The Ray Serve side of
        benchmarks/serving_gateway.py serves the same function.)"""
        gen, events, base = self._submit(req, chat)
        parts: list[str] = []
        try:
            while True:
                kind, value = await events.get()
                if kind == "token":
                    parts.append(value)
                elif kind == "error":
                    raise RuntimeError(value)
                else:
                    break
        except BaseException:
            gen.cancelled.set()
            raise
        text = "".join(parts)
        choice: dict[str, Any] = {"index": 0, "finish_reason": value.get("finish_reason", "length")}
        if chat:
            choice["message"] = {"role": "assistant", "content": text}
        else:
            choice.update(text=text, logprobs=None)
        return {
            **base,
            "object": "chat.completion" if chat else "text_completion",
            "choices": [choice],
            "usage": _usage(gen),
        }

    def _submit(self, req: dict[str, Any], chat: bool) -> tuple[Any, asyncio.Queue, dict[str, Any]]:
        from muster.serving.engine import GenRequest, tokenize

        prompt = _chat_prompt(req["messages"]) if chat else _text_prompt(req.get("prompt", ""))
        asked = req.get("max_tokens", req.get("max_completion_tokens"))
        max_tokens = 16 if asked is None else int(asked)
        if max_tokens < 1:
            raise ValueError("max_tokens must be >= 1")
        events: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
        loop = asyncio.get_running_loop()
        temperature = req.get("temperature")
        gen = GenRequest(
            prompt=tokenize(prompt),
            max_tokens=max_tokens,
            temperature=1.0 if temperature is None else float(temperature),
            seed=req.get("seed"),
            emit=lambda kind, value: loop.call_soon_threadsafe(events.put_nowait, (kind, value)),
        )
        self.engine.submit(gen)
        ident = ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex[:24]
        return gen, events, {"id": ident, "created": int(time.time()), "model": req["model"]}

    async def _stream(
        self,
        base: dict[str, Any],
        chat: bool,
        gen: Any,
        events: asyncio.Queue,
        send: Send,
        req: dict[str, Any],
    ) -> None:
        await start_response(send, 200, _SSE_HEADERS)
        kind_name = "chat.completion.chunk" if chat else "text_completion"
        first = True
        while True:
            kind, value = await events.get()
            if kind == "error":
                await _event(
                    send, {"error": {"message": value, "type": "server_error", "param": None, "code": None}}
                )
                break
            if kind == "token":
                if chat:
                    delta: dict[str, Any] = {"content": value}
                    if first:
                        delta["role"] = "assistant"
                    choice: dict[str, Any] = {"index": 0, "delta": delta, "finish_reason": None}
                else:
                    choice = {"index": 0, "text": value, "logprobs": None, "finish_reason": None}
                first = False
                await _event(send, {**base, "object": kind_name, "choices": [choice]})
                continue
            finish = value.get("finish_reason", "length")
            last = (
                {"index": 0, "delta": {}, "finish_reason": finish}
                if chat
                else {
                    "index": 0,
                    "text": "",
                    "logprobs": None,
                    "finish_reason": finish,
                }
            )
            await _event(send, {**base, "object": kind_name, "choices": [last]})
            if (req.get("stream_options") or {}).get("include_usage"):
                await _event(send, {**base, "object": kind_name, "choices": [], "usage": _usage(gen)})
            break
        await send({"type": "http.response.body", "body": b"data: [DONE]\n\n", "more_body": False})

    async def _embeddings(self, req: dict[str, Any], send: Send) -> None:
        inputs = req.get("input")
        texts = [inputs] if isinstance(inputs, str) else inputs
        if not isinstance(texts, list) or not texts or not all(isinstance(t, str) for t in texts):
            await send_error(send, 400, "input must be a string or a list of strings", param="input")
            return
        data, total = [], 0
        for i, text in enumerate(texts):
            result = await self._embed_one(text)
            total += result["prompt_tokens"]
            data.append({"object": "embedding", "index": i, "embedding": result["embedding"]})
        usage = {"prompt_tokens": total, "total_tokens": total}
        await send_json(send, 200, {"object": "list", "data": data, "model": req["model"], "usage": usage})

    async def _embed_one(self, text: str) -> dict[str, Any]:
        from muster.serving.engine import GenRequest, tokenize

        loop = asyncio.get_running_loop()
        done: asyncio.Future[dict[str, Any]] = loop.create_future()

        def emit(kind: str, value: Any) -> None:
            if kind == "done":
                loop.call_soon_threadsafe(done.set_result, value)
            elif kind == "error":
                loop.call_soon_threadsafe(done.set_exception, ValueError(value))

        self.engine.submit(GenRequest(tokenize(text), 1, 0.0, emit, embed=True))
        return await done

    async def _v2_infer(self, name: str, body: bytes, send: Send) -> None:
        if name not in self.names:
            await send_json(send, 404, {"error": f"model {name!r} is not served here"})
            return
        try:
            req = json.loads(body)
            first = req["inputs"][0]
            text = first["data"][0] if isinstance(first["data"], list) else first["data"]
            params = req.get("parameters") or {}
        except (ValueError, KeyError, IndexError, TypeError):
            await send_json(send, 400, {"error": "expected inputs[0].data holding the prompt text (BYTES)"})
            return
        from muster.serving.engine import GenRequest, tokenize

        loop = asyncio.get_running_loop()
        events: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
        gen = GenRequest(
            tokenize(str(text)),
            int(params.get("max_tokens", 16)),
            float(params.get("temperature", 0.0)),
            lambda kind, value: loop.call_soon_threadsafe(events.put_nowait, (kind, value)),
        )
        self.engine.submit(gen)
        parts = []
        while True:
            kind, value = await events.get()
            if kind == "token":
                parts.append(value)
            elif kind == "error":
                await send_json(send, 500, {"error": value})
                return
            else:
                break
        out = {
            "model_name": name,
            "id": req.get("id", uuid.uuid4().hex),
            "outputs": [{"name": "text", "shape": [1], "datatype": "BYTES", "data": ["".join(parts)]}],
        }
        await send_json(send, 200, out)


async def _event(send: Send, obj: dict[str, Any]) -> None:
    await send(
        {
            "type": "http.response.body",
            "body": b"data: " + json.dumps(obj).encode() + b"\n\n",
            "more_body": True,
        }
    )


def _usage(gen: Any) -> dict[str, Any]:
    prompt, completion = len(gen.prompt), len(gen.generated)
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": gen.cached_tokens},
    }


def _text_prompt(prompt: Any) -> str:
    if isinstance(prompt, list):
        if not prompt:
            return ""
        prompt = prompt[0]
    if not isinstance(prompt, str):
        raise ValueError("prompt must be a string")
    return prompt


def _chat_prompt(messages: Any) -> str:
    if not isinstance(messages, list) or not messages:
        raise ValueError("messages must be a non-empty list")
    parts = []
    for m in messages:
        content = m.get("content") or ""
        if isinstance(content, list):  # content parts: keep the text ones
            content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
        parts.append(f"<|{m.get('role', 'user')}|>\n{content}\n")
    return "".join(parts) + "<|assistant|>\n"


def _v2_metadata(name: str) -> dict[str, Any]:
    return {
        "name": name,
        "versions": ["1"],
        "platform": "pytorch",
        "inputs": [{"name": "text", "datatype": "BYTES", "shape": [-1]}],
        "outputs": [{"name": "text", "datatype": "BYTES", "shape": [-1]}],
    }


class EchoEngine:
    """The engine's interface without a model: each request gets ``max_tokens`` letters, at once
    or after ``delay`` seconds (a stand-in for work that takes time but no CPU)."""

    def __init__(self, delay: float = 0.0) -> None:
        from muster.serving.engine import EngineStats

        self.stats = EngineStats()
        self.delay = delay

    def start(self) -> None:
        pass

    def stop(self) -> None:
        pass

    def warm_up(self) -> None:
        pass

    def submit(self, req: Any) -> None:
        self.stats.requests += 1
        self.stats.prompt_tokens += len(req.prompt)
        if self.delay > 0:
            self.stats.running += 1
            asyncio.get_running_loop().call_later(self.delay, self._answer, req)
        else:
            self._answer(req)

    def _answer(self, req: Any) -> None:
        if self.delay > 0:
            self.stats.running -= 1
        for _ in range(req.max_tokens):
            req.generated.append(ord("a"))
            req.emit("token", "a")
        req.emit("done", {"finish_reason": "length", "completion_tokens": req.max_tokens})


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m muster.serving.model_server", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--port", type=int, default=int(os.environ.get("PORT", "8080")))
    parser.add_argument("--host", default=os.environ.get("HOST", "127.0.0.1"))
    parser.add_argument(
        "--model-name",
        action="append",
        help="Name served (repeatable; default $MUSTER_MODEL_NAMES, else tiny-llm).",
    )
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--d-model", type=int, default=128)
    parser.add_argument(
        "--cache-blocks", type=int, default=1024, help="Prefix-cache capacity, in 16-token blocks."
    )
    parser.add_argument("--max-running", type=int, default=8, help="Requests stepped at once; more wait.")
    parser.add_argument("--threads", type=int, default=1, help="Torch threads.")
    parser.add_argument("--load-seconds", type=float, default=0.0, help="Pretend loading takes this long.")
    parser.add_argument(
        "--echo",
        action="store_true",
        help="No model: answer every request at once with a fixed text (to measure what is in front).",
    )
    parser.add_argument(
        "--echo-delay", type=float, default=0.0, help="With --echo: answer after this many seconds."
    )
    args = parser.parse_args(argv)
    started = time.monotonic()

    import uvicorn

    names = (
        args.model_name
        or [n for n in os.environ.get("MUSTER_MODEL_NAMES", "").split(",") if n]
        or ["tiny-llm"]
    )
    if args.echo:
        engine: Any = EchoEngine(args.echo_delay)
    else:
        import torch

        from muster.serving.tinylm import Engine, ModelConfig, TinyLM

        torch.set_num_threads(args.threads)
        model = TinyLM(ModelConfig(layers=args.layers, d_model=args.d_model, d_ff=4 * args.d_model))
        engine = Engine(model, cache_blocks=args.cache_blocks, max_running=args.max_running)
    server = ModelServer(names, engine, args.load_seconds)
    server.started = started
    uvicorn.run(
        server,
        host=args.host,
        port=args.port,
        log_level="warning",
        access_log=False,
        lifespan="on",
        timeout_graceful_shutdown=30,
    )


if __name__ == "__main__":
    main()
