"""The pods' Python on the local runtime: ``muster up --python`` (MUSTER_PYTHON), else the
server's own virtual environment, first on the pods' PATH (docs/runtime-local.md)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from muster.runtime.base import Container
from muster.runtime.local.fake import parse_fake_gpus
from muster.runtime.local.launch import base_environment, pod_python, resolve_python
from muster.runtime.local.runtime import LocalRuntime
from tests.runtime.local.conftest import launch, run_pod, shutdown


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtual environment (no pip: it only needs its own interpreter)."""
    where = tmp_path_factory.mktemp("pods-venv") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True, timeout=60)
    return where


class TestChoice:
    def test_a_configured_venv_goes_first_on_path_and_sets_virtual_env(self, venv: Path) -> None:
        env = base_environment({"PATH": "/usr/bin:/bin", "PYTHONHOME": "/elsewhere"}, venv)
        assert env["PATH"].split(os.pathsep) == [str(venv / "bin"), "/usr/bin", "/bin"]
        assert env["VIRTUAL_ENV"] == str(venv)
        assert "PYTHONHOME" not in env

    def test_an_interpreter_path_is_taken_as_given_not_through_its_link(self, venv: Path) -> None:
        python = venv / "bin" / "python"
        assert python.is_symlink()  # a venv's python links to the base interpreter
        assert resolve_python(python) == python
        assert pod_python(python) == (venv / "bin", venv)
        assert resolve_python(venv) == python

    def test_a_plain_interpreter_puts_its_directory_first_without_virtual_env(self, tmp_path: Path) -> None:
        python = tmp_path / "bin" / "python3"
        python.parent.mkdir()
        python.write_text("#!/bin/sh\n")
        python.chmod(0o755)
        env = base_environment({"PATH": f"/usr/bin{os.pathsep}{python.parent}"}, python)
        assert env["PATH"].split(os.pathsep) == [str(python.parent), "/usr/bin"]  # not twice
        assert "VIRTUAL_ENV" not in env

    @pytest.mark.parametrize("bad", ["missing", "empty-dir"])
    def test_a_path_that_is_no_interpreter_is_refused(self, tmp_path: Path, bad: str) -> None:
        path = tmp_path / bad
        if bad == "empty-dir":
            path.mkdir()
        with pytest.raises(ValueError, match="give a Python executable or a venv"):
            resolve_python(path)

    def test_without_configuration_the_servers_own_venv_is_used_when_it_runs_in_one(
        self, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
    ) -> None:
        monkeypatch.setattr(sys, "prefix", str(tmp_path / "venv"))
        monkeypatch.setattr(sys, "base_prefix", "/usr")
        env = base_environment({"PATH": "/usr/bin"})
        assert env["PATH"].split(os.pathsep)[0] == str(tmp_path / "venv" / "bin")
        assert env["VIRTUAL_ENV"] == str(tmp_path / "venv")
        monkeypatch.setattr(sys, "prefix", "/usr")
        assert base_environment({"PATH": "/usr/bin"}) == {"PATH": "/usr/bin"}


def test_a_pod_running_python_runs_the_configured_interpreter(muster_home: Path, venv: Path) -> None:
    rt = LocalRuntime(muster_home, fake_gpus=parse_fake_gpus("1"), node="test-node", python=venv)
    try:
        code = "import os, sys; print(sys.executable, sys.prefix, os.environ['VIRTUAL_ENV'])"
        pod = launch("which-python", Container("main", ("python", "-c", code)))
        assert run_pod(rt, pod).phase == "Succeeded"
        executable, prefix, virtual_env = "".join(rt.logs(pod.ref)).split()
        assert Path(executable) == venv / "bin" / "python"
        assert Path(prefix) == venv and Path(virtual_env) == venv
    finally:
        shutdown(rt)
