"""``muster up`` as a subprocess, for end-to-end tests: a private MUSTER_HOME, a free port,
ready when ``/readyz`` answers, stopped by PID (SIGTERM, then SIGKILL after a grace period).
The server's output goes to ``<home>/up.log`` so a failing test can show it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

import httpx

from muster.config import read_credentials
from muster.controllers.cache import MUTATION_REPORT
from muster.testing import free_port, wait_for

__all__ = ["MusterUp", "cli_env", "muster_command", "run_cli"]


def muster_command() -> list[str]:
    """How to run the ``muster`` CLI of this interpreter's installation."""
    script = Path(sys.executable).parent / "muster"
    return [str(script)] if script.exists() else [sys.executable, "-m", "muster"]


def run_cli(
    home: Path,
    *args: str,
    input: str | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float = 60,
) -> subprocess.CompletedProcess[str]:
    """Run ``muster ARGS`` with MUSTER_HOME=home (server and token found through it)."""
    full_env = cli_env(home) | dict(env or {})
    return subprocess.run(
        [*muster_command(), *args], input=input, env=full_env, capture_output=True, text=True, timeout=timeout
    )


class MusterUp:
    """One ``muster up`` process; ``start()`` waits until it is ready."""

    def __init__(self, home: Path, port: int | None = None, extra_args: Sequence[str] = ()) -> None:
        self.home = home
        self.port = port or free_port()
        self.extra_args = list(extra_args)
        if "--gateway-port" not in self.extra_args:  # never the default port: tests run side by side
            self.extra_args += ["--gateway-port", str(free_port())]
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = home / "up.log"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def gateway_url(self) -> str:
        """The serving gateway's base URL (``--gateway-port``)."""
        port = self.extra_args[self.extra_args.index("--gateway-port") + 1]
        return f"http://127.0.0.1:{port}"

    @property
    def token(self) -> str:
        creds = read_credentials(self.home / "credentials")
        assert creds is not None, "muster up has not written its credentials yet"
        return creds["token"]

    def start(self, timeout: float = 60) -> MusterUp:
        self.home.mkdir(parents=True, exist_ok=True)
        cmd = [*muster_command(), "up", "--port", str(self.port), "--home", str(self.home), *self.extra_args]
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(cmd, env=cli_env(self.home), stdout=log, stderr=subprocess.STDOUT)
        try:
            wait_for(self._ready_or_exited, timeout=timeout, what=f"muster up on port {self.port}")
        except TimeoutError as exc:
            self.stop()
            raise TimeoutError(f"{exc}\n--- {self.log_path} ---\n{self.log()}") from None
        if self.proc is not None and self.proc.poll() is not None:
            code, self.proc = self.proc.returncode, None
            raise RuntimeError(f"muster up exited with {code}:\n{self.log()}")
        return self

    def stop(self, grace: float = 15) -> int | None:
        """SIGTERM the process (by PID), SIGKILL it after ``grace`` seconds; its exit code."""
        if self.proc is None:
            return None
        proc, self.proc = self.proc, None
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait(timeout=grace)
        # Reported by a server run with MUSTER_CACHE_MUTATION_DETECTOR (the test suite's):
        # a cached object edited in place is a bug, whatever the test checked.
        mutations = [line for line in self.log().splitlines() if MUTATION_REPORT in line]
        if mutations:
            raise AssertionError("\n".join(mutations))
        return proc.returncode

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def __enter__(self) -> MusterUp:
        # Already started (``with MusterUp(...).start(timeout=...)``): a second process on the
        # same home and port would look ready through the first one, which then outlives stop().
        return self if self.proc is not None else self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    def _ready_or_exited(self) -> bool:
        if self.proc is not None and self.proc.poll() is not None:
            return True
        if not (self.home / "credentials").exists():
            return False
        resp = httpx.get(f"{self.url}/readyz", headers={"Authorization": f"Bearer {self.token}"}, timeout=5)
        return resp.status_code == 200


def cli_env(home: Path) -> dict[str, str]:
    """This process's environment for a ``muster`` command on ``home`` (server and token found
    through it, not through variables naming another server)."""
    env = {k: v for k, v in os.environ.items() if k not in ("MUSTER_SERVER", "MUSTER_TOKEN", "MUSTER_STORE")}
    env["MUSTER_HOME"] = str(home)
    return env
