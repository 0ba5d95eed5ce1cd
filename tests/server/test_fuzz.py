"""Fuzzing the REST API with schemathesis against a live ``muster up --runtime none``.

Every operation of the OpenAPI document gets generated requests, valid and invalid (bodies,
path and query parameters), a bounded number each so the run fits in CI. Every answer is
checked: no 5xx; a status, content type, headers and body the document declares; data that
breaks the declared schema refused. Every undeclared method of every path is a 405 whose
``Allow`` lists the declared ones. Then the server must still be healthy and its log free
of tracebacks.

schemathesis runs as its command-line tool (``st run``), as CI would run it by hand; its
pytest plugin needs the schema when tests are collected, before this module has a server.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from muster.testing.up import MusterUp

pytest.importorskip("schemathesis", reason="schemathesis is in the dev extra: pip install -e '.[dev]'")

# Generated requests per operation (about 130 operations): a bounded run, fit for CI;
# MUSTER_FUZZ_EXAMPLES=100 runs a deeper one by hand.
EXAMPLES = int(os.environ.get("MUSTER_FUZZ_EXAMPLES", "3"))
SEED = 22
CHECKS = (
    "not_a_server_error",
    "status_code_conformance",
    "content_type_conformance",
    "response_headers_conformance",
    "response_schema_conformance",
    "negative_data_rejection",
)
_METHODS = ("get", "put", "post", "delete", "patch", "options")
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def fuzzed_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MusterUp]:
    home = tmp_path_factory.mktemp("fuzz-home")
    up = MusterUp(home, extra_args=["--runtime", "none"])
    up.start()
    # The server builds its OpenAPI document on the first request for it (seconds): not inside
    # schemathesis' own timeout.
    httpx.get(f"{up.url}/openapi.json", headers=_auth(up), timeout=120).raise_for_status()
    try:
        yield up
    finally:
        up.stop()


@pytest.mark.slow
@pytest.mark.timeout(900)  # on a loaded machine; about a minute of CPU on an idle one
def test_schemathesis_finds_nothing(fuzzed_server: MusterUp, tmp_path: Path):
    st = shutil.which("st", path=str(Path(sys.executable).parent))
    assert st is not None, "schemathesis' st is not installed next to this interpreter"
    env = {
        **os.environ,
        # The hooks give every generated watch a timeout (a watch streams until the client leaves).
        "SCHEMATHESIS_HOOKS": "tests.server.fuzz_hooks",
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    command = [
        st,
        "run",
        f"{fuzzed_server.url}/openapi.json",
        "--header",
        f"Authorization: Bearer {fuzzed_server.token}",
        "--phases",
        "fuzzing",
        "--mode",
        "all",
        "--max-examples",
        str(EXAMPLES),
        "--seed",
        str(SEED),
        "--checks",
        ",".join(CHECKS),
        "--request-timeout",
        "30",
        "--workers",
        "2",
        # Hypothesis' health checks time data generation by the wall clock: not on a shared CI box.
        "--suppress-health-check",
        "all",
        "--report",
        "junit",
        "--report-dir",
        str(tmp_path),
    ]
    # schemathesis keeps its cache (.schemathesis/) in the working directory: the test's, not the repo.
    run = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    output = run.stdout + run.stderr
    assert run.returncode == 0, output[-12000:]
    generated = re.search(r"(\d+) generated, (\d+) passed", output)
    assert generated is not None, output[-4000:]
    # Each operation got its requests (a few are fewer: a boolean has two values).
    assert int(generated[1]) == int(generated[2]) >= 100 * EXAMPLES, output[-4000:]


@pytest.mark.slow
def test_every_undeclared_method_is_a_405_with_allow(fuzzed_server: MusterUp):
    """RFC 9110 §15.5.6: a 405 names the methods the path does serve."""
    with httpx.Client(base_url=fuzzed_server.url, headers=_auth(fuzzed_server), timeout=30) as http:
        paths = http.get("/openapi.json").json()["paths"]
        checked = 0
        for template, operations in paths.items():
            declared = {m.upper() for m in operations if m in _METHODS}
            path = template.replace("{namespace}", "default").replace("{name}", "x").replace("{kind}", "pod")
            for method in _METHODS:
                if method.upper() in declared:
                    continue
                resp = http.request(method.upper(), path)
                assert resp.status_code == 405, (method, path, resp.text)
                assert set(resp.headers["allow"].split(", ")) == declared, (method, path, resp.headers)
                assert resp.json()["error"]["reason"] == "MethodNotAllowed"
                checked += 1
        assert checked > 200


@pytest.mark.slow
def test_the_server_is_healthy_after_the_fuzzing(fuzzed_server: MusterUp):
    with httpx.Client(base_url=fuzzed_server.url, headers=_auth(fuzzed_server), timeout=30) as http:
        assert http.get("/healthz").json() == {"status": "ok"}
        assert http.get("/readyz").status_code == 200
        created = http.post(
            "/apis/muster.dev/v1/namespaces/default/trainingjobs",
            json={"metadata": {"name": "after-the-fuzz"}, "spec": _spec()},
        )
        assert created.status_code == 201, created.text
    assert "Traceback" not in fuzzed_server.log(), fuzzed_server.log()[-6000:]


def _auth(up: MusterUp) -> dict[str, str]:
    return {"Authorization": f"Bearer {up.token}"}


def _spec() -> dict:
    container = {"name": "main", "command": ["true"]}
    return {"replicaSpecs": {"Worker": {"replicas": 1, "template": {"spec": {"containers": [container]}}}}}
