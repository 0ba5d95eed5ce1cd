"""Muster's small model server, for the demo, the tests and the benchmarks: an OpenAI- and
KServe-v2-compatible HTTP server (:mod:`.model_server`) around a tiny PyTorch transformer with
random weights and a real per-replica KV prefix cache (:mod:`.tinylm`), so nothing is
downloaded and prefix-aware routing changes time-to-first-token measurably. On real GPUs, run
vLLM, llama.cpp's server or Ollama as the predictor instead (docs/serving.md).
"""
